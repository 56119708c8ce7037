#!/usr/bin/env bash
# The CI files of docs/examples (docs/CI.md) are valid YAML of the shape their CI system reads
# (a GitHub Actions matrix made from SHARDS, the one place the count is written, with a merge
# job after it; a GitLab `parallel:` job and a merge job publishing `reports: junit`); softrpma
# comes from its cached .deb, never built by a job that runs rpma-sim; and their rpma-sim
# commands, run as the CI would run them (the plan, each shard's, then the merge), sweep a real
# program and leave a valid JUnit file and the unsharded sweep's runs.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
unset TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE
examples="$root/docs/examples"
victim="$root/tools/rpma_sim/fault_victim"
if ! python3 -c 'import yaml' 2>/dev/null; then
  fail "python3-yaml is installed" "no yaml module: tools/ci/install_deps.sh installs python3-yaml"
  finish
  exit 1
fi

# commands FILE: the example's rpma-sim commands, one script per line as JSON: the shard jobs'
# (as many as it declares) then the merge job's, each with the variables its CI sets.
commands() {
  python3 - "$1" <<'PY'
import json, re, sys, yaml
path = sys.argv[1]
doc = yaml.safe_load(open(path))
out = []
def rpma_sim_steps(job):
    return [s["run"] for s in doc["jobs"][job]["steps"] if "rpma-sim" in s.get("run", "")]
if "jobs" in doc:  # GitHub Actions
    total = int(doc["env"]["SHARDS"])
    jobs = doc["jobs"]
    # The shard count is written once: the matrix is the build job's output made from SHARDS.
    assert jobs["sweep"]["strategy"]["matrix"]["shard"] == \
        "${{ fromJSON(needs.build.outputs.shards) }}", "the matrix is not made from SHARDS"
    assert jobs["build"]["outputs"]["shards"] == "${{ steps.plan.outputs.shards }}"
    assert jobs["sweep"]["needs"] == "build"
    assert jobs["merge"]["needs"] == "sweep" and jobs["merge"]["if"] == "always()"
    assert jobs["sweep"]["strategy"]["fail-fast"] is False
    uploads = [s for s in jobs["merge"]["steps"] if "junit" in str(s.get("uses", ""))]
    assert uploads and uploads[0]["with"]["report_paths"] == "sweep.xml", "no JUnit upload"
    # softrpma is installed from its package (cached), not built, in every job that runs it.
    for job in ("build", "sweep", "merge"):
        runs = " ".join(s.get("run", "") for s in jobs[job]["steps"])
        assert "apt-get install" in runs and "./dist/softrpma_*.deb" in runs, f"{job}: no .deb"
        assert "bazel" not in runs, f"{job} runs bazel"
    build_steps = jobs["build"]["steps"]
    cache = [s for s in build_steps if str(s.get("uses", "")).startswith("actions/cache")]
    assert cache and cache[0]["with"]["path"] == "dist", "no cache of the package"
    package = [s for s in build_steps if "run package" in s.get("run", "")]
    assert package and package[0]["if"] == "steps.cache.outputs.cache-hit != 'true'", \
        "the package is built even when cached"
    plan = [s for s in build_steps if s.get("id") == "plan"]
    out.append({"env": {"SHARDS": str(total)}, "script": plan[0]["run"], "job": "plan"})
    for script in rpma_sim_steps("sweep"):
        out.append({"env": {"SHARDS": str(total)}, "script": script, "job": "sweep",
                    "each_shard": total})
    for script in rpma_sim_steps("merge"):
        out.append({"env": {}, "script": script, "job": "merge"})
else:  # GitLab CI
    total = int(doc["sweep"]["parallel"])
    assert doc["merge"]["artifacts"]["reports"]["junit"] == "sweep.xml", "no JUnit report"
    assert doc["merge"]["when"] == "always"
    assert doc["build"]["cache"]["paths"] == ["dist/"], "no cache of the package"
    for job in ("build", "sweep", "merge"):
        script = "\n".join(doc[job]["script"])
        assert "./dist/softrpma_*.deb" in script, f"{job}: no .deb"
    assert "bazel" not in "\n".join(doc["sweep"]["script"] + doc["merge"]["script"])
    assert "dist/softrpma_*.deb" in doc["build"]["artifacts"]["paths"]
    lines = lambda job: "\n".join(l for l in doc[job]["script"] if l.startswith("rpma-sim"))
    out.append({"env": {}, "script": lines("build"), "job": "plan"})
    for k in range(1, total + 1):
        out.append({"env": {"CI_NODE_INDEX": str(k), "CI_NODE_TOTAL": str(total)},
                    "script": lines("sweep"), "job": "sweep"})
    out.append({"env": {}, "script": lines("merge"), "job": "merge"})
expanded = []
for o in out:
    for k in range(1, o.pop("each_shard", 0) + 1) or [None]:
        e = dict(o)
        if k is not None:
            e["script"] = (e["script"].replace("${{ matrix.shard }}", str(k))
                                      .replace("${{ env.SHARDS }}", str(total)))
        expanded.append(e)
out = expanded
for o in out:
    if "${{" in o["script"]:
        sys.exit(f"{path}: an expression left in {o['script']!r}")
    print(json.dumps(o))
PY
}

