#!/usr/bin/env bash
# A crash in ANY process of a run is found: a script starts a server and a client
# (testdata/aborting_pair.sh); the server frees a buffer twice (or calls abort()) when its
# accept fails. The crash reaches rpma-sim only as the script's exit status; the simulator in
# the server records it in the run's directory (RPMA_SIM_RUN_DIR), and the sweep reports the run
# crashed, naming the program and the signal, with a replay line that reproduces the abort.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
server="$root/tools/rpma_sim/aborting_server"
pair="$testdata/aborting_pair.sh"
victim="$root/tools/rpma_sim/fault_victim"
# Runs of `rpma-sim run` meet on a fabric of this test's own (a sweep gives each run one).
export RPMA_SIM_FABRIC="crash-sweep-test-$$"
# What the server's double free prints, and the crash's detail in the sweep: glibc's message
# with the signal; under --config=asan, AddressSanitizer's report (it stops the server before
# glibc would see the free), which the simulator's end record takes instead.
if [[ "$(sanitizer_flags "$server")" == *address* ]]; then
  double_free="AddressSanitizer: attempting double-free"
  crash="server: $double_free"
else
  double_free="free(): double free detected"
  crash="server: SIGABRT: $double_free"
fi

json() {  # FILE PYTHON-EXPRESSION-OF-r
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print($2)" "$1"
}

# --- the server's double free, found through the script ---
run "$rpma_sim" sweep --timeout=20s --points=rdma_accept --report="$work/df.json" \
  --junit="$work/df.xml" -- "$pair" "$server" 7731 double-free
echo "$out"
echo "$err"
expect_status "double free: the sweep fails" 1 "$status"
expect_in "double free: the run is crashed, naming the program and what aborted it" \
  "$out" "crashed ($crash"
expect_in "double free: the run's replay line" "$out" \
  "replay: $rpma_sim run --faults='rdma_accept:fail=EIO:nth=1:prog=server' -- $pair $server 7731 double-free"
expect_in "double free: the table counts it" "$out" "server:rdma_accept"
check "double free: the report says crashed" \
  test "$(json "$work/df.json" 'r["runs"][0]["class"]')" = crashed
check "double free: the report's detail names the server" \
  grep -q "\"detail\": *\"$crash" "$work/df.json"
check "double free: the run's output is kept" \
  test "$(json "$work/df.json" '"pair: client" in r["runs"][0]["output_tail"]')" = True
check "double free: JUnit names the case and the crash" \
  grep -q '<testcase name="server:rdma_accept hit 1"' "$work/df.xml"
check "double free: JUnit's failure is the crash" \
  grep -q "<failure message=\"crashed ($crash" "$work/df.xml"

# The replay line reproduces the abort.
replay="$(json "$work/df.json" 'r["runs"][0]["replay"]')"
run bash -c "$replay"
echo "$out"
echo "$err"
expect_status "replay: the script fails" 1 "$status"
expect_in "replay: the double free aborts the server" "$out$err" "$double_free"
expect_in "replay: the server died by SIGABRT (134)" "$out" "pair: client 1, server 134"

# --- --keep-traces: the crashed run's traces, one per process, named by role ---
run "$rpma_sim" sweep --timeout=20s --points=rdma_accept --kinds=fail --keep-traces="$work/kt" \
  -- "$pair" "$server" 7734 double-free
expect_status "keep-traces: the sweep fails" 1 "$status"
check "keep-traces: the server's trace of the crashed run" \
  bash -c "ls '$work'/kt/run-1/server.*.trace"
check "keep-traces: the client's too" bash -c "ls '$work'/kt/run-1/client.*.trace"
server_trace="$(ls "$work"/kt/run-1/server.*.trace 2>/dev/null | head -1)"
expect_in "keep-traces: the server's trace ends in the failed accept" \
  "$(cat "$server_trace" 2>/dev/null)" "fault point=rdma_accept action=fail=EIO hit=1"

# --- --leaks of a script: LeakSanitizer in each of its processes built with ASan ---
run "$rpma_sim" sweep --timeout=20s --points=rdma_accept --kinds=fail --leaks \
  --report="$work/leak.json" -- "$pair" "$server" 7735 leak
