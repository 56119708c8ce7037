#!/usr/bin/env bash
# `rpma-sim sweep --kinds`: a client that mishandles an error completion (testdata/wc_victim.c:
# it dereferences NULL when its write completes with an error status) passes a sweep of failed
# calls (--kinds=fail) but is found by the wc kind, and by the default sweep (every kind): the
# sweep fails, names the status, and the replay line crashes again; the report and JUnit name
# the kind; an unknown kind is a usage error naming the valid ones.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
victim="$root/tools/rpma_sim/wc_victim"
# How the victim's NULL dereference ends it: SIGSEGV; under --config=asan, the
# UndefinedBehaviorSanitizer stops it first, and the simulator's end record takes its report.
if [[ "$(sanitizer_flags "$victim")" == *address* ]]; then
  segv="UndefinedBehaviorSanitizer: runtime error: member access within null pointer"
  segv+=" of type 'struct result'"
else
  segv="SIGSEGV"
fi

# --- fail only: every failed call is reported, the sweep passes ---
run "$rpma_sim" sweep --kinds=fail --timeout=30s -- "$victim"
echo "$out" | grep -v 'fault injected'
expect_status "fail: the sweep passes" 0 "$status"
expect_in "fail: verdict" "$out" "sweep passed:"
check "fail: no wc_status run" test "$(grep -c 'wc_status=' <<<"$out")" = 0

# --- wc: the write completes with an error status, the client crashes ---
run "$rpma_sim" sweep --kinds=wc --timeout=30s --report="$work/wc.json" --junit="$work/wc.xml" \
  -- "$victim"
echo "$out" | grep -v 'fault injected'
expect_status "wc: the sweep fails" 1 "$status"
expect_in "wc: the run names the status" "$out" \
  "crashed ($segv): ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR:nth=1"
expect_in "wc: its replay line" "$out" \
  "  replay: $rpma_sim run --faults='ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR:nth=1' -- $victim"
expect_in "wc: every status of a post on mlx5" "$out" "ibv_post_send:wc_status=IBV_WC_RNR_RETRY_EXC_ERR:nth=1"
check "wc: the table names the kind" grep -qE '^ibv_post_send \[wc\] +1 +5 +0 +0 +5 ' <<<"$out"
expect_in "wc: the points without a wc fault are said" "$out" \
  "--kinds=wc: "
got="$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["kinds"], len(r["runs"]), sorted({(x["kind"], x["class"]) for x in r["runs"]}))
print(r["runs"][0]["action"], r["runs"][0]["spec"])' "$work/wc.json")" || got="(no report)"
expect_in "wc: the report names the kind" "$got" "['wc'] 5 [('wc', 'crashed')]"
expect_in "wc: the report names the effect" "$got" \
  "wc_status=IBV_WC_REM_ACCESS_ERR ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR:nth=1"
expect_in "wc: JUnit names the kind" "$(cat "$work/wc.xml" 2>/dev/null)" \
  'testcase name="ibv_post_send hit 1 (wc: wc_status=IBV_WC_REM_ACCESS_ERR)"'

# The replay line injects exactly that effect and crashes again, by itself.
replay="$(grep -m1 -F "replay: $rpma_sim run --faults='ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR" <<<"$out")"
replay="${replay#  replay: }"
run eval "$replay"
expect_in "wc: the replay injects that status" "$err" \
  "softrpma-sim: fault injected: ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR (hit 1)"
if ((status > 128)) || contains "$out$err" "Sanitizer" || contains "$out$err" "runtime error:"; then
  pass "wc: the replay line crashes again"
else
  fail "wc: the replay line crashes again" "exit status $status"
fi

# --- --keep-traces: the traces of each failing run are kept, the others removed ---
kept="$work/kept"
run "$rpma_sim" sweep --kinds=wc --timeout=30s --keep-traces="$kept" --report="$work/kept.json" \
  --junit="$work/kept.xml" -- "$victim"
expect_status "keep-traces: the sweep fails" 1 "$status"
check "keep-traces: a directory per failing run, none for the clean one" \
  test "$(find "$kept" -mindepth 1 -maxdepth 1 -name 'run-*' | wc -l)" = 5
check "keep-traces: not the clean run's" test ! -e "$kept/run-0"
first="$(find "$kept" -name 'wc_victim.*.trace' | sort | head -1)"
check "keep-traces: each process's trace named by its role" test -n "$first"
expect_in "keep-traces: named under the replay line" "$out" "  traces: $kept/run-"
got="$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(sum(1 for x in r["runs"] if x.get("traces")), "clean" if "traces" in r["clean_run"] else "-")
print(r["runs"][0]["traces"][0])' "$work/kept.json")" || got="(no report)"
expect_in "keep-traces: the report names them" "$got" "5 -"
check "keep-traces: the report's file exists" test -s "$(sed -n 2p <<<"$got")"
expect_in "keep-traces: JUnit names them" "$(cat "$work/kept.xml" 2>/dev/null)" "traces kept: $kept/run-"
if [[ -n "$first" ]]; then
  expect_in "keep-traces: the trace has the fault and the librpma call it failed" \
    "$(cat "$first")" "fault point=ibv_post_send action=wc_status="
  expect_in "keep-traces: ... with the librpma calls" "$(cat "$first")" "api_call thread=1 fn=rpma_write"
fi
check "keep-traces: one trace in each (the victim is one process)" \
  test "$(find "$kept" -name '*.trace' | wc -l)" = 5
# A directory that holds something already (another sweep's runs) is refused before any run.
run "$rpma_sim" sweep --kinds=wc --keep-traces="$kept" -- "$victim"
expect_status "keep-traces: a non-empty directory is a usage error" 2 "$status"
expect_in "keep-traces: ... that says so" "$err" "--keep-traces: \"$kept\" is not empty"
touch "$work/a-file"
run "$rpma_sim" sweep --kinds=wc --keep-traces="$work/a-file" -- "$victim"
expect_status "keep-traces: a file is a usage error" 2 "$status"
expect_in "keep-traces: ... that says so" "$err" "is not a directory"
# A sweep that passes keeps nothing.
run "$rpma_sim" sweep --kinds=fail --timeout=30s --keep-traces="$work/kept-pass" -- "$victim"
expect_status "keep-traces: a passing sweep" 0 "$status"
check "keep-traces: ... keeps no trace" test -z "$(ls -A "$work/kept-pass")"

# --- siw: iWARP has no RNR retries ---
run "$rpma_sim" sweep --device=siw --kinds=wc --timeout=30s -- "$victim"
expect_status "wc on siw: the sweep fails" 1 "$status"
check "wc on siw: four statuses, no RNR" test "$(grep -c '^crashed' <<<"$out")" = 4
check "wc on siw: no RNR retry error" test "$(grep -c 'RNR_RETRY' <<<"$out")" = 0

# --- bad input ---
run "$rpma_sim" sweep --kinds=fail,wcs -- "$victim"
expect_status "an unknown kind: usage error" 2 "$status"
expect_in "an unknown kind: named, with the valid ones" "$err" \
  'rpma-sim: --kinds: unknown fault kind "wcs"; the kinds are fail, wc, conn, kill'
run "$rpma_sim" sweep --kinds=wc,wc -- "$victim"
expect_status "a kind twice: usage error" 2 "$status"
run "$rpma_sim" sweep --kinds= -- "$victim"
expect_status "no kind: usage error" 2 "$status"

finish
