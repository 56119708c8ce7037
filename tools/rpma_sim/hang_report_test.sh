#!/usr/bin/env bash
# Hung and orphaned runs explained (issue 20, item 3), with real processes:
# - a pair that waits for each other (server and client both in rpma_conn_next_event) times out,
#   and before it is killed rpma-sim prints each process's stacks (gdb, when installed and
#   allowed to attach) and, from each simulator, the call each thread waits in and for what, and
#   its QPs' outstanding work;
# - a listener whose client exited is `orphaned` and stopped long before the timeout, with its
#   wait named; --kill-orphans=false lets it time out instead.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
prog="$root/tools/rpma_sim/hang_pair"
pair="$testdata/hang_pair.sh"

# 1. The hung pair: the clean run times out, the sweep stops there with the hang report.
run "$rpma_sim" sweep --timeout=3s --report="$work/hung.json" --junit="$work/hung.xml" \
  -- "$pair" "$prog" 7711 deadlock
echo "$out"
echo "$err"
expect_status "a hung clean run fails the sweep" 1 "$status"
expect_in "the run is hung" "$out" "hung (timed out after 3s): the clean run"
expect_in "the report is printed before the kill" "$out" "where it hangs:"
expect_in "the server process is named" "$out" "(server):"
expect_in "the client process is named" "$out" "(client):"
server_wait="$(grep -c "waits in rdma_get_cm_event for a CM event on the channel of id [0-9]* connected, QP [0-9]*" <<<"$out")"
check "both processes' simulators name their wait (rdma_get_cm_event on a connected id)" \
  test "$server_wait" -ge 2
expect_in "each QP's outstanding work is listed" "$out" "send WRs outstanding"
if grep -q "^ *#[0-9]" <<<"$out"; then
  expect_in "gdb's stacks show where the program waits" "$out" "rpma_conn_next_event"
else
  expect_in "without gdb's stacks, the report says why" "$out" "gdb: "
fi
check "nothing of the run is left" bash -c "! pgrep -f '$prog (server|client) 127.0.0.1 7711'"
got="$(python3 -c '
import json, sys
print(json.load(open(sys.argv[1]))["clean_run"].get("hang_report", "(none)"))' "$work/hung.json")" ||
  got="(no report)"
expect_in "the JSON report keeps where it hung" "$got" "waits in rdma_get_cm_event for a CM event"
expect_in "JUnit's case output has it too" "$(cat "$work/hung.xml" 2>/dev/null)" "where it hangs:"

# 2. The orphan: the client exits at once, the listener would wait for ever; stopped quickly.
start=$SECONDS
run "$rpma_sim" sweep --timeout=60s -- "$pair" "$prog" 7712 orphan
elapsed=$((SECONDS - start))
echo "$out"
echo "$err"
expect_status "an orphaned clean run stops the sweep" 1 "$status"
expect_in "the run is orphaned, its survivor's wait named" "$out" \
  "orphaned (server (pid "
check "the survivor waits for a connection request" grep -qE \
  "waits in rdma_get_cm_event for a CM event on the channel of id [0-9]+ listening on 127.0.0.1:7712" \
  <<<"$out"
expect_in "the gone peer is named" "$out" "its peers gone: client (pid "
check "stopped long before the 60s timeout (took ${elapsed}s)" test "$elapsed" -lt 20
check "nothing of the run is left" bash -c "! pgrep -f '$prog (listen|quit) 127.0.0.1 7712'"

# 3. --kill-orphans=false: the same run is left to its timeout, and is hung.
run "$rpma_sim" sweep --timeout=2s --kill-orphans=false -- "$pair" "$prog" 7713 orphan
echo "$out"
expect_status "left to the timeout, it is hung" 1 "$status"
expect_in "hung, with its report" "$out" "hung (timed out after 2s): the clean run"
expect_in "the listener's wait is in the report" "$out" "listening on 127.0.0.1:7713"
run "$rpma_sim" sweep --kill-orphans=maybe -- "$pair" "$prog" 7714 orphan
expect_status "a bad --kill-orphans is a usage error" 2 "$status"
finish
