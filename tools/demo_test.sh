#!/usr/bin/env bash
# The main job works: the clean run completes and every fault run reports its error code.
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
