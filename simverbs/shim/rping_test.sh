#!/bin/bash
# Milestone B of the verbs shim: Debian's rping (rdmacm-utils, built against rdma-core 44, not
# rebuilt) as two processes on one simulated fabric (RPMA_SIM_FABRIC, docs/FABRIC.md): the
# server (rping -s) and a client making 10 ping-pongs with verification (rping -c -C 10 -v)
# both exit 0, every ping is printed on both sides, and the server sees the client's
# disconnect. Also: a client with no server gets the error a real one would (exit != 0, no
# hang, no crash), and a fault from RPMA_SIM_FAULTS reaches rping as a completion status. Every process runs under `timeout`, and the trap kills what is left.
# Usage: rping_test.sh <lib/libibverbs.so.1 of //simverbs/shim:verbs_lib_dir>
set -u
# shellcheck source=simverbs/shim/testlib.sh
source "$(dirname "$0")/testlib.sh"
shim_test_init "$1"
require_tools rdmacm-utils rping
use_shim rping
port=7174

timeout 60 rping -s -a 127.0.0.1 -p "$port" -v >"$dir/server.out" 2>&1 &
server_pid=$!
# The server listens once its rdma_listen returned; until then a client is rejected/unreachable.
# Wait for it through the client itself: retry a few times.
client_rc=1
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  sleep 0.3
  timeout 30 rping -c -a 127.0.0.1 -p "$port" -C 10 -v >"$dir/client.out" 2>&1
  client_rc=$?
  grep -q "ping data" "$dir/client.out" && break
done
wait "$server_pid"
server_rc=$?
server_pid=""

[[ "$client_rc" == 0 ]] || fail "rping -c exited $client_rc: $(cat "$dir/client.out")"
[[ "$server_rc" == 0 ]] || fail "rping -s exited $server_rc: $(cat "$dir/server.out")"
for i in 0 1 2 3 4 5 6 7 8 9; do
  grep -q "^ping data: rdma-ping-$i: " "$dir/client.out" || fail "client: no ping $i"
  grep -q "^server ping data: rdma-ping-$i: " "$dir/server.out" || fail "server: no ping $i"
done
[[ "$(grep -c '^ping data: ' "$dir/client.out")" == 10 ]] || fail "client: not exactly 10 pings"
grep -q "DISCONNECT EVENT" "$dir/server.out" || fail "server: no DISCONNECTED event"
grep -Eqi "error|fail" "$dir/client.out" && fail "client printed an error: $(cat "$dir/client.out")"

# No server on that port: the client fails cleanly (not a timeout, not a signal).
timeout 30 rping -c -a 127.0.0.1 -p $((port + 1)) -C 1 >"$dir/noserver.out" 2>&1
rc=$?
if [[ "$rc" == 0 || "$rc" == 124 ]] || ((rc > 128 && rc <= 192)); then
  fail "rping -c with no server exited $rc: $(cat "$dir/noserver.out")"
fi

# A fault on the server's third post (RPMA_SIM_FAULTS works on an unmodified verbs program):
# its completion has the injected status, rping reports it and the server exits non-zero.
port=$((port + 2))
RPMA_SIM_FAULTS='ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR:nth=3' \
  timeout 60 rping -s -a 127.0.0.1 -p "$port" -v >"$dir/fault_server.out" 2>&1 &
server_pid=$!
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  sleep 0.3
  timeout 30 rping -c -a 127.0.0.1 -p "$port" -C 5 -v >"$dir/fault_client.out" 2>&1
  grep -q "REJECTED" "$dir/fault_client.out" || break
done
wait "$server_pid"
rc=$?
server_pid=""
if [[ "$rc" == 0 || "$rc" == 124 ]] || ((rc > 128 && rc <= 192)); then
  fail "rping -s with a fault exited $rc: $(cat "$dir/fault_server.out")"
fi
grep -q "fault injected: ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR (hit 3)" \
  "$dir/fault_server.out" || fail "the fault was not injected: $(cat "$dir/fault_server.out")"
grep -q "cq completion failed status $(printf '%d' 10)" "$dir/fault_server.out" ||
  fail "rping did not see IBV_WC_REM_ACCESS_ERR (10): $(cat "$dir/fault_server.out")"

if ((failures > 0)); then
  echo "--- server"; cat "$dir/server.out"; echo "--- client"; cat "$dir/client.out"
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: rping -s / rping -c -C 10 -v completed on the simulated fabric"
