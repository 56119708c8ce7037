#!/usr/bin/env bash
# `rpma-sim sweep --shard=K/N` and `rpma-sim report merge`: a sweep of the demo split into 3
# shards and merged is the whole sweep (the same runs, with the same outcomes and replay lines,
# and the same table); Bazel's TEST_TOTAL_SHARDS / TEST_SHARD_INDEX pick the same shard as
# --shard and TEST_SHARD_STATUS_FILE is touched; bad shards and bad merges are errors (exit 2)
# that say what is wrong; a missing shard fails the merge (exit 1).
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
demo="$root/tools/demo"
victim="$root/tools/rpma_sim/fault_victim"
# The demo is deterministic (one seed); every sweep below uses the same flags.
sweep_flags=(--max-runs=45 -j 2 --timeout=30s)
# Bazel's own sharding must not reach the sweeps that pass --shard or none.
unset TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE

# The table of a sweep's or a merge's output: from its header to its total line.
table_of() { sed -n '/^point  */,/^total  */p' <<<"$1"; }

# One line per run of a report, in its order: what must be the same in the whole sweep and in
# the merge of its shards (not durations, not the shard).
runs_of() {
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
for run in r["runs"]:
    print(run["prog"], run["point"], run["nth"], run["spec"], run["class"], run["detail"],
          run["kept_objects"], run["fails_sweep"], run["replay"])
print("totals", json.dumps(r["totals"], sort_keys=True))
print("points", json.dumps(r["points"], sort_keys=True))
print("not_swept", json.dumps(r["not_swept"], sort_keys=True))
print("plan_runs", r["plan_runs"], "shard", r["shard"])
' "$1"
}

# --- The whole sweep ---
run "$rpma_sim" sweep "${sweep_flags[@]}" --report="$work/whole.json" -- "$demo" --once
echo "$out"
expect_status "whole sweep: exit 0" 0 "$status"
whole_table="$(table_of "$out")"
check "whole sweep: a table" test -n "$whole_table"
whole_runs="$(runs_of "$work/whole.json")" || fail "whole sweep: report" "$whole_runs"
check "whole sweep: 45 runs" test "$(grep -c 'rpma-sim run' <<<"$whole_runs")" -eq 45
# Not on a terminal: plain progress lines, no bar.
expect_in "whole sweep: plain progress lines" "$err" "rpma-sim sweep: 45/45  clean "
if contains "$err" $'\r'; then fail "whole sweep: no bar off a terminal" "a CR"; else
  pass "whole sweep: no bar off a terminal"; fi

# --- Three shards, then the merge ---
shard_total=0
for k in 1 2 3; do
  run "$rpma_sim" sweep "${sweep_flags[@]}" --shard="$k/3" --report="$work/shard$k.json" -- \
    "$demo" --once
  echo "$out"
  expect_status "shard $k/3: exit 0" 0 "$status"
  expect_in "shard $k/3: said in the summary" "$out" "leak check: off (--leaks turns it on), shard $k/3"
  expect_in "shard $k/3: its part of the plan" "$out" "45 runs of "
  expect_in "shard $k/3: said in the progress lines" "$err" "  shard $k/3  clean "
  n="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"]))' \
    "$work/shard$k.json")" || n=0
  check "shard $k/3: some of the runs, not all" test "$n" -gt 0 -a "$n" -lt 45
  shard_total=$((shard_total + n))
done
check "the shards' runs add up to the whole sweep's" test "$shard_total" -eq 45

run "$rpma_sim" report merge --report="$work/merged.json" --junit="$work/merged.xml" \
  "$work/shard2.json" "$work/shard3.json" "$work/shard1.json"
echo "$out"
echo "$err"
expect_status "merge: exit 0" 0 "$status"
expect_in "merge: what it joined" "$out" "device mlx5, 3 shard reports of 3, 45 runs of the plan's 45"
expect_in "merge: the verdict" "$out" "sweep passed: 45 runs"
check "merge: no warning (the demo is deterministic)" test -z "$err"
merged_table="$(table_of "$out")"
if [[ "$merged_table" == "$whole_table" ]]; then
  pass "merge: the table is the whole sweep's"
