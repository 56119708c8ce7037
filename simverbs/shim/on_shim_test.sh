#!/bin/bash
# The `_on_shim` test targets (on_shim.bzl): runs a gtest binary of softrpma with
# RPMA_BACKEND=ibverbs and the verbs shim's libibverbs.so.1 / librdmacm.so.1 first on
# LD_LIBRARY_PATH, so that the ibverbs backend's calls reach the simulated NIC (device
# softrpma_sim0) through the verbs API instead of rdma-core. It fails when the binary does not
# load the shim (then it would run on rdma-core, which finds no device here), when the binary
# fails, and when no case passed (every case skipped: the run proved nothing). The gtest XML that
# Bazel asks for (XML_OUTPUT_FILE) is the binary's own.
# Usage: on_shim_test.sh <lib/libibverbs.so.1> <gtest binary> [gtest flags]
set -u
# A failure of this script's own (not of a case) leaves no XML of the binary, so Bazel writes one
# that counts the target as failed (tools/ci/count_tests.py), instead of a run of skipped cases.
fail() {
  echo "FAILED: $*"
  [[ -n "${XML_OUTPUT_FILE:-}" ]] && rm -f "$XML_OUTPUT_FILE"
  exit 1
}
libdir="$(cd "$(dirname "$1")" && pwd)"
binary="$2"
shift 2
out="${TEST_TMPDIR:-$(mktemp -d)}/on_shim.out"

export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" RPMA_BACKEND=ibverbs
# The binary's own copy of the simulator (linked for its sim-only cases) is not the one that
# answers: nothing may steer it from outside.
unset RPMA_SIM_FAULTS RPMA_SIM_SCENARIO RPMA_SIM_TRACE

loaded="$(ldd "$binary" | grep -E 'lib(ibverbs|rdmacm)\.so\.1')"
for lib in libibverbs.so.1 librdmacm.so.1; do
  if ! grep -q "$libdir/$lib" <<<"$loaded"; then
    fail "$binary does not load the shim's $lib from $libdir:"$'\n'"$loaded"
  fi
done

# Killed at three quarters of Bazel's timeout, so that a hang shows its output.
limit=$(( ${TEST_TIMEOUT:-60} * 3 / 4 ))
timeout -k 5 "$limit" "$binary" "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if ((rc == 124 || rc == 137)); then
  fail "$binary did not finish within ${limit}s on the shim"
fi
((rc == 0)) || exit "$rc"
passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\.$/\1/p' "$out" | tail -1)"
if [[ -z "$passed" || "$passed" == 0 ]]; then
  fail "no test case of $binary passed on the shim (all skipped, or none selected)"
fi
echo "PASS: $passed case(s) of $(basename "$binary") passed with RPMA_BACKEND=ibverbs on the shim"
