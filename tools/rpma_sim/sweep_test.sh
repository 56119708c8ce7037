#!/usr/bin/env bash
# `rpma-sim sweep`: a program that crashes when one call fails is caught (crashed, a replay line
# that reproduces the crash, exit 1); one that hangs is killed at the timeout (hung); one that
# leaks is found with --leaks (LeakSanitizer or valgrind); what the NIC kept after a failed
# destroy call is "kept", not leaked, and a leak of the program's in the same run is still
# leaked; a bounded sweep of the demo passes
# and its JSON report lists every run; a program that never reaches the simulator is an error.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
victim="$root/tools/rpma_sim/fault_victim"
demo="$root/tools/demo"

# Fields of a JSON report, one line per run: point nth class exit signal.
report_runs() {
  python3 - "$1" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
keys = ("point", "nth", "spec", "exit", "signal", "class", "detail", "kept_objects",
        "duration_ms", "replay")
for run in report["runs"]:
    missing = [k for k in keys if k not in run]
    if missing:
        sys.exit(f"a run without {missing}: {run}")
    print(run["point"], run["nth"], run["class"], run["exit"], run["signal"], run["kept_objects"])
t = report["totals"]
print("totals", t["runs"], t["clean"], t["nonzero"], t["crashed"], t["hung"], t["leaked"],
      t["kept"])
PY
}

# --- A crash in one error path ---
run "$rpma_sim" sweep --report="$work/crash.json" -- "$victim" crash
echo "$out"
expect_status "crash: exit 1" 1 "$status"
expect_in "crash: classified" "$out" "crashed ("
expect_in "crash: replay line" "$out" \
  "  replay: $rpma_sim run --faults='ibv_alloc_pd:fail=EIO:nth=1' -- $victim crash"
expect_in "crash: verdict" "$out" "sweep FAILED:"
check "crash: table header" \
  grep -qE "^point +hits +runs +clean +nonzero +crashed +hung +leaked +kept +racy +orphaned$" <<<"$out"
if contains "$err" $'\r'; then
  fail "no progress bar when stderr is not a terminal" "a carriage return in stderr"
else
  pass "no progress bar when stderr is not a terminal"
fi
runs="$(report_runs "$work/crash.json")" || fail "crash: report" "$runs"
expect_in "crash: report has the crashed run" "$runs" "ibv_alloc_pd 1 crashed"
# The replay line reproduces the crash, by itself.
replay="$(grep -m1 -F "replay: $rpma_sim run --faults='ibv_alloc_pd" <<<"$out")"
replay="${replay#  replay: }"
run eval "$replay"
# (A signal; or, under --config=asan, the sanitizer's report: UBSan sees the NULL store first.)
if ((status > 128)) || contains "$out$err" "Sanitizer" || contains "$out$err" "runtime error:"; then
  pass "crash: the replay line crashes again"
else
  fail "crash: the replay line crashes again" "exit status $status"
fi

# --- One sweep per device: --device=mlx5,siw, a summary and a report each ---
run "$rpma_sim" sweep --device=mlx5,siw --points=ibv_alloc_pd --report="$work/dev.json" -- \
  "$victim" crash
echo "$out"
expect_status "devices: exit 1 (both crash)" 1 "$status"
expect_in "devices: mlx5's sweep" "$out" "== device mlx5 (1 of 2) =="
expect_in "devices: siw's sweep" "$out" "== device siw (2 of 2) =="
expect_in "devices: mlx5 in its summary" "$out" "device mlx5, seed"
expect_in "devices: siw in its summary" "$out" "device siw, seed"
expect_in "devices: siw's replay line" "$out" \
  "  replay: $rpma_sim run --device=siw --faults='ibv_alloc_pd:fail=EIO:nth=1' -- $victim crash"
for device in mlx5 siw; do
  got="$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["device"], len(r["runs"]), r["runs"][0]["replay"])' "$work/dev.$device.json")" ||
    got="(no report)"
  expect_in "devices: $device's report" "$got" "$device 1 $rpma_sim run --device=$device"
done
check "devices: no report under the plain name" test ! -e "$work/dev.json"

# --- A hang in one error path: only that point, short timeout ---
run "$rpma_sim" sweep --points=ibv_alloc_pd --timeout=5s --report="$work/hang.json" -- \
  "$victim" hang
