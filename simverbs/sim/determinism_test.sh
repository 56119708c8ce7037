#!/bin/bash
# The simulator is deterministic: the same single-threaded program with the same seed writes
# the same trace, byte for byte; another seed interleaves the completions of QPs sharing a CQ
# differently. Also: the trace's header and end line, RPMA_SIM_STATS, RPMA_SIM_SCENARIO, and
# the start-up errors of malformed RPMA_SIM_SEED / RPMA_SIM_SCENARIO (docs/TRACE.md).
# Usage: determinism_test.sh <sim_trace_program>
set -u
program="$1"
dir="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

run() {  # run <name> <env...>: runs the program with the environment, output in $dir/<name>.*
  local name="$1"; shift
  env -u RPMA_SIM_SEED -u RPMA_SIM_FAULTS -u RPMA_SIM_SCENARIO -u RPMA_SIM_STATS \
    RPMA_SIM_TRACE="$dir/$name.trace" "$@" "$program" >"$dir/$name.out" 2>"$dir/$name.err"
  echo $? >"$dir/$name.rc"
}

run a RPMA_SIM_SEED=1
run b RPMA_SIM_SEED=1
run c RPMA_SIM_SEED=0x2
[[ "$(cat "$dir/a.rc") $(cat "$dir/b.rc") $(cat "$dir/c.rc")" == "0 0 0" ]] ||
  fail "the program failed: $(cat "$dir/a.err" "$dir/c.err")"

# Same seed: the same trace, byte for byte, and the same output.
cmp "$dir/a.trace" "$dir/b.trace" || fail "same seed, different traces"
cmp "$dir/a.out" "$dir/b.out" || fail "same seed, different completion orders"
# Another seed: another interleaving.
cmp -s "$dir/a.out" "$dir/c.out" && fail "seeds 1 and 2 gave the same interleaving"
grep -q '^round 0:' "$dir/a.out" || fail "no completion order printed"

# Header and end line.
[[ "$(sed -n 1p "$dir/a.trace")" == "softrpma-sim-trace 2" ]] || fail "header line 1"
[[ "$(sed -n 2p "$dir/a.trace")" == "seed 0x0000000000000001" ]] || fail "header seed"
[[ "$(sed -n 2p "$dir/c.trace")" == "seed 0x0000000000000002" ]] || fail "header seed (hex)"
[[ "$(sed -n 3p "$dir/a.trace")" == "faults -" ]] || fail "header faults"
[[ "$(sed -n 4p "$dir/a.trace")" == "process sim_trace_program" ]] || fail "header process"
last="$(tail -n 1 "$dir/a.trace")"
[[ "$last" =~ ^end\ events=([0-9]+)\ fingerprint=0x[0-9a-f]{16}$ ]] || fail "end line: $last"
events=$(($(wc -l <"$dir/a.trace") - 5))
[[ "$last" == "end events=$events "* ]] || fail "end line counts $events events: $last"
awk 'NR > 4 && !/^end / { if ($1 != NR - 4) { print "bad seq on line " NR; exit 1 } }' \
  "$dir/a.trace" || fail "sequence numbers"
grep -q ' wc cq=1 qp=17 wr_id=0x64 status=IBV_WC_SUCCESS opcode=IBV_WC_RDMA_WRITE byte_len=0$' \
  "$dir/a.trace" || fail "no wc line for wr_id 100 on qp 17"
[[ "$(tail -n 1 "$dir/a.trace" | cut -d' ' -f3)" != "$(tail -n 1 "$dir/c.trace" | cut -d' ' -f3)" ]] ||
  fail "seeds 1 and 2 have the same fingerprint"