echo "$out"
echo "$err"
if [[ "$(sanitizer_flags "$server")" == *address* ]]; then
  expect_status "leaks of a script: the sweep fails" 1 "$status"
  expect_in "leaks of a script: the checker is said" "$out" \
    "LeakSanitizer in each process built with ASan (the program is a script)"
  check "leaks of a script: the processes it checks are named" \
    grep -qE "^leak check: LeakSanitizer in (server, client|client, server)$" <<<"$out"
  expect_in "leaks of a script: the server's leak, named, with its replay line" "$out" \
    "leaked (server: LeakSanitizer: detected memory leaks): rdma_accept:fail=EIO:nth=1:prog=server"
  check "leaks of a script: the report says leaked" \
    test "$(json "$work/leak.json" 'r["runs"][0]["class"]')" = leaked
  expect_in "leaks of a script: the leak's stack is in the run's output" \
    "$(json "$work/leak.json" 'r["runs"][0]["output_tail"]')" "aborting_server"
else
  # Without ASan no process can be checked: said, before any fault run (valgrind would check
  # the shell, not the programs it starts).
  expect_status "leaks of a script without ASan: a usage error" 2 "$status"
  expect_in "leaks of a script without ASan: said, naming its processes" "$err" \
    "is a script, and no process of its clean run that used the simulated NIC"
  expect_in "leaks of a script without ASan: ... and what to do" "$err" \
    "is built with AddressSanitizer: build its programs with -fsanitize=address"
fi

# --- abort(): no message, still the signal and the program ---
run "$rpma_sim" sweep --timeout=20s --points=rdma_accept -- "$pair" "$server" 7732 abort
echo "$out"
expect_status "abort: the sweep fails" 1 "$status"
expect_in "abort: crashed, naming the program and the signal" "$out" "crashed (server: SIGABRT)"

# --- run --junit watches every process too ---
run "$rpma_sim" run --junit="$work/run.xml" --faults='rdma_accept:fail=EIO:nth=1:prog=server' \
  -- "$pair" "$server" 7733 double-free
expect_status "run --junit: the script's status" 1 "$status"
check "run --junit: the case is the server's crash" \
  grep -q "<failure message=\"crashed ($crash" \
  "$work/run.xml"

# --- a run that only exited non-zero keeps its output too ---
run "$rpma_sim" sweep --points=ibv_alloc_pd --report="$work/nonzero.json" -- "$victim" report
expect_status "nonzero: the sweep passes" 0 "$status"
check "nonzero: the run is nonzero" \
  test "$(json "$work/nonzero.json" 'r["runs"][0]["class"]')" = nonzero
check "nonzero: its output is kept" \
  test "$(json "$work/nonzero.json" '"rpma_peer_new" in r["runs"][0]["output_tail"]')" = True

# --- upstream librpma's RPMA_FAULT_INJECTION: refused with what to use, never ignored ---
run env RPMA_FAULT_INJECTION=2 "$rpma_sim" run -- "$victim" report
check "RPMA_FAULT_INJECTION: the program cannot start the NIC" test "$status" -ne 0
expect_in "RPMA_FAULT_INJECTION: the error says what to use" "$err" \
  "RPMA_FAULT_INJECTION: \"2\" asks for upstream librpma's debug-build fault injection"
expect_in "RPMA_FAULT_INJECTION: ... RPMA_SIM_FAULTS" "$err" "RPMA_SIM_FAULTS='malloc:fail=ENOMEM:nth=2'"

# --- a run directory that is no directory: the simulator says so and does not start ---
run env RPMA_BACKEND=sim RPMA_SIM_RUN_DIR="$work/no-such-dir" "$victim" report
expect_status "bad RPMA_SIM_RUN_DIR: the program fails" 1 "$status"
expect_in "bad RPMA_SIM_RUN_DIR: the error names it" "$err" \
  "RPMA_SIM_RUN_DIR: \"$work/no-such-dir\" is not a writable directory"

finish