echo "$out"
expect_status "hang: exit 1" 1 "$status"
expect_in "hang: classified" "$out" "hung (timed out after 5s): ibv_alloc_pd:fail=EIO:nth=1"
expect_in "hang: replay line" "$out" \
  "  replay: $rpma_sim run --faults='ibv_alloc_pd:fail=EIO:nth=1' -- $victim hang"
runs="$(report_runs "$work/hang.json")" || fail "hang: report" "$runs"
expect_in "hang: report" "$runs" "ibv_alloc_pd 1 hung None SIGKILL"
expect_in "hang: one run" "$runs" "totals 1 0 0 0 1 0 0"

# --- A leak in one error path (not under --config=tsan: no leak checker for that build) ---
victim_libs="$(ldd "$victim")"
if [[ "$victim_libs" == *libtsan* ]]; then
  run "$rpma_sim" sweep --leaks -- "$victim" leak
  expect_status "leak, ThreadSanitizer build: exit 2" 2 "$status"
  expect_in "leak, ThreadSanitizer build: why" "$err" "is built with ThreadSanitizer"
elif [[ "$victim_libs" == *libasan* ]] || command -v valgrind >/dev/null; then
  run "$rpma_sim" sweep --leaks --points=ibv_alloc_pd --timeout=120s --report="$work/leak.json" \
    -- "$victim" leak
  echo "$out"
  expect_status "leak: exit 1" 1 "$status"
  expect_in "leak: classified" "$out" "leaked ("
  if [[ "$victim_libs" == *libasan* ]]; then
    expect_in "leak: the checker is said" "$out" "leak check: LeakSanitizer"
  else
    expect_in "leak: the checker is said" "$out" "leak check: valgrind"
  fi
  runs="$(report_runs "$work/leak.json")" || fail "leak: report" "$runs"
  expect_in "leak: report" "$runs" "ibv_alloc_pd 1 leaked"
  # The same program in `report` mode frees everything: no leak.
  run "$rpma_sim" sweep --leaks --points=ibv_alloc_pd --timeout=120s -- "$victim" report
  expect_status "no leak: exit 0" 0 "$status"
  expect_in "no leak: verdict" "$out" "sweep passed: 1 runs, none crashed, hung or leaked"

  # A failed release: the NIC keeps the object (as a real provider does), reachable, so the
  # leak checker reports nothing: kept, not a failure. Each of the 3 runs fails one release
  # (two rpma_mr_dereg, one rpma_peer_delete).
  run "$rpma_sim" sweep --leaks --points=ibv_dereg_mr,ibv_dealloc_pd --timeout=120s \
    --report="$work/kept.json" -- "$victim" teardown
  echo "$out"
  expect_status "kept: exit 0" 0 "$status"
  expect_in "kept: verdict" "$out" \
    "sweep passed: 3 runs, none crashed, hung or leaked; in 3 the NIC kept what a failed"
  runs="$(report_runs "$work/kept.json")" || fail "kept: report" "$runs"
  expect_in "kept: report, a failed dereg" "$runs" "ibv_dereg_mr 1 kept 1 None 1"
  expect_in "kept: report, a failed dealloc" "$runs" "ibv_dealloc_pd 1 kept 1 None 1"
  expect_in "kept: totals" "$runs" "totals 3 0 0 0 0 0 3"
  check "kept: no replay line (not a failure)" test "$(grep -c "replay:" <<<"$out")" -eq 0
  # The program's own leak in a run where a release failed too is still a leak: on a failed
  # rpma_mr_dereg, teardown-leak forgets the peer (and the other MR).
  run "$rpma_sim" sweep --leaks --points=ibv_dereg_mr,ibv_dealloc_pd --timeout=120s \
    --report="$work/kept-leak.json" -- "$victim" teardown-leak
  echo "$out"
  expect_status "kept and leaked: exit 1" 1 "$status"
  expect_in "kept and leaked: replay line" "$out" \
    "  replay: $rpma_sim run --faults='ibv_dereg_mr:fail=EIO:nth=1' -- "
  runs="$(report_runs "$work/kept-leak.json")" || fail "kept and leaked: report" "$runs"
  # (Exit 1, valgrind's 97 or LeakSanitizer's abort; the NIC kept the MR whose dereg failed.)
  for nth in 1 2; do
    check "kept and leaked: dereg $nth" grep -qE "^ibv_dereg_mr $nth leaked [^ ]+ [^ ]+ 1$" <<<"$runs"
  done
  expect_in "kept and leaked: nothing forgotten after the dealloc" "$runs" \
    "ibv_dealloc_pd 1 kept 1 None 1"
