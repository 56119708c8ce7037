#!/usr/bin/env bash
# pair.sh PEER PORT [MISUSE]: a server and a client as two processes, the way a user's test
# script runs them (RPMA_SIM_ROLE names each for prog= fault rules). Exits 0 when both
# succeeded; when the client fails, the server (which may wait for clients forever, as servers
# do) is stopped. MISUSE goes to the client (peer.c: reuse-early, read-early).
set -u
peer="$1"
port="$2"
out=$(mktemp)
RPMA_SIM_ROLE=server "$peer" server 127.0.0.1 "$port" >"$out" 2>&1 &
server=$!
for _ in $(seq 250); do
  grep -q listening "$out" && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.02
done
RPMA_SIM_ROLE=client "$peer" client 127.0.0.1 "$port" 0 ${3:+"$3"}
client_status=$?
((client_status == 0)) || kill "$server" 2>/dev/null
wait "$server"
server_status=$?
cat "$out"
rm -f "$out"
echo "pair: client $client_status, server $server_status"
((client_status == 0 && server_status == 0))
