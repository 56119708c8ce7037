#!/bin/bash
# UD QPs on the verbs shim: Debian's ibv_ud_pingpong (ibverbs-utils, built against rdma-core 44,
# not rebuilt) as two processes on one simulated fabric. Each side creates a UD QP, exchanges
# LID/QPN/PSN/GID with the other over a TCP socket of its own, makes an address handle from
# the peer's GID (ibv_create_ah) and sends its datagrams to the peer's QP number; each receive
# gets the 40-byte GRH in front of the message (docs/DEVICES.md, "UD QPs"). Both sides print
# their "bytes in ... seconds" line and exit 0: busy polling, completion events (-e) with the
# received buffers checked (-c), one message of exactly the port's MTU (1024). A size above
# the MTU is refused by the program, as on a NIC whose port is at 1024.
# Every process runs under `timeout`; the trap kills what is left.
# Usage: ud_pingpong_test.sh <lib/libibverbs.so.1 of //simverbs/shim:verbs_lib_dir>
set -u
# shellcheck source=simverbs/shim/testlib.sh
source "$(dirname "$0")/testlib.sh"
shim_test_init "$1"
require_tools ibverbs-utils ibv_ud_pingpong
use_shim ud-pingpong
# The out-of-band exchange is real TCP on 127.0.0.1: a port of this run's own.
port=$((20000 + ($$ + RANDOM) % 20000))

# run_pair <name> <extra flags...>: a server, then a client once the server listens.
run_pair() {
  local name="$1"
  shift
  run_server_client "$name" /proc/net/tcp "$(tcp_listen_needle "$port")" \
    ibv_ud_pingpong "$@" -g 0 -p "$port" -- ibv_ud_pingpong "$@" -g 0 -p "$port" 127.0.0.1
  for side in server client; do
    grep -Eq "^[0-9]+ bytes in [0-9.]+ seconds" "$dir/$name.$side.out" ||
      fail "$name: $side printed no 'bytes in ... seconds': $(cat "$dir/$name.$side.out")"
    grep -Eq "^[0-9]+ iters in [0-9.]+ seconds" "$dir/$name.$side.out" ||
      fail "$name: $side printed no 'iters in ... seconds'"
  done
  local server_gid client_gid
  server_gid="$(sed -n 's/.*local address: .*GID //p' "$dir/$name.server.out")"
  client_gid="$(sed -n 's/.*local address: .*GID //p' "$dir/$name.client.out")"
  [[ -n "$server_gid" && "$server_gid" != "$client_gid" ]] ||
    fail "$name: the two processes have the same GID ($server_gid)"
  port=$((port + 1))
}

run_pair polling -s 512
run_pair events-checked -e -c -s 512
run_pair mtu-checked -c -s 1024 -n 200

# Above the port's active MTU: the program refuses before it sends anything.
timeout 30 ibv_ud_pingpong -g 0 -s 2048 -p "$port" >"$dir/above_mtu.out" 2>&1
rc=$?
[[ "$rc" != 0 ]] || fail "ibv_ud_pingpong -s 2048 exited 0: $(cat "$dir/above_mtu.out")"
grep -q "larger than port MTU (1024)" "$dir/above_mtu.out" ||
  fail "ibv_ud_pingpong -s 2048 did not name the MTU: $(cat "$dir/above_mtu.out")"

if ((failures > 0)); then
  for f in "$dir"/*.out; do echo "--- $f"; cat "$f"; done
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: ibv_ud_pingpong -g 0 server and client (polling, -e -c, one MTU) on the simulated fabric"
