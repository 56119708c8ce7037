#!/usr/bin/env bash
# multiprocess_test: librpma programs in SEPARATE PROCESSES meet on the simulated NIC.
# Every process is started with a timeout and killed at the end, whatever happens.
set -uo pipefail

peer="$1"
garbage="$2"
export RPMA_SIM_FABRIC="mp-test-$$"
# Under --config=tsan: a forking harness whose parent runs the fabric thread is a multi-threaded
# fork, which ThreadSanitizer refuses by default although it is what real harnesses do.
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}die_after_fork=0"
addr=127.0.0.1
failures=0
pids=()
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
cleanup() { for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done; }
trap cleanup EXIT

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# check NAME OUTPUT_FILE PATTERN: the file has a line matching PATTERN.
check() { grep -q -- "$3" "$2" && echo "ok: $1" || { fail "$1 (no '$3' in:)"; sed 's/^/    /' "$2"; }; }
# start NAME ARGS...: runs peer ARGS in the background (20 s at most), output in $tmp/NAME.
start() { local name="$1"; shift; timeout 20 "$peer" "$@" >"$tmp/$name" 2>&1 & pids+=($!); }
wait_listening() { for _ in $(seq 100); do grep -q listening "$1" 2>/dev/null && return; sleep 0.05; done; }

# A server and a client, two programs.
start server1 server $addr 7301
wait_listening "$tmp/server1"
timeout 20 "$peer" client $addr 7301 one >"$tmp/client1" 2>&1
check "client process: every operation" "$tmp/client1" "^client: ok"
wait "${pids[-1]}"
check "server process: every operation, slept while the client wrote and read" "$tmp/server1" "^server: ok (1 client)"

# The same with native atomic write on both sides: the atomic write crosses as its own message
# and completes as IBV_WC_ATOMIC_WRITE (the client checks the opcode).
RPMA_SIM_NATIVE_ATOMIC_WRITE=1 start server-native server $addr 7302
wait_listening "$tmp/server-native"
RPMA_SIM_NATIVE_ATOMIC_WRITE=1 timeout 20 "$peer" client $addr 7302 native >"$tmp/client-native" 2>&1
check "client process, native atomic write" "$tmp/client-native" "^client: ok"
wait "${pids[-1]}"
check "server process, native atomic write" "$tmp/server-native" "^server: ok (1 client)"

# Large transfers go by cross-memory attach where the kernel allows it (the trace says so), and
# through the socket with RPMA_SIM_CMA=0: both give the same bytes.
for cma in 1 0; do
  start "server-cma$cma" server $addr 732$cma
  wait_listening "$tmp/server-cma$cma"
  RPMA_SIM_CMA=$cma RPMA_SIM_TRACE="$tmp/cma$cma.%p.trace" timeout 20 "$peer" client $addr 732$cma \
    cma$cma >"$tmp/client-cma$cma" 2>&1
  wait
  check "client, RPMA_SIM_CMA=$cma" "$tmp/client-cma$cma" "^client: ok"
  check "server, RPMA_SIM_CMA=$cma" "$tmp/server-cma$cma" "^server: ok"
done
# (Yama's ptrace_scope >= 1 forbids it between processes that are not parent and child: the
# fabric then keeps to the socket, which the runs above checked.)
scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
if ((scope >= 1)); then
  echo "skipped: cross-memory attach between siblings (Yama ptrace_scope=$scope forbids it)"
elif grep -q "fabric_cma" "$tmp"/cma1.*.trace && ! grep -q "fabric_cma" "$tmp"/cma0.*.trace; then
  echo "ok: cross-memory attach used by default, not with RPMA_SIM_CMA=0"
else
  fail "cross-memory attach used by default, not with RPMA_SIM_CMA=0"
fi
RPMA_SIM_CMA=maybe timeout 5 "$peer" connect-only $addr 7399 >"$tmp/bad-cma" 2>&1
check "a bad RPMA_SIM_CMA is an error" "$tmp/bad-cma" "Invalid argument"

# Connections travel on shared-memory rings when both processes offer one (the runs above). A
# process with RPMA_SIM_SHM=0, on either side, offers none: the connection keeps every message
# on its socket, and the pair works all the same.
for pair in "0 1" "1 0"; do
  read -r shm_server shm_client <<<"$pair"
  port=$((7340 + shm_server))
  RPMA_SIM_SHM=$shm_server start "server-shm$shm_server" server $addr $port
  wait_listening "$tmp/server-shm$shm_server"
  RPMA_SIM_SHM=$shm_client timeout 20 "$peer" client $addr $port "shm$shm_client" \
    >"$tmp/client-shm$shm_client" 2>&1
  wait "${pids[-1]}"
  check "client, RPMA_SIM_SHM=$shm_client beside a server with $shm_server" \
    "$tmp/client-shm$shm_client" "^client: ok"
  check "server, RPMA_SIM_SHM=$shm_server beside a client with $shm_client" \
    "$tmp/server-shm$shm_server" "^server: ok (1 client)"
