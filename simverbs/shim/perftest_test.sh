#!/bin/bash
# Debian's perftest 4.5 (built against rdma-core 44, not rebuilt) on the verbs shim, with rdma_cm
# connection (-R) and without it (QPN / GID exchanged over perftest's own TCP socket, QPs
# connected by ibv_modify_qp): for each of ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw,
# ib_write_lat, ib_read_lat, ib_send_lat and ib_atomic_lat (fetch-and-add, and with -A CMP_AND_SWAP
# compare-and-swap) a server and a client process on one simulated fabric
# (RPMA_SIM_FABRIC, a port of their own) both exit 0 and print their result table ("#bytes"
# header and one row of numbers). perftest needs libmlx5.so.1 and libefa.so.1: the shim's stubs beside it
# (verbs_lib_dir). Every process runs under `timeout`; the trap kills a server left behind.
# Usage: perftest_test.sh <lib/libibverbs.so.1 of //simverbs/shim:verbs_lib_dir>
#                         <libconnect_when_listening.so>
set -u
# shellcheck source=simverbs/shim/testlib.sh
source "$(dirname "$0")/testlib.sh"
shim_test_init "$1"
connect_when_listening="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
port=$((20000 + ($$ % 20000)))

# run_pair, again (3 times at most) when perftest could not calibrate its clock: a latency
# test measures the CPU's frequency first (get_cpu_mhz, usleep against the cycle counter), and
# on a loaded machine the fit fails ("Correlation coefficient r^2: ... < 0.9") and perftest
# prints no result. That is the machine's load, not the simulator: the attempt's failures are
# taken back and said.
run_pair() {  # run_pair <program> <-R or ""> [<extra option>...]
  local attempt before
  for attempt in 1 2 3; do
    before=$failures
    run_pair_once "$@"
    grep -q "Correlation coefficient r^2" "$dir/$1.client.out" "$dir/$1.server.out" 2>/dev/null ||
      return
    ((attempt < 3)) || return
    echo "NOTE: $1${2:+ $2}: perftest could not calibrate its clock (a loaded machine): again"
    failures=$before
  done
}

# A server and a client of <program> [-R] [extra options] -n 50, on a fabric and port of their
# own; checks their outputs.
run_pair_once() {  # run_pair_once <program> <-R or ""> [<extra option>...]
  local prog="$1" cm="$2"
  shift 2
  local extra=("$@")
  if ! command -v "$prog" >/dev/null; then
    fail "$prog is not installed (package perftest: tools/ci/install_deps.sh)"
    return
  fi
  port=$((port + 1))
  use_shim "perftest-$prog"  # a fabric per pair
  timeout 60 "$prog" $cm "${extra[@]}" -n 50 -p "$port" >"$dir/$prog.server.out" 2>&1 &
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
  # perftest -R connects twice: first for its exchange of parameters, then the test QPs, to a
  # listener the server makes only after the exchange, and a client whose second rdma_connect
  # comes first fails (perftest's race, likelier on the simulated fabric: see
  # connect_when_listening.c). The client's rdma_connect waits for that listener.
  local preload="${LD_PRELOAD:-}"
  [[ -n "$cm" ]] && preload="${preload:+$preload:}$connect_when_listening"
  LD_PRELOAD="$preload" timeout 30 "$prog" $cm "${extra[@]}" -n 50 -p "$port" 127.0.0.1 \
    >"$dir/$prog.client.out" 2>&1
  local client_rc=$?
  if [[ "$client_rc" != 0 ]]; then
    kill "$server_pid" 2>/dev/null  # (a server whose client failed waits forever)
  fi
  wait "$server_pid"
  local server_rc=$?
  server_pid=""
  local side
  for side in client server; do
    local out="$dir/$prog.$side.out" rc
    [[ "$side" == client ]] && rc="$client_rc" || rc="$server_rc"
    [[ "$rc" == 0 ]] || fail "$prog${cm:+ $cm} $side exited $rc: $(cat "$out")"
    # (ib_read_lat's and ib_atomic_lat's servers only serve the requests: the client alone
    # reports.)
    [[ "$prog/$side" == ib_read_lat/server || "$prog/$side" == ib_atomic_lat/server ]] && continue
    grep -q "^ *#bytes  *#iterations" "$out" || fail "$prog${cm:+ $cm} $side printed no result table: $(cat "$out")"
    # The row under the header: the message size and -n's iteration count first.
    grep -Eq "^ *[0-9]+ +50 +[0-9]" "$out" || fail "$prog${cm:+ $cm} $side printed no result row: $(cat "$out")"
    grep -Eqi "error|failed|couldn't|unable" "$out" && fail "$prog${cm:+ $cm} $side printed an error: $(cat "$out")"
  done
}

for prog in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat \
  ib_atomic_lat; do
  run_pair "$prog" -R
  run_pair "$prog" ""
done
run_pair ib_atomic_lat "" -A CMP_AND_SWAP
run_pair ib_atomic_bw -R -A CMP_AND_SWAP

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw, ib_write_lat, ib_read_lat, ib_send_lat and ib_atomic_lat, with -R and without (and the atomics with -A CMP_AND_SWAP), completed on the simulated fabric"
