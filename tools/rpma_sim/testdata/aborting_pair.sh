#!/usr/bin/env bash
# aborting_pair.sh PROGRAM PORT HOW: aborting_server's server and client as two processes, the
# way a user's script runs them (RPMA_SIM_ROLE names each). The server's output is printed at
# the end; the script exits 0 when both succeeded, else 1: a crash of the server reaches the
# caller only as this exit status. When the client fails, the server is stopped (after a
# grace period).
set -u
program="$1"
port="$2"
how="$3"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
RPMA_SIM_ROLE=server "$program" server "$port" "$how" >"$out" 2>&1 &
server=$!
for _ in $(seq 250); do
  grep -q listening "$out" && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.02
done
RPMA_SIM_ROLE=client "$program" client "$port"
client_status=$?
# A client that failed may have failed first: the server gets two seconds to reach its own end
# (its error path, which is what is tested) before it is stopped.
if ((client_status != 0)); then
  for _ in $(seq 100); do
    kill -0 "$server" 2>/dev/null || break
    sleep 0.02
  done
  kill "$server" 2>/dev/null
fi
wait "$server"
server_status=$?
cat "$out"
echo "pair: client $client_status, server $server_status"
((client_status == 0 && server_status == 0))