else
  fail "merge: the table is the whole sweep's" "$(diff <(echo "$whole_table") <(echo "$merged_table"))"
fi
merged_runs="$(runs_of "$work/merged.json")"
if [[ "$merged_runs" == "$whole_runs" ]]; then
  pass "merge: the runs are the whole sweep's, in its order, with its outcomes and replay lines"
else
  fail "merge: the runs are the whole sweep's" "$(diff <(echo "$whole_runs") <(echo "$merged_runs"))"
fi
check "merge: the JUnit XML has a case per run and the clean run" \
  python3 "$testdata/check_junit.py" "$work/merged.xml" --cases=46 --failures=0
check "merge: the JUnit XML is valid against the schema" \
  xmllint --noout --schema "$testdata/junit.xsd" "$work/merged.xml"

# --- On a terminal: the progress bar shows the shard (script(1) gives stderr a pty) ---
if command -v script >/dev/null; then
  printf '%q ' "$rpma_sim" sweep "${sweep_flags[@]}" --shard=2/3 -- "$demo" --once >"$work/tty.sh"
  run script -qec "bash $(printf %q "$work/tty.sh") >/dev/null" /dev/null
  expect_in "on a terminal: a bar with the shard" "$out" "] 0/"
  expect_in "on a terminal: the shard in it" "$out" "  shard 2/3  clean "
  expect_in "on a terminal: redrawn in place" "$out" $'\r\033[K['
  if contains "$out" "rpma-sim sweep: "; then
    fail "on a terminal: no plain progress lines" "$out"
  else
    pass "on a terminal: no plain progress lines"
  fi
else
  fail "script(1) is installed (util-linux)" "no script command"
fi

# --- Bazel's sharding variables pick the same shard as --shard ---
run env TEST_TOTAL_SHARDS=3 TEST_SHARD_INDEX=1 TEST_SHARD_STATUS_FILE="$work/shard-status" \
  "$rpma_sim" sweep "${sweep_flags[@]}" --report="$work/bazel2.json" -- "$demo" --once
expect_status "TEST_SHARD_INDEX=1 of 3: exit 0" 0 "$status"
expect_in "TEST_SHARD_INDEX=1 of 3: shard 2/3" "$out" ", shard 2/3"
check "TEST_SHARD_STATUS_FILE is touched" test -e "$work/shard-status"
if [[ "$(runs_of "$work/bazel2.json")" == "$(runs_of "$work/shard2.json")" ]]; then
  pass "TEST_SHARD_INDEX=1 of 3 runs what --shard=2/3 runs"
else
  fail "TEST_SHARD_INDEX=1 of 3 runs what --shard=2/3 runs" "different runs"
fi
run env TEST_TOTAL_SHARDS=3 TEST_SHARD_INDEX=1 "$rpma_sim" sweep "${sweep_flags[@]}" \
  --shard=1/1 --report="$work/flag-wins.json" -- "$demo" --once
check "--shard wins over Bazel's variables" \
  test "$(grep -c 'rpma-sim run' <<<"$(runs_of "$work/flag-wins.json")")" -eq 45

# --- Bad shards: usage errors, nothing runs ---
usage_error() {  # NAME MESSAGE ARGS...
  local name="$1" message="$2"
  shift 2
  run "$@"
  expect_status "$name: exit 2" 2 "$status"
  expect_in "$name: message" "$err" "$message"
}
rm -f "$work/ran"
for bad in "0/3|shards are numbered from 1" "4/3|there is no shard 4 of 3" "a/b|is not K/N" \
  "1/0|N must be at least 1" "3|is not K/N" "|is not K/N"; do
  usage_error "--shard=${bad%%|*}" "rpma-sim: --shard: \"${bad%%|*}\"" \
    "$rpma_sim" sweep --shard="${bad%%|*}" -- touch "$work/ran"
  expect_in "--shard=${bad%%|*}: why" "$err" "${bad#*|}"
done
usage_error "TEST_TOTAL_SHARDS=0" 'TEST_TOTAL_SHARDS="0": expected a number of shards' \
  env TEST_TOTAL_SHARDS=0 TEST_SHARD_INDEX=0 "$rpma_sim" sweep -- touch "$work/ran"