done
RPMA_SIM_SHM=maybe timeout 5 "$peer" connect-only $addr 7399 >"$tmp/bad-shm" 2>&1
check "a bad RPMA_SIM_SHM is an error" "$tmp/bad-shm" "Invalid argument"

# Several clients at once.
start server2 server $addr 7302 3
wait_listening "$tmp/server2"
server2=${pids[-1]}
for i in 1 2 3; do start "client2-$i" client $addr 7302 "c$i"; done
wait
for i in 1 2 3; do check "client $i of 3" "$tmp/client2-$i" "^client: ok"; done
check "server of 3 clients" "$tmp/server2" "^server: ok (3 clients)"

# One SRQ shared by four connections with shared completion channels (rpma_conn_wait): two
# sender processes and a process with two sender threads.
start server3 srq-server $addr 7310 4
wait_listening "$tmp/server3"
start sender-a sender $addr 7310 procA
start sender-b sender $addr 7310 procB
start sender-t sender-threads $addr 7310 2
wait
check "sender process A" "$tmp/sender-a" "^sender: ok"
check "sender process B" "$tmp/sender-b" "^sender: ok"
check "two sender threads of one process" "$tmp/sender-t" "^sender: ok"
check "SRQ server with shared channels" "$tmp/server3" "^server: ok (4 clients on one SRQ)"

# A harness that forks its client after listening.
timeout 20 "$peer" fork $addr 7303 >"$tmp/fork" 2>&1
check "forked child uses librpma after fork" "$tmp/fork" "^child client: ok"
check "forking parent serves it" "$tmp/fork" "^harness: ok"

# The parent's objects in a child of fork(): an error, at once, and said on stderr.
timeout 10 "$peer" fork-misuse $addr 7311 >"$tmp/misuse" 2>&1
check "a child using the parent's endpoint gets an error, not a hang" "$tmp/misuse" \
  "on the parent's endpoint: Provider error"
check "the child is told why" "$tmp/misuse" "that its parent created before fork()"
check "the parent's objects still work in the parent" "$tmp/misuse" "^harness: ok"

# IPv6 addresses too.
start server12 server ::1 7312
wait_listening "$tmp/server12"
timeout 20 "$peer" client ::1 7312 v6 >"$tmp/client12" 2>&1
wait
check "a pair on ::1" "$tmp/client12" "^client: ok"

