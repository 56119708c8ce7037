#!/usr/bin/env bash
# The race detector end to end: `demo --once --reuse-early` overwrites a write's source before
# its completion. Under asynchronous execution (the default) the seed decides whether the NIC
# had executed the write by then: some seeds corrupt the remote copy, and for those the
# detector names the bytes, the run fails its read-back, and a sweep reports the run as racy
# with its replay line. The same seed gives the same outcome; eager execution hides the bug.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
demo="$root/tools/demo"

racy_seed=""
clean_seed=""
for seed in 1 2 3 4 5 6 7 8 9 10 11 12; do
  run "$rpma_sim" run --seed="$seed" -- "$demo" --once --reuse-early
  if grep -q '^softrpma-sim: race: qp [0-9]* wr_id 0x1 IBV_WR_RDMA_WRITE: source bytes \[0, 11) of 26' <<<"$err"; then
    expect_status "seed $seed: a racy run fails its read-back" 1 "$status"
    check "seed $seed: the remote copy holds the overwritten bytes" grep -q 'read back: "OVERWRITTEN' <<<"$out"
    racy_seed="${racy_seed:-$seed}"
  else
    expect_status "seed $seed: the write executed before the reuse: the run passes" 0 "$status"
    check "seed $seed: no race line" bash -c '! grep -q "race" <<<"$1"' _ "$err"
    clean_seed="${clean_seed:-$seed}"
  fi
done
check "some seed shows the race" test -n "$racy_seed"
check "some seed hides it (the NIC executed the write at the next post)" test -n "$clean_seed"

if [[ -n "$racy_seed" ]]; then
  first_err="$(grep race <<<"$err" || true)"
  run "$rpma_sim" run --seed="$racy_seed" -- "$demo" --once --reuse-early
  check "the same seed races again" grep -q '^softrpma-sim: race: ' <<<"$err"

  run "$rpma_sim" run --seed="$racy_seed" --trace="$work/race.trace" -- "$demo" --once --reuse-early
  run "$rpma_sim" trace "$work/race.trace"
  check "the trace shows the race" grep -q 'RACE: IBV_WR_RDMA_WRITE wr_id=0x1: source bytes \[0, 11) of 26 changed after the post' <<<"$out"

  run "$rpma_sim" run --seed="$racy_seed" --races=false -- "$demo" --once --reuse-early
  check "--races=false: no race line" bash -c '! grep -q "softrpma-sim: race" <<<"$1"' _ "$err"
  expect_status "--races=false: the corruption still shows" 1 "$status"

  run "$rpma_sim" run --seed="$racy_seed" --execution=eager -- "$demo" --once --reuse-early
  expect_status "eager execution hides the bug" 0 "$status"

  run "$rpma_sim" sweep --seed="$racy_seed" -- "$demo" --once --reuse-early
  echo "$out"
  expect_status "the sweep fails" 1 "$status"
  check "the clean run is classified racy" grep -q '^clean run: racy (race: qp ' <<<"$out"
  check "with its replay line" grep -q -- "replay: .*rpma-sim run --seed=$racy_seed -- .*demo --once --reuse-early" <<<"$out"
fi

run "$rpma_sim" run --execution=later -- "$demo" --once
expect_status "a bad --execution is a usage error" 2 "$status"
check "naming the value" grep -q 'execution: "later" is neither async nor eager' <<<"$err"

finish
