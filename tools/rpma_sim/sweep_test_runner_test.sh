#!/usr/bin/env bash
# sweep_test_runner.sh, the test rpma_sim_sweep_test (defs.bzl) declares, run as Bazel runs
# each shard of a test with shard_count = 3: TEST_TOTAL_SHARDS, TEST_SHARD_INDEX,
# TEST_SHARD_STATUS_FILE, XML_OUTPUT_FILE and TEST_UNDECLARED_OUTPUTS_DIR set. Each shard
# passes, touches the status file and writes its JUnit cases and its report; the three reports
# merge into what the unsharded runner reports.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
runner="$root/tools/rpma_sim/sweep_test_runner.sh"
demo="$root/tools/demo"
flags=(-j 2 --timeout=30s --max-runs=30)

# shard_env K N: the environment Bazel gives shard K (1-based) of N.
shard_env() {
  mkdir -p "$work/s$1"
  echo TEST_TOTAL_SHARDS="$2" TEST_SHARD_INDEX="$(($1 - 1))" \
    TEST_SHARD_STATUS_FILE="$work/s$1/status" XML_OUTPUT_FILE="$work/s$1/test.xml" \
    TEST_UNDECLARED_OUTPUTS_DIR="$work/s$1/outputs"
}

total_cases=0
for k in 1 2 3; do
  # shellcheck disable=SC2046 # one variable per word
  run env $(shard_env "$k" 3) "$runner" "$rpma_sim" "${flags[@]}" -- "$demo" --once
  echo "$out"
  expect_status "shard $k of 3 passes" 0 "$status"
  expect_in "shard $k of 3: rpma-sim took Bazel's shard" "$out" ", shard $k/3"
  check "shard $k of 3: the status file is touched" test -e "$work/s$k/status"
  check "shard $k of 3: its report" test -s "$work/s$k/outputs/sweep.json"
  check "shard $k of 3: its JUnit XML" python3 "$testdata/check_junit.py" "$work/s$k/test.xml"
  check "shard $k of 3: its JUnit XML is valid against the schema" \
    xmllint --noout --schema "$testdata/junit.xsd" "$work/s$k/test.xml"
  cases="$(grep -c '<testcase ' "$work/s$k/test.xml")" || cases=0
  total_cases=$((total_cases + cases - 1))  # each shard has the clean run as a case too
done
check "the shards' test cases are the 30 runs" test "$total_cases" -eq 30

# Unsharded (no TEST_TOTAL_SHARDS): the whole sweep.
mkdir -p "$work/whole"
run env -u TEST_TOTAL_SHARDS -u TEST_SHARD_INDEX XML_OUTPUT_FILE="$work/whole/test.xml" \
  TEST_UNDECLARED_OUTPUTS_DIR="$work/whole/outputs" "$runner" "$rpma_sim" "${flags[@]}" -- \
  "$demo" --once
expect_status "unsharded: passes" 0 "$status"
run "$rpma_sim" report merge --report="$work/merged.json" "$work"/s{1,2,3}/outputs/sweep.json
expect_status "the shards merge" 0 "$status"
same="$(python3 -c '
import json, sys
key = lambda r: [(x["point"], x["prog"], x["nth"], x["class"], x["replay"]) for x in r["runs"]]
a, b = (json.load(open(p)) for p in sys.argv[1:])
print(key(a) == key(b) and len(key(a)) == 30 and a["totals"] == b["totals"])
' "$work/merged.json" "$work/whole/outputs/sweep.json")"
check "the merged shards are the unsharded sweep" test "$same" = True

run "$runner" "$rpma_sim"
expect_status "runner without a program: usage, exit 2" 2 "$status"
finish