# Traces: one per process. A forked child without %p in the path gets ".<pid>" appended; %p is
# the pid in any process.
RPMA_SIM_TRACE="$tmp/fork.trace" timeout 20 "$peer" fork $addr 7308 >"$tmp/fork-traced" 2>&1
check "forking harness, traced" "$tmp/fork-traced" "^harness: ok"
traces=("$tmp"/fork.trace.*)
if [[ -f "$tmp/fork.trace" && ${#traces[@]} == 1 && -f "${traces[0]}" ]] &&
  grep -q "^end events=" "$tmp/fork.trace" && grep -q " post_send " "${traces[0]}"; then
  # (the child leaves with _exit(), so its trace has no end line: atexit handlers do not run)
  echo "ok: parent and forked child write a trace each"
else
  fail "parent and forked child write a trace each: $(ls "$tmp" | grep fork.trace | tr '\n' ' ')"
fi
start server9 server $addr 7309
RPMA_SIM_TRACE="$tmp/pair.%p.trace" timeout 20 "$peer" client $addr 7309 traced >"$tmp/client9" 2>&1
wait
if (($(ls "$tmp" | grep -c '^pair\.[0-9]*\.trace$') == 1)) && grep -q "cm_event" "$tmp"/pair.*.trace; then
  echo "ok: %p names the trace after the pid"
else
  fail "%p names the trace after the pid: $(ls "$tmp" | tr '\n' ' ')"
fi

# A client before its server: rejected at once (no hang).
timeout 5 "$peer" connect-only $addr 7304 >"$tmp/early" 2>&1
check "client with no server is rejected" "$tmp/early" "Connection rejected"

# Two listeners on one address and port: the second fails (EADDRINUSE -> RPMA_E_PROVIDER).
(sleep 3 | timeout 10 "$peer" listen $addr 7305 >"$tmp/listen1" 2>&1) & pids+=($!)
wait_listening "$tmp/listen1"
timeout 5 "$peer" listen $addr 7305 </dev/null >"$tmp/listen2" 2>&1
check "second listener on one addr:port" "$tmp/listen2" "Provider error"

# Fabrics are apart: a client of another fabric does not see the listener.
start server6 server $addr 7306
wait_listening "$tmp/server6"
RPMA_SIM_FABRIC=elsewhere timeout 5 "$peer" connect-only $addr 7306 >"$tmp/other" 2>&1
check "another fabric's client is rejected" "$tmp/other" "Connection rejected"

# Garbage on the fabric ends only that connection: the same server then serves a real client.
timeout 20 python3 "$garbage" "$RPMA_SIM_FABRIC" "$addr:7306" >"$tmp/garbage" 2>&1
check "every malformed message closed its connection" "$tmp/garbage" "a 4 GiB read: closed"
grep -q "LEFT OPEN" "$tmp/garbage" && fail "a malformed message left its connection open"
timeout 20 "$peer" client $addr 7306 after-garbage >"$tmp/client6" 2>&1
check "client after the garbage" "$tmp/client6" "^client: ok"
wait
check "server survived the garbage" "$tmp/server6" "^server: ok (1 client)"

# The server killed mid-transfer: the client's WRs complete in error, then CLOSED; no hang.
"$peer" server $addr 7307 >"$tmp/server7" 2>&1 &  # no `timeout` between: it is killed below
server7=$!
pids+=($server7)
wait_listening "$tmp/server7"
start hold hold $addr 7307
hold=${pids[-1]}
for _ in $(seq 100); do grep -q writing "$tmp/hold" && break; sleep 0.05; done
sleep 0.2
kill -9 "$server7"
wait "$hold"
check "outstanding write completes in error" "$tmp/hold" "completion status Work Request Flushed Error"
check "the survivor sees the connection closed" "$tmp/hold" "event Connection closed"
# ... and nothing it left behind blocks the next run on that address.
start server8 server $addr 7307
wait_listening "$tmp/server8"
timeout 20 "$peer" client $addr 7307 next-run >"$tmp/client8" 2>&1
check "the next server on the killed one's address" "$tmp/client8" "^client: ok"
wait

# Disconnect as on IB across two processes. The client's rdma_disconnect sends a DREQ: the
# server gets CLOSED with its QP left RTS and its receive posted; its send toward the gone
# client ends in IBV_WC_RETRY_EXC_ERR once the retry timeout (8 x 2^31 ns) passed in its
# simulated time. The client's own CLOSED comes with the server's DREP (answer: its clock did
# not wait the DREQ's timeout, 98304000000 ns) or, when none comes, after that timeout.
# trace_time FILE PATTERN: the time of the first line of FILE matching PATTERN (-1: none).
trace_time() { awk -v p="$2" '$0 ~ p { print $2; found = 1; exit } END { if (!found) print -1 }' "$1"; }
for how in answer silent; do
  mkfifo "$tmp/go-server-$how" "$tmp/go-client-$how"
  RPMA_SIM_TRACE="$tmp/dreq-server-$how.trace" timeout 20 "$peer" dreq-server $addr 7314 $how \
    <"$tmp/go-server-$how" >"$tmp/dreq-server-$how" 2>&1 &
  server=$!
  pids+=($server)
  exec 3>"$tmp/go-server-$how"
  wait_listening "$tmp/dreq-server-$how"
  RPMA_SIM_TRACE="$tmp/dreq-client-$how.trace" timeout 20 "$peer" dreq-client $addr 7314 \
    <"$tmp/go-client-$how" >"$tmp/dreq-client-$how" 2>&1 &
  client=$!
  pids+=($client)
  exec 4>"$tmp/go-client-$how"
  if [[ $how == answer ]]; then
    wait "$server"  # it answered the DREQ: the DREP reached the client before it looks
    echo go >&4
    wait "$client"
  else
    for _ in $(seq 200); do grep -q "receive still posted" "$tmp/dreq-server-$how" && break; sleep 0.05; done
    echo go >&4  # the client times the DREQ out and goes; then the server sends
    wait "$client"
    echo go >&3
    wait "$server"
  fi
  exec 3>&- 4>&-
  check "DREQ ($how): the server's QP kept its receive" "$tmp/dreq-server-$how" "receive still posted"
  check "DREQ ($how): the server's send timed out" "$tmp/dreq-server-$how" \
    "send status transport retry counter exceeded"
  check "DREQ ($how): server" "$tmp/dreq-server-$how" "^server: ok"
  check "DREQ ($how): client" "$tmp/dreq-client-$how" "^client: ok"
  posted=$(trace_time "$tmp/dreq-server-$how.trace" " post_send ")
  failed=$(trace_time "$tmp/dreq-server-$how.trace" " wc .*status=IBV_WC_RETRY_EXC_ERR")
  if ((posted >= 0 && failed - posted >= 17179869184)); then
    echo "ok: DREQ ($how): the send failed after the retry timeout ($posted -> $failed ns)"
  else
    fail "DREQ ($how): the send failed after the retry timeout ($posted -> $failed ns)"
  fi
  closed=$(trace_time "$tmp/dreq-client-$how.trace" "cm_event_got .*type=RDMA_CM_EVENT_DISCONNECTED")
  if [[ $how == answer ]] && ((closed >= 0 && closed < 98304000000)) &&
    grep -q " cm_drep " "$tmp/dreq-client-$how.trace"; then
    echo "ok: DREQ (answer): the client's CLOSED came with the DREP, at $closed ns"
  elif [[ $how == silent ]] && ((closed >= 98304000000)); then
    echo "ok: DREQ (silent): the client's CLOSED came when the DREQ timed out, at $closed ns"
  else
    fail "DREQ ($how): the client's CLOSED at $closed ns"
  fi
done

# A server busy outside the simulator for 300 ms before it answers a DREQ (as upstream's
# multithreaded tests are): the client's CLOSED comes with its DREP, after it, not with the
# DREQ's timeout in the client's own simulated time (RPMA_SIM_PEER_ANSWER_MS). Also with both
# processes pinned to one CPU; and with RPMA_SIM_PEER_ANSWER_MS=0 the timeout comes first.
busy_pair() {  # busy_pair NAME PORT PREFIX...: the pair's outputs in $tmp/busy-NAME-{server,client}
  local name="$1" port="$2"
  shift 2
  "$@" timeout 20 "$peer" busy-server $addr "$port" 300 >"$tmp/busy-$name-server" 2>&1 &
  local server=$!
  pids+=($server)
  wait_listening "$tmp/busy-$name-server"
  "$@" timeout 20 "$peer" closing-client $addr "$port" >"$tmp/busy-$name-client" 2>&1
  wait "$server"
}
# order NAME: whether the client's CLOSED came after the server's answer.
closed_after_answer() {
  local answered closed
  answered=$(sed -n 's/^server: answering at //p' "$tmp/busy-$1-server")
  closed=$(sed -n 's/^client: closed at //p' "$tmp/busy-$1-client")
  [[ -n "$answered" && -n "$closed" ]] && ((closed >= answered))
}
cpu0=()
if command -v taskset >/dev/null; then cpu0=(taskset -c 0); fi
for name in free pinned; do
  if [[ $name == pinned ]]; then busy_pair $name 7316 env "${cpu0[@]}"; else busy_pair $name 7315 env; fi
  check "busy server ($name): server" "$tmp/busy-$name-server" "^server: ok"
  check "busy server ($name): client" "$tmp/busy-$name-client" "^client: ok"
  if closed_after_answer $name; then
    echo "ok: busy server ($name): the client's CLOSED came after the server's answer"
  else
    fail "busy server ($name): the client's CLOSED came before the server's answer"
    cat "$tmp/busy-$name-server" "$tmp/busy-$name-client"
  fi
done
busy_pair no-wait 7317 env RPMA_SIM_PEER_ANSWER_MS=0
check "busy server (no wait): client" "$tmp/busy-no-wait-client" "^client: ok"
if closed_after_answer no-wait; then
  fail "busy server (RPMA_SIM_PEER_ANSWER_MS=0): the client's timeout should come first"
else
  echo "ok: busy server (RPMA_SIM_PEER_ANSWER_MS=0): the client's timeout came first"
fi
RPMA_SIM_PEER_ANSWER_MS=soon timeout 20 "$peer" closing-client $addr 7318 >"$tmp/bad-answer" 2>&1
check "RPMA_SIM_PEER_ANSWER_MS=soon is refused, naming it" "$tmp/bad-answer" \
  "RPMA_SIM_PEER_ANSWER_MS: bad value"

echo "multiprocess: $failures failed"
((failures == 0))
