#!/usr/bin/env bash
# The demo's second part: a librpma server and client as TWO PROCESSES on the simulated NIC
# (they meet on the host fabric, docs/FABRIC.md), then a harness that forks its client after
# listening. Usage: demo_two_processes.sh PATH_TO_PEER
set -uo pipefail
peer="$1"
export RPMA_SIM_FABRIC="demo-$$"  # this demo's own fabric: nothing else running can meet it
label() { while IFS= read -r line; do echo "  [$1] $line"; done; }

echo "== two processes: ./peer server 127.0.0.1 7204 & ./peer client 127.0.0.1 7204"
fifo=$(mktemp -u)
mkfifo "$fifo"
timeout 30 "$peer" server 127.0.0.1 7204 >"$fifo" 2>&1 &
server=$!
label "server process" <"$fifo" &
labeler=$!
sleep 0.3
timeout 30 "$peer" client 127.0.0.1 7204 demo 2>&1 | label "client process"
client_status=${PIPESTATUS[0]}
wait "$server"
server_status=$?
wait "$labeler"
rm -f "$fifo"
echo "  (the client wrote, read, atomically wrote and flushed the server's memory while the"
echo "   server slept in rpma_cq_wait; then send/recv both ways and a write with immediate data)"

echo "== a harness that forks its client after rpma_ep_listen: ./peer fork 127.0.0.1 7205"
timeout 30 "$peer" fork 127.0.0.1 7205 2>&1 | label "harness"
fork_status=${PIPESTATUS[0]}

echo "== a client with no server: rejected at once, no hang"
timeout 10 "$peer" connect-only 127.0.0.1 7206 2>&1 | label "client"

if ((client_status == 0 && server_status == 0 && fork_status == 0)); then
  echo "demo: two processes met on the simulated NIC"
else
  echo "demo: the two-process run FAILED (client $client_status, server $server_status, fork $fork_status)"
  exit 1
fi
