#!/bin/bash
# softrpma's own librpma, linked with libibverbs / librdmacm, loaded beside the shim: with
# RPMA_BACKEND=ibverbs its ibverbs backend calls the shim (which must export every function
# that backend uses, and whose simulator is the one that answers), so a librpma server and
# client as two processes (tests/multiprocess:peer, the demo's exchange: write, read, atomic
# write, flush, send/recv, write with immediate data) complete on the simulated fabric through
# the verbs API. The ibverbs backend's first run without an RDMA device; not yet the
# differential test (same program, sim backend vs ibverbs backend on the shim, same results).
# Usage: librpma_on_shim_test.sh <lib/libibverbs.so.1> <peer>
set -u
libdir="$(cd "$(dirname "$1")" && pwd)"
peer="$2"
dir="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
server_pid=""
cleanup() { [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; }
trap cleanup EXIT

export LD_LIBRARY_PATH="$libdir" RPMA_BACKEND=ibverbs RPMA_SIM_FABRIC="shim-librpma-$$-$RANDOM"
unset RPMA_SIM_DEVICE RPMA_SIM_FAULTS RPMA_SIM_SCENARIO RPMA_SIM_TRACE
ldd "$peer" | grep -q "$libdir/libibverbs.so.1" ||
  fail "peer does not load the shim: $(ldd "$peer")"

timeout 30 "$peer" server 127.0.0.1 7214 >"$dir/server.out" 2>&1 &
server_pid=$!
client_rc=1
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  sleep 0.3
  timeout 30 "$peer" client 127.0.0.1 7214 demo >"$dir/client.out" 2>&1
  client_rc=$?
  grep -q "connected" "$dir/client.out" && break
done
wait "$server_pid"
server_rc=$?
server_pid=""
[[ "$client_rc" == 0 ]] || fail "client exited $client_rc"
[[ "$server_rc" == 0 ]] || fail "server exited $server_rc"
grep -q "^client: ok" "$dir/client.out" || fail "client did not finish"
grep -q "^server: ok (1 client)" "$dir/server.out" || fail "server did not finish"
if ((failures > 0)); then
  echo "--- server"; cat "$dir/server.out"; echo "--- client"; cat "$dir/client.out"
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: librpma's ibverbs backend on the shim: server and client completed"
