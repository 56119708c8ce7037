#!/bin/bash
# rdma-core's endpoint examples, Debian's rdma_server / rdma_client (rdmacm-utils, not rebuilt),
# as two processes on one simulated fabric. They use what librdmacm builds on synchronous ids:
# rdma_create_ep (passive and active), rdma_get_request, rdma_accept / rdma_connect /
# rdma_disconnect that wait for their event, the QP and CQs rdma_create_qp makes on the id, and
# the inline helpers of rdma_verbs.h (rdma_reg_msgs, rdma_post_recv / rdma_post_send,
# rdma_get_recv_comp / rdma_get_send_comp on the id's completion channels). Both must end 0.
# A client with no server must fail as on rdma-core: its synchronous rdma_connect gets the
# REJECTED event and fails with ECONNREFUSED ("rdma_connect: Connection refused"), no hang.
# Usage: rdma_server_test.sh <lib/libibverbs.so.1 of //simverbs/shim:verbs_lib_dir>
set -u
# shellcheck source=simverbs/shim/testlib.sh
source "$(dirname "$0")/testlib.sh"
shim_test_init "$1"
require_tools rdmacm-utils rdma_server rdma_client
use_shim rdma_server
port=7491

for round in 1 2; do
  timeout 60 rdma_server -s 127.0.0.1 -p "$port" >"$dir/server.out" 2>&1 &
  server_pid=$!
  # The server listens once rdma_listen returned; until then a client is refused: retry.
  client_rc=1
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.3
    timeout 30 rdma_client -s 127.0.0.1 -p "$port" >"$dir/client.out" 2>&1
    client_rc=$?
    grep -q "Connection refused" "$dir/client.out" || break
  done
  wait "$server_pid"
  server_rc=$?
  server_pid=""
  [[ "$client_rc" == 0 ]] || fail "round $round: rdma_client exited $client_rc: $(cat "$dir/client.out")"
  [[ "$server_rc" == 0 ]] || fail "round $round: rdma_server exited $server_rc: $(cat "$dir/server.out")"
  grep -qx "rdma_client: end 0" "$dir/client.out" || fail "round $round: client: $(cat "$dir/client.out")"
  grep -qx "rdma_server: end 0" "$dir/server.out" || fail "round $round: server: $(cat "$dir/server.out")"
  # perror lines ("rdma_...: <reason>") or the no-inline fallback would mean a step failed.
  for side in client server; do
    if grep -v "^rdma_$side: \(start\|end 0\)$" "$dir/$side.out" | grep -q .; then
      fail "round $round: $side printed: $(cat "$dir/$side.out")"
    fi
  done
  port=$((port + 1))  # the next round on a fresh port: nothing of the first is left over
done

# No server on that port: rdma_connect fails with ECONNREFUSED, the client ends -1.
timeout 30 rdma_client -s 127.0.0.1 -p $((port + 10)) >"$dir/noserver.out" 2>&1
rc=$?
[[ "$rc" == 255 ]] || fail "rdma_client with no server exited $rc: $(cat "$dir/noserver.out")"
grep -qx "rdma_connect: Connection refused" "$dir/noserver.out" ||
  fail "rdma_client with no server: $(cat "$dir/noserver.out")"

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: rdma_server / rdma_client completed on the simulated fabric"
