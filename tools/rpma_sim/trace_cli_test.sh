#!/usr/bin/env bash
# `rpma-sim trace` on a trace a real run wrote (`rpma-sim run --trace` of the demo) and on
# testdata/sample.trace: readable lines whose fingerprint checks, and Chrome Trace Event JSON that
# is structurally valid (testdata/check_chrome_trace.py: keys per phase, ts monotonic per track,
# dur >= 0, slices nest) with a track per QP and per CQ.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
demo="$root/tools/demo"
checker="$testdata/check_chrome_trace.py"

run "$rpma_sim" run --seed=7 --trace="$work/demo.trace" -- "$demo" --once
expect_status "the traced demo run: exit 0" 0 "$status"
check "the trace was written" test -s "$work/demo.trace"

run "$rpma_sim" trace "$work/demo.trace"
expect_status "trace: exit 0" 0 "$status"
expect_in "trace: header" "$out" "trace format 2, process demo, seed 0x0000000000000007, faults at start: none"
expect_in "trace: the fingerprint checks" "$out" "(matches the events)"
expect_in "trace: a write" "$out" "post_send RDMA_WRITE wr_id=0x1"
expect_in "trace: its completion" "$out" "polled: QP 17 wr_id=0x1 RDMA_WRITE IBV_WC_SUCCESS"
expect_in "trace: CM" "$out" "CM event RDMA_CM_EVENT_ESTABLISHED"
expect_in "trace: summary" "$out" "summary: 4 work requests posted"

run "$rpma_sim" trace "$work/demo.trace" --chrome="$work/demo.json"
expect_status "chrome: exit 0" 0 "$status"
expect_in "chrome: says where" "$out" "wrote $work/demo.json"
run python3 "$checker" "$work/demo.json" 4
expect_status "chrome: structurally valid" 0 "$status"
echo "$out"
tracks="$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join(sorted(e["args"]["name"] for e in d["traceEvents"] if e["name"] == "thread_name")))
' "$work/demo.json")"
expect_in "chrome: QP tracks" "$tracks" "QP 17 QP 18"
expect_in "chrome: CQ tracks" "$tracks" "CQ 1 CQ 2 CQ 3 CQ 4"
expect_in "chrome: CM track" "$tracks" "rdma_cm"

# Same seed, same trace (the demo is single-threaded; ASLR is off under rpma-sim run).
"$rpma_sim" run --seed=7 --trace="$work/again.trace" -- "$demo" --once >/dev/null 2>&1
check "same seed: the same trace, byte for byte" cmp -s "$work/demo.trace" "$work/again.trace"

# The run's fingerprint: its last line, the same for the same run wherever it ran (ports and
# the program's pointers normalized), another for another seed.
run "$rpma_sim" trace --fingerprint "$work/demo.trace"
expect_status "fingerprint: exit 0" 0 "$status"
expect_in "fingerprint: the file's line" "$out" "$work/demo.trace: process demo, "
fingerprint="$(echo "$out" | tail -n 1)"
check "fingerprint: the last line is 'fingerprint 0x<16 hex digits>'" \
  grep -qxE 'fingerprint 0x[0-9a-f]{16}' <<<"$fingerprint"
port="$(grep -o -m 1 ' port=[0-9]*' "$work/demo.trace" | cut -d= -f2)"
check "fingerprint: the demo's trace names its port" test -n "$port"
# As if run on another port and address-space layout: every port and wr_id rewritten.
sed -e "s/ port=$port/ port=65001/" -e 's/ wr_id=0x\([0-9a-f]*\)/ wr_id=0xfeed\1/g' \
  "$work/demo.trace" >"$work/elsewhere.trace"
check "fingerprint: the rewritten trace differs" bash -c "! cmp -s '$work/demo.trace' '$work/elsewhere.trace'"
run "$rpma_sim" trace --fingerprint "$work/elsewhere.trace"
check "fingerprint: same run elsewhere, same fingerprint" test "$fingerprint" = "$(echo "$out" | tail -n 1)"
"$rpma_sim" run --seed=8 --trace="$work/seed8.trace" -- "$demo" --once >/dev/null 2>&1
run "$rpma_sim" trace --fingerprint "$work/seed8.trace"
check "fingerprint: another seed, another fingerprint" \
  test "$fingerprint" != "$(echo "$out" | tail -n 1)"
run "$rpma_sim" trace --fingerprint "$work/demo.trace" "$work/seed8.trace"
expect_status "fingerprint: of two files, exit 0" 0 "$status"
run "$rpma_sim" trace "$work/demo.trace" "$work/seed8.trace"
expect_status "two files with neither view: usage error" 2 "$status"
expect_in "two files with neither view: says both" "$err" "--fingerprint"
run "$rpma_sim" trace --fingerprint --chrome=- "$work/demo.trace"
expect_status "--fingerprint with --chrome: usage error" 2 "$status"

# A fault shows in both views.
run "$rpma_sim" run --faults='ibv_post_send:fail=EIO:nth=2' --trace="$work/fault.trace" -- \
  "$demo" --once
expect_status "the faulted run: exit 1" 1 "$status"
run "$rpma_sim" trace "$work/fault.trace"
expect_in "fault: text" "$out" "FAULT injected: ibv_post_send fail=EIO (hit 2)"
"$rpma_sim" trace "$work/fault.trace" --chrome=- >"$work/fault.json"
run python3 "$checker" "$work/fault.json" 1
expect_status "fault: chrome valid" 0 "$status"
check "fault: an instant for it" grep -qF '"name":"fault: ibv_post_send fail=EIO","ph":"i"' \
  "$work/fault.json"

