#!/usr/bin/env bash
# `--junit=FILE` on `run` and `sweep`: JUnit XML as CI systems read it (checked by
# testdata/check_junit.py, the structure and counts, and by xmllint against testdata/junit.xsd):
# a test case per run named after its point and hit, a failure whose text is the outcome and the
# replay line, and text that XML cannot hold (a program's stray bytes and escape sequences,
# markup characters in its name) escaped or replaced so that the file stays valid UTF-8 XML.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
victim="$root/tools/rpma_sim/fault_victim"
unset TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE

valid() {  # NAME FILE CHECK_JUNIT_OPTIONS...
  local name="$1" file="$2"
  shift 2
  check "$name: structure and counts" python3 "$testdata/check_junit.py" "$file" "$@"
  check "$name: valid against the JUnit schema" \
    xmllint --noout --schema "$testdata/junit.xsd" "$file"
}

# A program whose name has markup in it and whose output has bytes XML cannot carry.
weird="$work/vic<tim> & \"co\" é.sh"
cat >"$weird" <<SH
#!/usr/bin/env bash
printf 'stray byte \xff, escape \x1b[K, NUL-free markup <b>&amp;</b> ]]>\n'
exec "$victim" "\$@"
SH
chmod +x "$weird"

# --- sweep: one failing run among passing ones ---
run "$rpma_sim" sweep --points=ibv_alloc_pd,rdma_create_id --junit="$work/sweep.xml" \
  --report="$work/sweep.json" -- "$weird" crash
echo "$out"
expect_status "sweep: exit 1 (a run crashed)" 1 "$status"
expect_in "sweep: says where the JUnit went" "$out" "junit: $work/sweep.xml"
runs="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"]))' \
  "$work/sweep.json")" || runs=0
valid "sweep" "$work/sweep.xml" --cases=$((runs + 1)) --failures=1 \
  --failing="ibv_alloc_pd hit 1" --text="replay: $rpma_sim run --faults='ibv_alloc_pd:fail=EIO:nth=1' -- " \
  --text="stray byte"
check "sweep: names the cases after point and hit" grep -q 'name="rdma_create_id hit 1"' "$work/sweep.xml"
check "sweep: the clean run is a case" grep -q 'name="clean run"' "$work/sweep.xml"
check "sweep: the failure says the outcome" \
  grep -qE '<failure message="crashed \((SIGSEGV|[A-Za-z]+Sanitizer[^"]*)\)" type="crashed">' \
  "$work/sweep.xml"
check "sweep: the program's name is escaped" grep -qF 'vic&lt;tim&gt; &amp; &quot;co&quot; é.sh' \
  "$work/sweep.xml"
check "sweep: a stray byte is U+FFFD" grep -qF $'stray byte \xef\xbf\xbd, escape \xef\xbf\xbd[K' \
  "$work/sweep.xml"

# --- sweep: all passing, several devices: a file per device ---
run "$rpma_sim" sweep --device=mlx5,siw --points=ibv_alloc_pd --junit="$work/dev.xml" -- \
  "$victim" report
expect_status "devices: exit 0" 0 "$status"
for device in mlx5 siw; do
  valid "devices: $device" "$work/dev.$device.xml" --cases=2 --failures=0
  check "devices: $device in the classname" \
    grep -q "classname=\"rpma-sim.sweep.$device.fault_victim\"" "$work/dev.$device.xml"
done

# --- sweep: the clean run fails: one failing case, no sweep ---
run "$rpma_sim" sweep --junit="$work/clean-fails.xml" -- "$victim" fail
expect_status "failing clean run: exit 1" 1 "$status"
valid "failing clean run" "$work/clean-fails.xml" --cases=1 --failures=1 --failing="clean run" \
  --text="replay: $rpma_sim run -- $victim fail"

# --- sweep: stopped after the clean run: still a JUnit file, its one case failing ---
run "$rpma_sim" sweep --junit="$work/no-points.xml" -- /bin/true
expect_status "no fault point: exit 1" 1 "$status"
valid "no fault point" "$work/no-points.xml" --cases=1 --failures=1 --failing="clean run"
check "no fault point: the failure says why" \
  grep -qF 'message="clean (exit 0; the clean run hit no fault point: no sweep)"' "$work/no-points.xml"

# --- run ---
run "$rpma_sim" run --faults='ibv_alloc_pd:fail=EIO:nth=1' --junit="$work/run-fail.xml" -- \
  "$weird" report
expect_status "run, failing: PROGRAM's exit status" 1 "$status"
expect_in "run, failing: PROGRAM's output is still shown" "$out$err" "stray byte"
valid "run, failing" "$work/run-fail.xml" --cases=1 --failures=1 \
  --failing="ibv_alloc_pd:fail=EIO:nth=1" \
  --text="replay: $rpma_sim run --faults='ibv_alloc_pd:fail=EIO:nth=1' -- "
check "run, failing: the outcome" grep -qF '<failure message="nonzero (exit 1)" type="nonzero">' \
  "$work/run-fail.xml"
run "$rpma_sim" run --junit="$work/run-pass.xml" -- "$victim" report
expect_status "run, passing: exit 0" 0 "$status"
valid "run, passing" "$work/run-pass.xml" --cases=1 --failures=0
check "run, passing: named for the run" grep -q 'name="run without a fault"' "$work/run-pass.xml"
run "$rpma_sim" run --junit="$work/no-such-dir/x.xml" -- "$victim" report
expect_status "run, unwritable JUnit file: exit 1" 1 "$status"
expect_in "run, unwritable JUnit file: said" "$err" "cannot write the junit file $work/no-such-dir/x.xml"

# The checker itself catches what CI systems would reject.
printf '<testsuites name="x" tests="2" failures="0" errors="0" time="0"><testsuite name="s" tests="1" failures="0" errors="0" time="0"><testcase name="a" classname="c" time="0"/></testsuite></testsuites>' >"$work/bad-count.xml"
run python3 "$testdata/check_junit.py" "$work/bad-count.xml"
expect_status "checker: a wrong count is caught" 1 "$status"
printf '<testsuites name="x" tests="0" failures="0" errors="0" time="0">\xff</testsuites>' >"$work/bad-utf8.xml"
run python3 "$testdata/check_junit.py" "$work/bad-utf8.xml"
expect_status "checker: bad UTF-8 is caught" 1 "$status"

finish
