#!/bin/bash
# The `_on_host` test targets (on_host_transport.bzl): runs a gtest binary of the simulator with
# RPMA_SIM_TRANSPORT=host. It fails when the binary fails or does not finish, and when no case
# passed (the run proved nothing). The gtest XML that Bazel asks for is the binary's own.
# Usage: on_host_transport_test.sh <gtest binary> [gtest flags]
set -u
fail() {
  echo "FAILED: $*"
  [[ -n "${XML_OUTPUT_FILE:-}" ]] && rm -f "$XML_OUTPUT_FILE"
  exit 1
}
binary="$1"
shift
out="${TEST_TMPDIR:-$(mktemp -d)}/on_host.out"
export RPMA_SIM_TRANSPORT=host
# Killed at three quarters of Bazel's timeout, so that a hang shows its output.
limit=$(( ${TEST_TIMEOUT:-60} * 3 / 4 ))
timeout -k 5 "$limit" "$binary" "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if ((rc == 124 || rc == 137)); then
  fail "$binary did not finish within ${limit}s on the host transport"
fi
((rc == 0)) || exit "$rc"
passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\.$/\1/p' "$out" | tail -1)"
if [[ -z "$passed" || "$passed" == 0 ]]; then
  fail "no test case of $binary passed on the host transport"
fi
echo "PASS: $passed case(s) of $(basename "$binary") passed with RPMA_SIM_TRANSPORT=host${RPMA_SIM_SHM:+ RPMA_SIM_SHM=$RPMA_SIM_SHM}"