# Stats: every point, 0s included; hits counted without a plan.
run s RPMA_SIM_SEED=1 RPMA_SIM_STATS="$dir/s.stats"
[[ "$(cat "$dir/s.rc")" == 0 ]] || fail "stats run: $(cat "$dir/s.err")"
[[ "$(grep -vc '^#' "$dir/s.stats")" -eq 48 ]] || fail "stats: $(grep -vc '^#' "$dir/s.stats") point lines, want 48"
grep -Eq '^# process sim_trace_program pid [0-9]+$' "$dir/s.stats" || fail "stats: no process line: $(head -1 "$dir/s.stats")"
grep -qx 'ibv_post_send 27' "$dir/s.stats" || fail "stats: ibv_post_send: $(grep post_send "$dir/s.stats")"
grep -qx 'ibv_alloc_pd 6' "$dir/s.stats" || fail "stats: ibv_alloc_pd"
grep -qx 'ibv_advise_mr 0' "$dir/s.stats" || fail "stats: zero lines"
grep -Eq '^malloc [1-9][0-9]*$' "$dir/s.stats" || fail "stats: malloc counted"
cmp "$dir/a.trace" "$dir/s.trace" || fail "counting hits changed the trace"

# A scenario: its seed and rules; the delay fault reorders (never within one QP).
cat >"$dir/scenario.txt" <<'SCENARIO'
# hold back the first write of connection 1
seed 0x1   # the same seed as run a
ibv_post_send : delay=100000 : nth=1
SCENARIO
run d RPMA_SIM_SCENARIO="$dir/scenario.txt"
[[ "$(cat "$dir/d.rc")" == 0 ]] || fail "scenario run: $(cat "$dir/d.err")"
[[ "$(sed -n 2p "$dir/d.trace")" == "seed 0x0000000000000001" ]] || fail "scenario seed"
[[ "$(sed -n 3p "$dir/d.trace")" == "faults ibv_post_send:delay=100000:nth=1" ]] ||
  fail "scenario faults: $(sed -n 3p "$dir/d.trace")"
grep -q ' fault point=ibv_post_send action=delay=100000 hit=1 qp=17$' "$dir/d.trace" ||
  fail "no fault line"
[[ "$(sed -n 1p "$dir/d.out")" =~ " 100 101"$ ]] ||
  fail "delayed WR 100 (and 101 behind it, same QP) not last: $(sed -n 1p "$dir/d.out")"
grep -q 'fault injected: ibv_post_send:delay=100000 (hit 1)' "$dir/d.err" || fail "no log line"

# Start-up errors.
run e RPMA_SIM_SEED=12x
[[ "$(cat "$dir/e.rc")" == 2 ]] || fail "bad seed: exit $(cat "$dir/e.rc")"
grep -qx 'RPMA_SIM_SEED: bad seed "12x": expected a decimal or 0x-hex 64-bit number' \
  "$dir/e.err" || fail "bad seed message: $(cat "$dir/e.err")"
printf 'ibv_post_send:fail=EIO\n\n  rdma_connect:explode\n' >"$dir/bad.txt"
run f RPMA_SIM_SCENARIO="$dir/bad.txt"
[[ "$(cat "$dir/f.rc")" == 2 ]] || fail "bad scenario: exit $(cat "$dir/f.rc")"
grep -q "^RPMA_SIM_SCENARIO: $dir/bad.txt:3:16: unknown action \"explode\"" "$dir/f.err" ||
  fail "bad scenario message: $(cat "$dir/f.err")"
run g RPMA_SIM_SCENARIO="$dir/missing.txt"
grep -qx "RPMA_SIM_SCENARIO: $dir/missing.txt: cannot read scenario file: No such file or directory" \
  "$dir/g.err" || fail "missing scenario message: $(cat "$dir/g.err")"
run i RPMA_SIM_SCENARIO=/dev/zero
[[ "$(cat "$dir/i.rc")" == 2 ]] || fail "endless scenario: exit $(cat "$dir/i.rc")"
grep -qx "RPMA_SIM_SCENARIO: /dev/zero: cannot read scenario file: it is larger than 16 MiB, the most softrpma reads as one" \
  "$dir/i.err" || fail "endless scenario message: $(cat "$dir/i.err")"
env RPMA_SIM_TRACE="$dir/no/such/dir/t" "$program" >/dev/null 2>"$dir/h.err"
grep -q '^RPMA_SIM_TRACE: cannot open ' "$dir/h.err" || fail "bad trace path: $(cat "$dir/h.err")"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed; files in $dir"
  exit 1
fi
echo "PASSED"
