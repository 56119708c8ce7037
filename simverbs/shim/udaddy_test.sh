#!/bin/bash
# rdma_cm's UD path on the verbs shim: Debian's udaddy (rdmacm-utils, built against rdma-core
# 44, not rebuilt) as two processes on one simulated fabric. The client's RDMA_PS_UDP id
# resolves, creates its UD QP (rdma_create_qp moves it to RTS) and connects: SIDR, a request
# and a reply. The server's listener gets CONNECT_REQUEST, accepts with its QP; the client gets
# ESTABLISHED with the server's QP number, Q_Key and an address (param.ud), makes an AH of it
# and sends; the server answers each through an AH made from the first completion
# (ibv_create_ah_from_wc). Both print "data transfers complete" and exit 0, for one connection
# of 10 messages, beside rping's server on the same port (the TCP port space is another), and
# for 4 connections of 20 messages of 1000 bytes (rxe profile). And the
# errors a user meets: nobody listening (UNREACHABLE, status 1: IB_SIDR_UNSUPPORTED), a request
# a fault refuses (status 2) or loses (-110), a message above the port's MTU (udaddy refuses
# it), the siw profile (no UD QPs: rdma_create_qp fails with EOPNOTSUPP). Each process runs
# under `timeout`; the trap kills what is left.
# Usage: udaddy_test.sh <lib/libibverbs.so.1 of //simverbs/shim:verbs_lib_dir>
set -u
# shellcheck source=simverbs/shim/testlib.sh
source "$(dirname "$0")/testlib.sh"
shim_test_init "$1"
require_tools rdmacm-utils udaddy rping
use_shim udaddy
# udaddy has no port option: it serves 7174, on this run's own fabric, in the UDP port space
# (a listener name of its own: host.h, PortSpace).
needle="@softrpma/$RPMA_SIM_FABRIC/udp/127.0.0.1:7174"

# run_pair <name> <udaddy flags...>: a server, then a client once the server listens.
run_pair() {
  local name="$1"
  shift
  run_server_client "$name" /proc/net/unix "$needle" udaddy -b 127.0.0.1 "$@" -- \
    udaddy -s 127.0.0.1 "$@"
  for side in server client; do
    grep -q "^data transfers complete" "$dir/$name.$side.out" ||
      fail "$name: $side did not complete its transfers: $(cat "$dir/$name.$side.out")"
    grep -q "^return status 0" "$dir/$name.$side.out" ||
      fail "$name: $side did not return status 0"
  done
}

# client_fails <name> <expected line> <udaddy flags...>: a client alone fails cleanly (a
# non-zero exit, its status, which is the error's low byte, printed on the way out: no timeout,
# no signal) and prints the line.
client_fails() {
  local name="$1" expected="$2"
  shift 2
  timeout 30 udaddy -s 127.0.0.1 "$@" >"$dir/$name.out" 2>&1
  local rc=$?
  if [[ "$rc" == 0 || "$rc" == 124 ]] || ! grep -q "^return status " "$dir/$name.out"; then
    fail "$name: the client exited $rc: $(cat "$dir/$name.out")"
  fi
  grep -qF "$expected" "$dir/$name.out" ||
    fail "$name: no '$expected' in: $(cat "$dir/$name.out")"
}

run_pair one
# rping's server on the same port (its default, 7174): the TCP port space is another.
timeout 60 rping -s -a 127.0.0.1 -p 7174 >"$dir/rping.out" 2>&1 &
rping_pid=$!
wait_listening /proc/net/unix "@softrpma/$RPMA_SIM_FABRIC/127.0.0.1:7174" "$rping_pid" ||
  fail "rping -s did not listen beside udaddy's port: $(cat "$dir/rping.out")"
run_pair beside-rping
kill "$rping_pid" 2>/dev/null
wait "$rping_pid" 2>/dev/null
RPMA_SIM_DEVICE=rxe run_pair four -c 4 -C 20 -S 1000

client_fails noserver "udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 1"
RPMA_SIM_FAULTS='rdma_connect:reject' client_fails refused \
  "udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 2"
RPMA_SIM_FAULTS='rdma_connect:lost' client_fails lost \
  "udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: -110"
client_fails mtu "udaddy: message_size 2000 is larger than active mtu 1024" -S 2000
RPMA_SIM_DEVICE=siw client_fails siw "udaddy: unable to create QP: Operation not supported"

if ((failures > 0)); then
  for f in "$dir"/*.out; do echo "--- $f"; cat "$f"; done
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: udaddy server / client (1 and 4 connections) completed on the simulated fabric"
