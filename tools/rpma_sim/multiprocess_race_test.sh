#!/usr/bin/env bash
# The race detector across PROCESSES (docs/FABRIC.md): a client (tests/multiprocess/peer.c) in
# one process, its server in another, under `rpma-sim run`. A WR to another process is
# deferred as one inside a process is, and sending it is executing it: a source overwritten
# before then is what the server gets, and the race line names it; a read's destination holds
# the poison until its completion; a sweep of such a pair classes its clean run racy.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
peer="$root/tests/multiprocess/peer"
pair="$root/tests/multiprocess/pair.sh"
race_line='^softrpma-sim: race: qp [0-9]* wr_id 0x[0-9a-f]* IBV_WR_RDMA_WRITE: source bytes \[0, 13) of 15'

# The backstop sends a deferred WR of a program that calls nothing about 1 ms after its post; a
# loaded machine (the sanitizer passes run two tests on two cores) may stop the client that long
# between its rpma_write and its bug, and the WR would then leave before the bug. A long backstop
# (fabric/host.h, FOR TESTS ONLY) keeps what this test checks about the race detector, not about
# the scheduler; the client's next call (its wait for the completion) sends the WR either way.
export RPMA_SIM_FABRIC_BACKSTOP_MS=3000

port=7721
for seed in 1 2 3; do
  run "$rpma_sim" run --seed="$seed" -- "$pair" "$peer" "$port" reuse-early
  port=$((port + 1))
  expect_status "seed $seed: both processes end well (the bug corrupts, it does not crash)" 0 "$status"
  check "seed $seed: the race line names the write's changed bytes" grep -q "$race_line" <<<"$err"
  expect_in "seed $seed: the server got the overwritten bytes, as from a NIC" "$out" \
    'client: read back: "OVERWRITTEN!!!"'
done

run "$rpma_sim" run --seed=1 -- "$pair" "$peer" "$port" read-early
port=$((port + 1))
expect_status "read-early: both processes end well" 0 "$status"
expect_in "read-early: the destination holds the poison before the completion" "$out" \
  "client: before the completion the destination held 0xa5"

run "$rpma_sim" run --seed=1 --races=false -- "$pair" "$peer" "$port" reuse-early
port=$((port + 1))
check "--races=false: no race line" bash -c '! grep -q "softrpma-sim: race" <<<"$1"' _ "$err"
expect_in "--races=false: the corruption still shows" "$out" 'client: read back: "OVERWRITTEN!!!"'

run "$rpma_sim" run --seed=1 --execution=eager -- "$pair" "$peer" "$port" reuse-early
port=$((port + 1))
check "eager execution: no race line" bash -c '! grep -q "softrpma-sim: race" <<<"$1"' _ "$err"
expect_in "eager execution: the write left at its post" "$out" 'client: read back: "hello, server!"'

run "$rpma_sim" run --seed=1 -- "$pair" "$peer" "$port"
port=$((port + 1))
expect_status "the pair without a misuse passes" 0 "$status"
check "without a misuse: no race line" bash -c '! grep -q "softrpma-sim: race" <<<"$1"' _ "$err"

RPMA_SIM_TRANSPORT=tcp run "$peer" connect-only 127.0.0.1 "$port"
check "a bad RPMA_SIM_TRANSPORT stops the program" test "$status" -ne 0
expect_in "and names the variable and the values it takes" "$err" \
  'RPMA_SIM_TRANSPORT: bad value "tcp": expected local'

run "$rpma_sim" sweep --seed=1 --timeout=20s -- "$pair" "$peer" "$port" reuse-early
echo "$out"
expect_status "the sweep of the racy pair fails" 1 "$status"
check "its clean run is classified racy" grep -q '^clean run: racy (race: qp ' <<<"$out"
check "with its replay line" grep -q -- "replay: .*rpma-sim run --seed=1 -- .*pair.sh .* reuse-early" <<<"$out"
finish