for example in github-actions-sweep.yml gitlab-ci-sweep.yml; do
  dir="$work/$example"
  mkdir -p "$dir/bin"
  # What the build job leaves: rpma-sim on PATH (as the .deb installs it; here the built one)
  # and the program.
  ln -sf "$rpma_sim" "$dir/bin/rpma-sim"
  printf '#!/bin/sh\nexec %q report "$@"\n' "$victim" >"$dir/my_app"
  chmod +x "$dir/my_app"
  scripts="$(commands "$examples/$example")"
  check "$example: valid YAML of its CI's shape" test -n "$scripts"
  n=0
  : >"$dir/github_output"
  while IFS= read -r entry; do
    n=$((n + 1))
    script="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["script"])' "$entry")"
    job="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["job"])' "$entry")"
    vars="$(python3 -c 'import json,sys; print(" ".join(f"{k}={v}" for k, v in json.loads(sys.argv[1])["env"].items()))' "$entry")"
    # shellcheck disable=SC2086 # one variable per word
    run env $vars PATH="$dir/bin:$PATH" GITHUB_OUTPUT="$dir/github_output" \
      bash -euo pipefail -c "cd $(printf %q "$dir") && $script"
    echo "$out"
    expect_status "$example: job $n ($job): its rpma-sim commands pass" 0 "$status"
  done <<<"$scripts"
  check "$example: the plan, the shards and the merge ran" test "$n" -ge 4
  check "$example: the plan was written" test -s "$dir/plan.json"
  if [[ "$example" == github-* ]]; then
    expect_in "$example: the matrix made from SHARDS" "$(cat "$dir/github_output")" "shards=[1,2,3,4]"
  fi
  check "$example: the merged JUnit file" python3 "$testdata/check_junit.py" "$dir/sweep.xml"
  check "$example: valid against the JUnit schema" \
    xmllint --noout --schema "$testdata/junit.xsd" "$dir/sweep.xml"
  runs="$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(len(r["runs"]), r["merged_shards"], r["missing_shards"])' "$dir/sweep.json")"
  expect_in "$example: the merge joined every shard" "$runs" " 4 []"
  # Sharded from one plan, the merge is the unsharded sweep of that plan.
  run env PATH="$dir/bin:$PATH" bash -c "cd $(printf %q "$dir") && rpma-sim sweep --plan-from=plan.json --report=whole.json -- ./my_app"
  same="$(python3 -c '
import json, sys
key = lambda r: [(x["point"], x["nth"], x["class"]) for x in r["runs"]]
a, b = (json.load(open(p)) for p in sys.argv[1:])
print(key(a) == key(b))' "$dir/sweep.json" "$dir/whole.json")"
  check "$example: the merged shards are the unsharded sweep" test "$same" = True
done

# The Bazel example loads the macro this repository defines.
check "BUILD.bazel.example loads rpma_sim_sweep_test" \
  grep -qF 'load("@softrpma//tools/rpma_sim:defs.bzl", "rpma_sim_sweep_test")' \
  "$examples/BUILD.bazel.example"
finish
