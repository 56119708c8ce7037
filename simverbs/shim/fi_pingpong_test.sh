#!/bin/bash
# libfabric 1.17's verbs provider (Debian's libfabric1 and fi_pingpong of libfabric-bin, not
# rebuilt) on the simulated NIC, through `rpma-sim run` (which puts the shim on the library
# path; no LD_PRELOAD): a fi_pingpong server and client process on one simulated fabric, once
# with -p "verbs;ofi_rxm" -e rdm (RDM over verbs' connected endpoints) and once with -p verbs
# -e msg (ofi_rxm makes RDM endpoints only: "verbs;ofi_rxm" -e msg finds no provider on a
# real NIC either), each with -c (fi_pingpong checks every message's data). Both processes
# exit 0 and print their result table: a row for each of the six default sizes with all 20
# iterations sent and acknowledged ("20 =20"). Every process runs under `timeout`; the trap
# kills a server left behind. Without fi_pingpong the test says so and passes.
# Usage: fi_pingpong_test.sh <rpma-sim> <librpma.so.0> <lib/libibverbs.so.1 of verbs_lib_dir>
set -u
# shellcheck source=simverbs/shim/testlib.sh
source "$(dirname "$0")/testlib.sh"
rpma_sim="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
rpma_lib="$(cd "$(dirname "$2")" && pwd)"
shim_test_init "$3"
if ! command -v fi_pingpong >/dev/null; then
  echo "SKIPPED: fi_pingpong is not installed (package libfabric-bin: tools/ci/install_deps.sh)"
  exit 0
fi
iterations=20
# fi_pingpong's own TCP control port (server -B, client -P), one per pair.
control_port=$((20000 + ($$ % 20000)))

# True when something listens on TCP <port> (IPv4 or IPv6).
tcp_listening() {
  local needle
  needle="$(tcp_listen_needle "$1")"
  grep -qF "$needle" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# A server and a client of fi_pingpong <args...> -I 20 -c, on a fabric of their own; checks
# both exits and outputs.
run_pair() {  # run_pair <name> <fi_pingpong args...>
  local name="$1"
  shift
  control_port=$((control_port + 1))
  use_shim "fi-pingpong-$name"
  local sim=("$rpma_sim" run --lib="$rpma_lib" --verbs-lib="$libdir" --)
  local args=("$@" -I "$iterations" -c)
  timeout 60 "${sim[@]}" fi_pingpong "${args[@]}" -B "$control_port" \
    >"$dir/$name.server.out" 2>&1 &
  server_pid=$!
  local tries
  for ((tries = 0; tries < 100; tries++)); do
    tcp_listening "$control_port" && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  tcp_listening "$control_port" ||
    fail "$name: the server did not listen on TCP $control_port: $(cat "$dir/$name.server.out")"
  timeout 60 "${sim[@]}" fi_pingpong "${args[@]}" -P "$control_port" 127.0.0.1 \
    >"$dir/$name.client.out" 2>&1
  local client_rc=$?
  if [[ "$client_rc" != 0 ]]; then
    kill "$server_pid" 2>/dev/null  # (a server whose client failed may wait forever)
  fi
  wait "$server_pid"
  local server_rc=$?
  server_pid=""
  local side
  for side in client server; do
    local out="$dir/$name.$side.out" rc
    [[ "$side" == client ]] && rc="$client_rc" || rc="$server_rc"
    [[ "$rc" == 0 ]] || fail "$name $side exited $rc: $(cat "$out")"
    grep -q "^bytes  *#sent  *#ack" "$out" || fail "$name $side printed no result table: $(cat "$out")"
    # A row per default size (64 B to 1 MiB), every iteration sent and acknowledged.
    local size
    for size in 64 256 1k 4k 64k 1m; do
      grep -Eq "^$size +$iterations +=$iterations +" "$out" ||
        fail "$name $side has no completed row for $size: $(cat "$out")"
    done
    grep -Eqi "error|fail" "$out" && fail "$name $side printed an error: $(cat "$out")"
  done
  echo "$name: $(grep -E "^1m " "$dir/$name.client.out")"
}

run_pair rdm -p "verbs;ofi_rxm" -e rdm
run_pair msg -p verbs -e msg

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: fi_pingpong -p 'verbs;ofi_rxm' -e rdm and -p verbs -e msg completed with checked data on the simulated fabric"
