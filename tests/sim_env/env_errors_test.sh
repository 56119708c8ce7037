#!/usr/bin/env bash
# What an unmodified program, at librpma's default log thresholds (errors reach only syslog),
# shows on stderr when the simulated NIC is configured wrongly or cannot write its files: each
# configuration error makes rpma_utils_get_ibv_context() fail with RPMA_E_INVAL and prints one
# `softrpma:` / `softrpma-sim:` line; a trace or stats file that cannot be written is said too.
set -uo pipefail
program="${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/sim_env/env_program"
work="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

# expect NAME STATUS STDERR_LINE [VAR=VALUE...]: runs the program with those variables (every
# other RPMA_* unset) and checks its exit status and that its stderr is exactly STDERR_LINE
# ("" for nothing at all; a trailing * matches anything).
expect() {
  local name="$1" want_status="$2" want_err="$3"
  shift 3
  local status=0
  env -u RPMA_BACKEND -u RPMA_SIM_FAULTS -u RPMA_SIM_SEED -u RPMA_SIM_SCENARIO \
    -u RPMA_SIM_TRACE -u RPMA_SIM_STATS -u RPMA_SIM_NATIVE_ATOMIC_WRITE -u RPMA_SIM_DEVICE \
    "$@" "$program" >"$work/out" 2>"$work/err" || status=$?
  local err
  err="$(cat "$work/err")"
  if [[ "$status" != "$want_status" ]]; then
    echo "FAIL: $name: exit status $status, expected $want_status"
    failures=$((failures + 1))
  elif [[ "$err" != "${want_err%\*}" && ! ("$want_err" == *'*' && "$err" == "${want_err%\*}"*) ]]; then
    echo "FAIL: $name: stderr"
    echo "  got:      $err"
    echo "  expected: $want_err"
    failures=$((failures + 1))
  else
    echo "PASS: $name"
  fi
}

expect "no configuration: nothing on stderr" 0 ""
expect "a good trace and stats file: nothing on stderr" 0 "" \
  RPMA_SIM_TRACE="$work/good.trace" RPMA_SIM_STATS="$work/good.stats"
grep -q '^end events=' "$work/good.trace" || { echo "FAIL: the good trace has no end line"; failures=$((failures + 1)); }

expect "RPMA_BACKEND=garbage" 3 \
  'softrpma: RPMA_BACKEND="garbage" names no backend; use "sim" (the simulated NIC, the default) or "ibverbs" (a real RDMA device)' \
  RPMA_BACKEND=garbage
expect "malformed RPMA_SIM_FAULTS" 3 \
  'softrpma-sim: cannot start the simulated NIC: RPMA_SIM_FAULTS: fault spec rule 1, column 15: unknown action "explode"; expected one of fail=<errno>, *' \
  RPMA_SIM_FAULTS='ibv_post_send:explode'
expect "bad RPMA_SIM_SEED" 3 \
  'softrpma-sim: cannot start the simulated NIC: RPMA_SIM_SEED: bad seed "12x": expected a decimal or 0x-hex 64-bit number' \
  RPMA_SIM_SEED=12x
expect "bad RPMA_SIM_NATIVE_ATOMIC_WRITE" 3 \
  'softrpma-sim: cannot start the simulated NIC: RPMA_SIM_NATIVE_ATOMIC_WRITE: bad value "yes": expected 1 (the device has native atomic write) or 0 (it has not; the default is the device'"'"'s, see RPMA_SIM_DEVICE)' \
  RPMA_SIM_NATIVE_ATOMIC_WRITE=yes
expect "RPMA_SIM_NATIVE_ATOMIC_WRITE=1: nothing on stderr" 0 "" RPMA_SIM_NATIVE_ATOMIC_WRITE=1
expect "RPMA_SIM_DEVICE=mlx4" 3 \
  'softrpma-sim: cannot start the simulated NIC: RPMA_SIM_DEVICE: unknown device "mlx4": expected one of mlx5, rxe, siw' \
  RPMA_SIM_DEVICE=mlx4
expect "RPMA_SIM_DEVICE set but empty" 3 \
  'softrpma-sim: cannot start the simulated NIC: RPMA_SIM_DEVICE: unknown device "": expected one of mlx5, rxe, siw' \
  RPMA_SIM_DEVICE=
for device in mlx5 rxe siw; do
  expect "RPMA_SIM_DEVICE=$device: nothing on stderr" 0 "" RPMA_SIM_DEVICE=$device
done
mkdir -p "$work/dir"
expect "RPMA_SIM_SCENARIO is a directory" 3 \
  "softrpma-sim: cannot start the simulated NIC: RPMA_SIM_SCENARIO: $work/dir: cannot read scenario file: it is a directory" \
  RPMA_SIM_SCENARIO="$work/dir"

# Files that cannot be written: the program runs (exit 0), and says so.
expect "RPMA_SIM_TRACE=/dev/full" 0 \
  'softrpma-sim: RPMA_SIM_TRACE: cannot write "/dev/full": No space left on device; the trace is incomplete from event 0 on' \
  RPMA_SIM_TRACE=/dev/full
expect "RPMA_SIM_STATS=/dev/full" 0 \
  'softrpma-sim: RPMA_SIM_STATS: cannot write "/dev/full": No space left on device; the hit counts are lost' \
  RPMA_SIM_STATS=/dev/full

if ((failures > 0)); then
  echo "$failures failed"
  exit 1
fi
echo "all passed"
