#!/usr/bin/env bash
# The main job works: the clean run completes and every fault run reports its error code; a
# release that fails in the teardown is said, and fails the run.
set -euo pipefail
demo="${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/demo"
out=$("$demo" 2>&1) || { echo "$out"; echo "demo exited non-zero"; exit 1; }
echo "$out"
expect() {
  grep -qF -- "$1" <<<"$out" || { echo "MISSING from the demo's output: $1"; exit 1; }
}
expect "the run completed: every call returned 0"
expect "read back: \"written by one-sided RDMA\""
expect "received: \"a two-sided message\""
expect "rpma_conn_wait(conn, 0, &cq, &is_rcq) -> RPMA_E_NO_COMPLETION"
expect "rpma_conn_wait(conn, 0, &cq, &is_rcq) -> RPMA_E_UNKNOWN"
expect "rpma_conn_wait(conn, 0, &cq, &is_rcq) -> RPMA_E_PROVIDER"
expect "rpma_conn_req_new(peer, kAddress, kPort, cfg, &client_req) -> RPMA_E_PROVIDER"
expect "rpma_peer_new(dev, &peer) -> RPMA_E_NOMEM"
expect "demo: the clean run completed and every fault was reported"
expect "the run completed: every call returned 0; everything created was released"

# A teardown call that fails: said (which call, which code), and the run fails. (The 3rd
# ibv_dereg_mr is client_dst's: rpma_conn_delete deregisters one of its own per connection.)
status=0
# (The NIC keeps the MR, as a real provider would, and holds on to it: under --config=asan,
# LeakSanitizer reports no leak.)
out=$(RPMA_SIM_FAULTS='ibv_dereg_mr:fail=EIO:nth=3' "$demo" --once 2>&1) ||
  status=$?
echo "$out"
((status == 1)) || { echo "a failed release: exit status $status, expected 1"; exit 1; }
expect "--- the run completed: every call returned 0; releasing what it created FAILED: rpma_mr_dereg(&client_dst) -> RPMA_E_PROVIDER"
if grep -qF "everything created was released" <<<"$out"; then
  echo "a failed release must not be called 'everything created was released'"
  exit 1
fi
status=0
out=$(RPMA_SIM_FAULTS='ibv_get_cq_event:fail=EIO:nth=1; ibv_dealloc_pd:fail=EIO:nth=1' \
  "$demo" --once 2>&1) || status=$?
echo "$out"
((status == 1)) || { echo "a fault and a failed release: exit status $status, expected 1"; exit 1; }
expect "--- the run stopped at: rpma_conn_wait(conn, 0, &cq, &is_rcq); releasing what it created FAILED: rpma_peer_delete(&peer) -> RPMA_E_PROVIDER"
echo "PASS"
