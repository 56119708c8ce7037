#!/bin/bash
# Debian's perftest 4.5 (built against rdma-core 44, not rebuilt) on the verbs shim, with rdma_cm
# connection (-R) and without it (QPN / GID exchanged over perftest's own TCP socket, QPs
# connected by ibv_modify_qp): for each of ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat,
# ib_read_lat and ib_send_lat a server and a client process on one simulated fabric
# (RPMA_SIM_FABRIC, a port of their own) both exit 0 and print their result table ("#bytes"
# header and one row of numbers). perftest needs libmlx5.so.1 and libefa.so.1: the shim's stubs beside it
# (verbs_lib_dir). Every process runs under `timeout`; the trap kills a server left behind.
# Usage: perftest_test.sh <lib/libibverbs.so.1 of //simverbs/shim:verbs_lib_dir>
set -u
# shellcheck source=simverbs/shim/testlib.sh
source "$(dirname "$0")/testlib.sh"
shim_test_init "$1"
port=$((20000 + ($$ % 20000)))

# One try: a server and a client of <program> [-R] -n 50, on a fabric and port of their own.
# Sets raced=1 when the client lost perftest's own race (see below), else checks the outputs.
raced=0
try_pair() {  # try_pair <program> <-R or "">
  local prog="$1" cm="$2"
  raced=0
  port=$((port + 1))
  use_shim "perftest-$prog"  # a fabric per pair
  timeout 60 "$prog" $cm -n 50 -p "$port" >"$dir/$prog.server.out" 2>&1 &
  server_pid=$!
  # The client connects once the server listens: its simulated listener is the abstract socket
  # @softrpma/<fabric>/0.0.0.0:<port> (sim/fabric/host.cc). (A client that comes earlier is
  # rejected, and perftest's server never recovers from it.)
  # Without -R, the server listens on TCP <port> for perftest's own exchange.
  local listener="@softrpma/$RPMA_SIM_FABRIC/0.0.0.0:$port" table=/proc/net/unix
  if [[ -z "$cm" ]]; then
    listener="$(tcp_listen_needle "$port")" table=/proc/net/tcp
  fi
  wait_listening "$table" "$listener" "$server_pid" ||
    fail "$prog${cm:+ $cm} server did not listen on $listener: $(cat "$dir/$prog.server.out")"
  timeout 30 "$prog" $cm -n 50 -p "$port" 127.0.0.1 >"$dir/$prog.client.out" 2>&1
  local client_rc=$?
  # perftest -R connects twice: first for its exchange of parameters, then the test QPs, to a
  # listener the server makes only after the exchange. A client whose second rdma_connect
  # comes first is rejected (IB_CM_REJ_INVALID_SERVICE_ID, 8) and the server then waits
  # forever: perftest's race, not the shim's (rdma_resolve_addr / _route take no time on the
  # simulated fabric, which makes it likelier than on a NIC). Try again then.
  if [[ -n "$cm" && "$client_rc" != 0 ]] && grep -q "RDMA_CM_EVENT_REJECTED; error: 8" "$dir/$prog.client.out"; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=""
    raced=1
    return
  fi
  wait "$server_pid"
  local server_rc=$?
  server_pid=""
  local side
  for side in client server; do
    local out="$dir/$prog.$side.out" rc
    [[ "$side" == client ]] && rc="$client_rc" || rc="$server_rc"
    [[ "$rc" == 0 ]] || fail "$prog${cm:+ $cm} $side exited $rc: $(cat "$out")"
    # (ib_read_lat's server only serves the reads: the client alone reports.)
    [[ "$prog/$side" == ib_read_lat/server ]] && continue
    grep -q "^ *#bytes  *#iterations" "$out" || fail "$prog${cm:+ $cm} $side printed no result table: $(cat "$out")"
    # The row under the header: the message size and -n's iteration count first.
    grep -Eq "^ *[0-9]+ +50 +[0-9]" "$out" || fail "$prog${cm:+ $cm} $side printed no result row: $(cat "$out")"
    grep -Eqi "error|failed|couldn't|unable" "$out" && fail "$prog${cm:+ $cm} $side printed an error: $(cat "$out")"
  done
}

run_pair() {  # run_pair <program> <-R or "">: try_pair, again while the client loses perftest's race
  local prog="$1" cm="$2"
  if ! command -v "$prog" >/dev/null; then
    fail "$prog is not installed (package perftest: tools/ci/install_deps.sh)"
    return
  fi
  local try
  for try in 1 2 3 4 5 6 7 8; do
    try_pair "$prog" "$cm"
    ((raced)) || return 0
    echo "$prog: try $try lost perftest's race between its two rdma_connects; again"
  done
  fail "$prog: every try lost perftest's race: $(cat "$dir/$prog.client.out")"
}

for prog in ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_read_lat ib_send_lat; do
  run_pair "$prog" -R
  run_pair "$prog" ""
done

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat, ib_read_lat and ib_send_lat, with -R and without, completed on the simulated fabric"