# The hand-written sample: partially overlapping work requests go to a second lane.
run "$rpma_sim" trace "$testdata/sample.trace" --chrome="$work/sample.json"
expect_status "sample: exit 0" 0 "$status"
run python3 "$checker" "$work/sample.json" 6
expect_status "sample: structurally valid" 0 "$status"
check "sample: a second lane" grep -qF '"name":"QP 17 (2)"' "$work/sample.json"
# ... and exactly the JSON it always gave (testdata/sample.chrome.json, written by the first
# version of the converter): a faster layout must not change a byte.
"$rpma_sim" trace "$testdata/sample.trace" --chrome=- >"$work/sample-stdout.json" 2>/dev/null
check "sample: the same JSON as before" cmp "$testdata/sample.chrome.json" "$work/sample-stdout.json"

# A varied trace (testdata/mixed.trace, from `gen_trace.py mixed 300`: out-of-order and error
# completions, unsignaled sends, SRQ receives, WRs never completed, CQEs never polled): the
# same JSON as the first version of the converter wrote (when that version gave the SRQ's
# leftover receives to the lowest-numbered QP; it chose by hash order, now always so).
"$rpma_sim" trace "$testdata/mixed.trace" --chrome=- >"$work/mixed.json" 2>/dev/null
check "mixed: the same JSON as before" cmp "$testdata/mixed.chrome.json" "$work/mixed.json"

# Large traces convert (the layout used to be quadratic: 20,000 staggered WRs took 20 s).
# 50,000 WRs in flight at once on one QP, every 8th unsignaled: one lane each for QP and CQ;
# a slice per WR (the last one, unsignaled with no completion after it, is an instant) and one
# per CQE (43,750): 93,749.
python3 "$testdata/gen_trace.py" burst 50000 >"$work/burst.trace"
run "$rpma_sim" trace "$work/burst.trace" --chrome="$work/burst.json"
expect_status "50,000 WRs in flight: exit 0" 0 "$status"
run python3 "$checker" "$work/burst.json" 93749
expect_status "50,000 WRs in flight: valid" 0 "$status"
expect_in "50,000 WRs in flight: every WR and CQE a slice, in one lane each" "$out" \
  "valid: 2 tracks, 93749 slices"
# 20,000 WRs that all overlap partially: the worst case, one lane per WR.
python3 "$testdata/gen_trace.py" stagger 20000 >"$work/stagger.trace"
run "$rpma_sim" trace "$work/stagger.trace" --chrome="$work/stagger.json"
expect_status "20,000 staggered WRs: exit 0" 0 "$status"
run python3 "$checker" "$work/stagger.json" 40000
expect_status "20,000 staggered WRs: valid" 0 "$status"
check "20,000 staggered WRs: 20,000 lanes" grep -qF '"name":"QP 17 (20000)"' "$work/stagger.json"

# Files that are no trace: an error (exit 1), never an abort or an endless read.
run "$rpma_sim" trace /
expect_status "a directory: exit 1" 1 "$status"
expect_in "a directory: said so" "$err" "rpma-sim: /: cannot read trace file: it is a directory"
run timeout 120 "$rpma_sim" trace /dev/zero
expect_status "/dev/zero: exit 1" 1 "$status"
expect_in "/dev/zero: the limit" "$err" "rpma-sim: /dev/zero: cannot read trace file: it is larger than 256 MiB"
run "$rpma_sim" trace "$work/no-such.trace"
expect_status "a missing file: exit 1" 1 "$status"
expect_in "a missing file: said so" "$err" "no-such.trace: cannot read trace file: No such file or directory"

# The checker itself rejects what it must (so that a pass above means something).
track='{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"a"}}'
printf '{"traceEvents":[%s,%s]}' "$track" \
  '{"name":"x","ph":"X","ts":5,"dur":-1,"pid":1,"tid":1}' >"$work/bad1.json"
run python3 "$checker" "$work/bad1.json"
expect_in "checker: negative dur" "$out" "INVALID: event 1: bad dur -1"
printf '{"traceEvents":[%s,%s,%s]}' "$track" \
  '{"name":"x","ph":"X","ts":5,"dur":1,"pid":1,"tid":1}' \
  '{"name":"y","ph":"i","ts":4,"s":"t","pid":1,"tid":1}' >"$work/bad2.json"
run python3 "$checker" "$work/bad2.json"
expect_in "checker: ts going back" "$out" "INVALID: event 2: ts 4 < 5"
printf '{"traceEvents":[%s,%s,%s]}' "$track" \
  '{"name":"x","ph":"X","ts":0,"dur":5,"pid":1,"tid":1}' \
  '{"name":"y","ph":"X","ts":2,"dur":5,"pid":1,"tid":1}' >"$work/bad3.json"
run python3 "$checker" "$work/bad3.json"
expect_in "checker: partial overlap" "$out" "overlaps one ending at 5 partially"
printf '{"traceEvents":[{"name":"x","ph":"X","ts":0,"pid":1,"tid":1}]}' >"$work/bad4.json"
run python3 "$checker" "$work/bad4.json"
expect_in "checker: missing dur" "$out" "no 'dur'"

finish
