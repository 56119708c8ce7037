#!/bin/bash
# on_shim_test.sh, the wrapper of the `_on_shim` targets, fails where a run on the shim proved
# nothing: every case skipped, or the binary did not load the shim (so it would have run on
# rdma-core); and passes a binary whose cases pass on the shim.
# Usage: on_shim_wrapper_test.sh <on_shim_test.sh> <lib/libibverbs.so.1> <ibverbs_backend_test>
set -u
wrapper="$1"
lib="$2"
binary="$3"
dir="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
unset XML_OUTPUT_FILE  # The wrapper would delete this test's own XML on its failures.

# expect <name> <exit status> <text in the output> <wrapper args...>
expect() {
  local name="$1" status="$2" text="$3" out rc
  shift 3
  out="$(TEST_TMPDIR="$dir" "$wrapper" "$@" 2>&1)"
  rc=$?
  [[ "$rc" == "$status" ]] || fail "$name: exit status $rc, expected $status"$'\n'"$out"
  grep -qF -- "$text" <<<"$out" || fail "$name: no \"$text\" in:"$'\n'"$out"
}

expect "device cases pass" 0 "PASS: 3 case(s) of ibverbs_backend_test passed" \
  "$lib" "$binary"
# On the shim a device exists, so the no-device cases skip: nothing passed.
expect "every case skipped" 1 "no test case of $binary passed on the shim" \
  "$lib" "$binary" --gtest_filter='GetIbverbsBackend.NoDevice_*'
# A directory with the shim's libibverbs.so.1 but not its librdmacm.so.1: rdma-core's would be
# loaded for that one.
mkdir -p "$dir/half"
cp "$lib" "$dir/half/libibverbs.so.1"
expect "rdma-core's librdmacm loaded" 1 "does not load the shim's librdmacm.so.1" \
  "$dir/half/libibverbs.so.1" "$binary"

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: on_shim_test.sh"
