#!/usr/bin/env bash
# The test that rpma_sim_sweep_test (defs.bzl) declares: `rpma-sim sweep` of the program, its
# runs as the test's JUnit cases (XML_OUTPUT_FILE) and its JSON report an undeclared output.
# Sharding is rpma-sim's own: it reads TEST_TOTAL_SHARDS / TEST_SHARD_INDEX and touches
# TEST_SHARD_STATUS_FILE.
#   sweep_test_runner.sh RPMA_SIM [SWEEP FLAGS] -- PROGRAM [ARGS...]
set -uo pipefail
if (($# < 3)); then
  echo "usage: $0 RPMA_SIM [SWEEP FLAGS] -- PROGRAM [ARGS...]" >&2
  exit 2
fi
rpma_sim="$1"
shift
outputs=()
if [[ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ]]; then
  mkdir -p "$TEST_UNDECLARED_OUTPUTS_DIR"
  outputs+=(--report="$TEST_UNDECLARED_OUTPUTS_DIR/sweep.json")
fi
if [[ -n "${XML_OUTPUT_FILE:-}" ]]; then
  outputs+=(--junit="$XML_OUTPUT_FILE")
fi
exec "$rpma_sim" sweep "${outputs[@]}" "$@"
