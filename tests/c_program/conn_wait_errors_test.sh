#!/usr/bin/env bash
# Builds conn_wait_errors.c the way a user would (cc, our header, our librpma.so.0) and checks
# that it gets every one of rpma_conn_wait()'s documented codes through the public API and
# RPMA_SIM_FAULTS alone.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
work="${TEST_TMPDIR:-$(mktemp -d)}"
mkdir -p "$work/lib"
cp "$root/api/librpma.so.0" "$work/lib/"
# Under --config=asan / tsan our library needs the sanitizer runtimes: build the program with
# them too.
sanitize=()
if [[ "$(ldd "$work/lib/librpma.so.0")" == *libasan* ]]; then sanitize=(-fsanitize=address,undefined); fi
if [[ "$(ldd "$work/lib/librpma.so.0")" == *libtsan* ]]; then sanitize=(-fsanitize=thread); fi
cc -std=c11 -Wall -Wextra -Werror "${sanitize[@]}" -I "$root/api/include" \
  "$root/tests/c_program/conn_wait_errors.c" -o "$work/conn_wait_errors" \
  "$work/lib/librpma.so.0" -libverbs -lrdmacm

failures=0
port=21000
run_case() {  # CASE [FAULTS]
  port=$((port + 1))
  echo "== $1 ${2:+(RPMA_SIM_FAULTS='$2')}"
  if ! RPMA_SIM_FAULTS="${2:-}" LD_LIBRARY_PATH="$work/lib" "$work/conn_wait_errors" "$1" "$port"; then
    echo "FAILED: $1"
    failures=$((failures + 1))
  fi
}
run_case ok
run_case inval
run_case not_shared
run_case no_completion 'ibv_get_cq_event:fail=EIO:nth=1'
run_case unknown 'ibv_get_cq_event:unknown_cq:nth=1'
run_case provider 'ibv_req_notify_cq:fail=EIO:after=4'
# The program really runs on our library, not on some other librpma.so.0.
# (ldd's output is read whole first: `ldd | grep -q` can fail on SIGPIPE under pipefail.)
linked=$(LD_LIBRARY_PATH="$work/lib" ldd "$work/conn_wait_errors")
grep -qF "$work/lib/librpma.so.0" <<<"$linked" ||
  { echo "FAILED: not linked against our librpma.so.0"; failures=$((failures + 1)); }
exit $((failures > 0))
