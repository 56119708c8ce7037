#!/bin/bash
# QPs without the CM on the verbs shim: Debian's ibv_rc_pingpong (ibverbs-utils, built against
# rdma-core 44, not rebuilt) as two processes on one simulated fabric. Each side creates its QP
# with ibv_create_qp, exchanges LID/QPN/PSN/GID with the other over a TCP socket of its own,
# and connects it with ibv_modify_qp (INIT, RTR naming the peer's GID and QPN, RTS). The port's
# link layer is Ethernet (RoCE), so the GID index must be given: -g 0. Both sides print their
# "bytes in ... seconds" line and exit 0, with busy polling and with completion events (-e).
# Also: a fault from RPMA_SIM_FAULTS on ibv_modify_qp makes the server fail as ibv_rc_pingpong
# does on a real provider. Every process runs under `timeout`; the trap kills what is left.
# Usage: rc_pingpong_test.sh <lib/libibverbs.so.1 of //simverbs/shim:verbs_lib_dir>
set -u
# shellcheck source=simverbs/shim/testlib.sh
source "$(dirname "$0")/testlib.sh"
shim_test_init "$1"
require_tools ibverbs-utils ibv_rc_pingpong
use_shim rc-pingpong
# The out-of-band exchange is real TCP on 127.0.0.1: a port of this run's own.
port=$((20000 + ($$ + RANDOM) % 20000))

# run_pair <name> <extra flags...>: a server, then a client once the server listens.
run_pair() {
  local name="$1"
  shift
  run_server_client "$name" /proc/net/tcp "$(tcp_listen_needle "$port")" \
    ibv_rc_pingpong "$@" -g 0 -p "$port" -- ibv_rc_pingpong "$@" -g 0 -p "$port" 127.0.0.1
  for side in server client; do
    grep -Eq "^[0-9]+ bytes in [0-9.]+ seconds" "$dir/$name.$side.out" ||
      fail "$name: $side printed no 'bytes in ... seconds': $(cat "$dir/$name.$side.out")"
    grep -Eq "^[0-9]+ iters in [0-9.]+ seconds" "$dir/$name.$side.out" ||
      fail "$name: $side printed no 'iters in ... seconds'"
    # Each side's GID is its own (::ffff:127.a.b.c from its pid).
    grep -q "local address: .*GID ::ffff:127\." "$dir/$name.$side.out" ||
      fail "$name: $side's GID is not ::ffff:127.x.y.z"
  done
  local server_gid client_gid
  server_gid="$(sed -n 's/.*local address: .*GID //p' "$dir/$name.server.out")"
  client_gid="$(sed -n 's/.*local address: .*GID //p' "$dir/$name.client.out")"
  [[ -n "$server_gid" && "$server_gid" != "$client_gid" ]] ||
    fail "$name: the two processes have the same GID ($server_gid)"
  port=$((port + 1))
}

run_pair polling
run_pair events -e
run_pair small -s 64 -n 200

# A fault on ibv_modify_qp: the server's move to INIT fails, and it says so and exits 1.
RPMA_SIM_FAULTS='ibv_modify_qp:fail=EINVAL' \
  timeout 30 ibv_rc_pingpong -g 0 -p "$port" >"$dir/fault.out" 2>&1
rc=$?
[[ "$rc" == 1 ]] || fail "ibv_rc_pingpong with a modify fault exited $rc: $(cat "$dir/fault.out")"
grep -q "Failed to modify QP to INIT" "$dir/fault.out" ||
  fail "ibv_rc_pingpong did not report the failed modify: $(cat "$dir/fault.out")"

if ((failures > 0)); then
  for f in "$dir"/*.out; do echo "--- $f"; cat "$f"; done
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: ibv_rc_pingpong -g 0 server and client (polling, -e, -s 64) on the simulated fabric"