usage_error "TEST_SHARD_INDEX out of range" 'TEST_SHARD_INDEX="3": expected 0 to 2' \
  env TEST_TOTAL_SHARDS=3 TEST_SHARD_INDEX=3 "$rpma_sim" sweep -- touch "$work/ran"
usage_error "TEST_SHARD_INDEX missing" "TEST_TOTAL_SHARDS is set but TEST_SHARD_INDEX is not" \
  env TEST_TOTAL_SHARDS=3 "$rpma_sim" sweep -- touch "$work/ran"
check "bad shards: the program never ran" test ! -e "$work/ran"
usage_error "--shard on run" 'flag --shard=1/2 is not a flag of `rpma-sim run`' \
  "$rpma_sim" run --shard=1/2 -- true

# --- Bad merges ---
usage_error "merge: overlapping shards" \
  "overlapping shards: $work/shard1.json and $work/shard1.json are both shard 1/3" \
  "$rpma_sim" report merge "$work/shard1.json" "$work/shard1.json"
usage_error "merge: a whole sweep among shards" \
  "$work/whole.json is the report of a whole sweep (no --shard): it overlaps every shard" \
  "$rpma_sim" report merge "$work/shard1.json" "$work/whole.json"
run "$rpma_sim" sweep --points=ibv_alloc_pd --shard=2/3 --report="$work/victim2.json" -- \
  "$victim" report
usage_error "merge: reports of different programs" \
  "$work/shard1.json and $work/victim2.json are reports of different sweeps: program $demo --once and $victim report" \
  "$rpma_sim" report merge "$work/shard1.json" "$work/victim2.json"
run "$rpma_sim" sweep "${sweep_flags[@]}" --shard=2/4 --report="$work/of4.json" -- "$demo" --once
usage_error "merge: different shard counts" "different sweeps: shard count 1/3 and 2/4" \
  "$rpma_sim" report merge "$work/shard1.json" "$work/of4.json"
printf '{"program": ["x"]}\n' >"$work/not-a-report.json"
usage_error "merge: not a report" \
  "$work/not-a-report.json is not a sweep report: device: missing; expected a string" \
  "$rpma_sim" report merge "$work/shard1.json" "$work/not-a-report.json"
printf '{"program": [' >"$work/cut.json"
usage_error "merge: cut JSON" "$work/cut.json is not a sweep report: JSON, byte 13" \
  "$rpma_sim" report merge "$work/shard1.json" "$work/cut.json"
usage_error "merge: a missing file" \
  "rpma-sim: $work/no-such.json: cannot read sweep report: No such file or directory" \
  "$rpma_sim" report merge "$work/shard1.json" "$work/no-such.json"
usage_error "merge: an endless file" \
  "rpma-sim: /dev/zero: cannot read sweep report: it is larger than 256 MiB" \
  "$rpma_sim" report merge "$work/shard1.json" /dev/zero
truncate -s 1T "$work/sparse.json"
usage_error "merge: a sparse file over the limit" \
  "rpma-sim: $work/sparse.json: cannot read sweep report: it is larger than 256 MiB" \
  "$rpma_sim" report merge "$work/shard1.json" "$work/sparse.json"
rm -f "$work/sparse.json"
usage_error "merge: one file" '`rpma-sim report` needs 2 arguments' "$rpma_sim" report merge
usage_error "report: unknown command" 'unknown report command "join"' \
  "$rpma_sim" report join "$work/shard1.json"

# --- One whole sweep's report: shown as it is ---
run "$rpma_sim" report merge "$work/whole.json"
expect_status "merge of one whole report: exit 0" 0 "$status"
expect_in "merge of one whole report: said" "$out" "the report of a whole sweep (no shards), 45 runs"
if [[ "$(table_of "$out")" == "$whole_table" ]]; then
  pass "merge of one whole report: its table"
else
  fail "merge of one whole report: its table" "differs"
fi

# --- A missing shard: said, and the merge fails ---
run "$rpma_sim" report merge "$work/shard1.json" "$work/shard3.json"
expect_status "merge without shard 2: exit 1" 1 "$status"
expect_in "merge without shard 2: said" "$out" "merge INCOMPLETE: no report of shard 2 of 3"

finish