else
  echo "SKIPPED: the leak checks (no ASan in this build and valgrind is not installed)"
fi

# --- Kept without a leak checker: the NIC's count says so, whatever the build ---
run "$rpma_sim" sweep --points=ibv_dereg_mr --report="$work/kept-no-check.json" -- \
  "$victim" teardown
expect_status "kept, no leak check: exit 0" 0 "$status"
runs="$(report_runs "$work/kept-no-check.json")" || fail "kept, no leak check: report" "$runs"
expect_in "kept, no leak check: totals" "$runs" "totals 2 0 0 0 0 0 2"

# --- A bounded sweep of the demo ---
run "$rpma_sim" sweep --max-runs=12 -j 2 --report="$work/demo.json" -- "$demo" --once
echo "$out"
expect_status "demo: exit 0" 0 "$status"
expect_in "demo: clean run" "$out" "clean run: clean (exit 0)"
expect_in "demo: bounded" "$out" "12 runs of "
expect_in "demo: verdict" "$out" "sweep passed: 12 runs"
runs="$(report_runs "$work/demo.json")" || fail "demo: report" "$runs"
check "demo: 12 runs in the report" test "$(grep -c -v '^totals' <<<"$runs")" -eq 12
if grep -qE " (crashed|hung) " <<<"$runs"; then
  fail "demo: no crash or hang in the report" "$runs"
else
  pass "demo: no crash or hang in the report"
fi
expect_in "demo: the allocation of the PD is failed" "$runs" "ibv_alloc_pd 1 nonzero 1 None"

# --- --seeds: each fault run under each seed, the seed in its replay line, report and JUnit ---
run "$rpma_sim" sweep --seed=40 --seeds=3 --points=ibv_alloc_pd --kinds=fail \
  --report="$work/seeds.json" --junit="$work/seeds.xml" -- "$demo" --once
echo "$out"
expect_status "seeds: exit 0" 0 "$status"
expect_in "seeds: the header says which" "$out" "seeds 40 to 42 (each fault run under each"
expect_in "seeds: three runs of the one hit" "$out" "sweep passed: 3 runs"
seeded="$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["seeds"], " ".join("%d:%d" % (x["nth"], x["seed"]) for x in r["runs"]))
print("\n".join(x["replay"] for x in r["runs"]))
' "$work/seeds.json")"
expect_in "seeds: the report's runs and seeds" "$seeded" "3 1:40 1:41 1:42"
expect_in "seeds: a replay line names its seed" "$seeded" "run --seed=41 --faults='ibv_alloc_pd:fail=EIO:nth=1'"
expect_in "seeds: a JUnit case per seed" "$(cat "$work/seeds.xml")" 'name="ibv_alloc_pd hit 1 seed 42"'
run "$rpma_sim" sweep --seeds=0 -- "$demo" --once
expect_status "seeds: 0 is a usage error" 2 "$status"
expect_in "seeds: 0 says the range" "$err" "--seeds needs a number from 1 to 1000"

# --- A program that fails without any fault: no sweep (every run would be "nonzero") ---
run "$rpma_sim" sweep --report="$work/fail.json" -- "$victim" fail
echo "$out"
expect_status "failing clean run: exit 1" 1 "$status"
expect_in "failing clean run: its status" "$out" "clean run: nonzero (exit 3)"
expect_in "failing clean run: the verdict" "$out" \
  "sweep FAILED: the clean run failed (exit 3) without any fault"
expect_in "failing clean run: its replay line" "$out" "  replay: $rpma_sim run -- $victim fail"
expect_in "failing clean run: its output" "$out" "    fault_victim: failing without a fault, on purpose"
if contains "$out" "sweep passed" || contains "$out" "runs of " || contains "$out" "points hit"; then
  fail "failing clean run: nothing swept" "$out"
else
  pass "failing clean run: nothing swept"
fi
check "failing clean run: the report has the clean run" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(not (r["clean_run"]["exit"] == 3 and r["clean_run"]["class"] == "nonzero" and r["runs"] == []))
' "$work/fail.json"

# --- Programs the sweep cannot work with ---
run "$rpma_sim" sweep -- /bin/true
expect_status "not a librpma program: exit 1" 1 "$status"
expect_in "not a librpma program: message" "$err" "the clean run hit no fault point"
run "$rpma_sim" sweep -- no-such-program-xyz
expect_status "missing program: exit 2" 2 "$status"
expect_in "missing program: message" "$err" "rpma-sim: cannot run no-such-program-xyz"

finish
