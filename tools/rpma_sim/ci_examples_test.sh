#!/usr/bin/env bash
# The CI files of docs/examples (docs/CI.md) are valid YAML of the shape their CI system reads
# (a GitHub Actions matrix over the shards with a merge job after it; a GitLab `parallel:` job
# and a merge job publishing `reports: junit`), and their rpma-sim commands, run as the CI would
# run them (each shard's, then the merge), sweep a real program and leave a valid JUnit file.
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
def rpma_sim_lines(script):
    return [l for l in script if "rpma-sim" in l]
if "jobs" in doc:  # GitHub Actions
    shards = doc["jobs"]["sweep"]["strategy"]["matrix"]["shard"]
    total = int(doc["env"]["SHARDS"])
    assert shards == list(range(1, total + 1)), f"matrix {shards} is not 1..{total}"
    assert doc["jobs"]["merge"]["needs"] == "sweep" and doc["jobs"]["merge"]["if"] == "always()"
    assert doc["jobs"]["sweep"]["strategy"]["fail-fast"] is False
    uploads = [s for s in doc["jobs"]["merge"]["steps"] if "junit" in str(s.get("uses", ""))]
    assert uploads and uploads[0]["with"]["report_paths"] == "sweep.xml", "no JUnit upload"
    def runs(job):
        return [s["run"] for s in doc["jobs"][job]["steps"] if "rpma-sim" in s.get("run", "")]
    for k in shards:
        for script in runs("sweep"):
            out.append({"env": {"SHARDS": str(total)},
                        "script": script.replace("${{ matrix.shard }}", str(k))
                                        .replace("${{ env.SHARDS }}", str(total))})
    for script in runs("merge"):
        out.append({"env": {}, "script": script})
else:  # GitLab CI
    total = int(doc["sweep"]["parallel"])
    assert doc["merge"]["artifacts"]["reports"]["junit"] == "sweep.xml", "no JUnit report"
    assert doc["merge"]["when"] == "always"
    for k in range(1, total + 1):
        out.append({"env": {"CI_NODE_INDEX": str(k), "CI_NODE_TOTAL": str(total)},
                    "script": "\n".join(l for l in doc["sweep"]["script"] if "rpma-sim" in l
                                        or l.startswith("tar "))})
    out.append({"env": {}, "script": "\n".join(l for l in doc["merge"]["script"]
                                               if "rpma-sim" in l or l.startswith("tar "))})
for o in out:
    if "${{" in o["script"]:
        sys.exit(f"{path}: an expression left in {o['script']!r}")
    print(json.dumps(o))
PY
}

for example in github-actions-sweep.yml gitlab-ci-sweep.yml; do
  dir="$work/$example"
  mkdir -p "$dir/librpma/bin"
  # What the build job leaves: the tree's rpma-sim (here the built one) and the program.
  ln -sf "$rpma_sim" "$dir/librpma/bin/rpma-sim"
  printf '#!/bin/sh\nexec %q report "$@"\n' "$victim" >"$dir/my_app"
  chmod +x "$dir/my_app"
  tar czf "$dir/softrpma.tgz" -T /dev/null
  scripts="$(commands "$examples/$example")"
  check "$example: valid YAML of its CI's shape" test -n "$scripts"
  n=0
  while IFS= read -r entry; do
    n=$((n + 1))
    script="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["script"])' "$entry")"
    vars="$(python3 -c 'import json,sys; print(" ".join(f"{k}={v}" for k, v in json.loads(sys.argv[1])["env"].items()))' "$entry")"
    # (The tree's tarball is an empty stand-in; chmod of the program is harmless.)
    # shellcheck disable=SC2086 # one variable per word
    run env $vars bash -euo pipefail -c "cd $(printf %q "$dir") && $script"
    echo "$out"
    expect_status "$example: job $n's rpma-sim commands pass" 0 "$status"
  done <<<"$scripts"
  check "$example: the shards and the merge ran" test "$n" -ge 3
  check "$example: the merged JUnit file" python3 "$testdata/check_junit.py" "$dir/sweep.xml"
  check "$example: valid against the JUnit schema" \
    xmllint --noout --schema "$testdata/junit.xsd" "$dir/sweep.xml"
  runs="$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(len(r["runs"]), r["merged_shards"], r["missing_shards"])' "$dir/sweep.json")"
  expect_in "$example: the merge joined every shard" "$runs" " 4 []"
done

# The Bazel example loads the macro this repository defines.
check "BUILD.bazel.example loads rpma_sim_sweep_test" \
  grep -qF 'load("@softrpma//tools/rpma_sim:defs.bzl", "rpma_sim_sweep_test")' \
  "$examples/BUILD.bazel.example"
finish
