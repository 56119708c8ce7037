#!/usr/bin/env bash
# The CMake / CTest recipe of docs/CI.md: a small CMake project (testdata/cmake_project) built
# with Debian's cmake against //api:librpma_pc's tree (find_package(softrpma), which finds
# librpma through the tree's pkg-config file), its tests registered by softrpma_add_run_test,
# softrpma_add_sweep_test and softrpma_add_pair_test and run by ctest -j4, three times in a row:
# a run, a run whose fault the program must report (EXPECT_FAILURE), two listeners on one port
# side by side (each test has a fabric of its own; on one fabric they collide, which a build
# with SHARED_FABRIC shows), a sweep, a sweep in 3 shards tied by fixtures (ctest -R of the merge
# runs the plan and every shard, of a shard the plan and that shard) and a server / client pair.
# Each writes JUnit XML as CI systems read it, agreeing with ctest. The tests that must fail
# (FAILING_TESTS): a pair whose client fails (the server, deaf to SIGTERM, is killed; no process
# is left), a pair that hangs, an expected failure that does not come, WILL_FAIL (a warning), a
# sharded sweep that finds a crash. Then find_package's version rule (find_version/), upstream's
# package name (upstream_names/), the tree copied elsewhere (an install prefix), and a
# librpma.pc that is not softrpma's.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
unset TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE
tree="$root/api/librpma"
project="$testdata/cmake_project"
if ! command -v cmake >/dev/null || ! command -v ctest >/dev/null; then
  fail "cmake is installed" "no cmake/ctest: tools/ci/install_deps.sh installs Debian's cmake"
  finish
  exit 1
fi
read -r -a sanitize <<<"$(sanitizer_flags "$tree/lib/softrpma/librpma.so.0")"
the_tests=(peer_app_runs peer_app_reports_a_fault listener_a listener_b peer_app_sweep
  peer_app_sharded_plan peer_app_sharded_shard_1_of_3 peer_app_sharded_shard_2_of_3
  peer_app_sharded_shard_3_of_3 peer_app_sharded_merge pair_app_pair)

# configure NAME PREFIX SOURCE BUILD [CMAKE_ARGS...]: configures and builds a project against
# PREFIX (two checks); cmake's output in $out / $err.
configure() {
  local name="$1" prefix="$2" source="$3" build="$4"
  shift 4
  rm -rf "$build"
  # The distro's librpma.pc must not be what is found (librpma-dev may be installed).
  run env -u PKG_CONFIG_PATH cmake -S "$source" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="${sanitize[*]}" -DCMAKE_EXE_LINKER_FLAGS="${sanitize[*]}" "$@"
  local configured="$out$err" configure_status=$status
  expect_status "$name: cmake configures the project" 0 "$configure_status"
  ((configure_status == 0)) || echo "$configured"
  run cmake --build "$build" -j 2
  ((status == 0)) || echo "$out$err" | tail -n 20
  expect_status "$name: cmake builds it" 0 "$status"
  out="$configured"
}

# junit NAME FILE CHECK_JUNIT_OPTIONS...: FILE is JUnit as CI systems read it (two checks).
junit() {
  local name="$1" file="$2"
  shift 2
  check "$name: JUnit" python3 "$testdata/check_junit.py" "$file" "$@"
  check "$name: valid against the JUnit schema" \
    xmllint --noout --schema "$testdata/junit.xsd" "$file"
}

# no_process_left NAME BUILD: no program of BUILD still runs.
no_process_left() {
  local left
  left="$(pgrep -af "$2/(pair|peer)_app" || true)"
  check "$1: no process of it is left" test -z "$left"
  [[ -z "$left" ]] || echo "left: $left"
}

# ---- The project against the tree Bazel made ----------------------------------------------
build="$work/build"
configure bazel-bin "$tree" "$project" "$build"
used="$(LD_LIBRARY_PATH="$tree/lib/softrpma" ldd "$build/peer_app" |
  awk '/librpma\.so\.0/ {print $3}')"
check "bazel-bin: linked against the tree's library" \
  test "$(readlink -f "$used")" = "$(readlink -f "$tree/lib/softrpma/librpma.so.0")"

# Every test on a fabric of its own, a name RPMA_SIM_FABRIC accepts.
run ctest --test-dir "$build" --show-only=json-v1
fabrics="$(python3 -c '
import json, re, sys
tests = json.loads(sys.stdin.read())["tests"]
fabrics = {}
for t in tests:
    env = [p["value"] for p in t.get("properties", []) if p["name"] == "ENVIRONMENT"]
    fabrics[t["name"]] = [v.split("=", 1)[1] for v in sum(env, [])
                          if v.startswith("RPMA_SIM_FABRIC=")]
good = all(len(f) == 1 and re.fullmatch(r"[A-Za-z0-9._-]{1,40}", f[0]) for f in fabrics.values())
distinct = len({f[0] for f in fabrics.values() if f}) == len(fabrics)
print(len(fabrics), "tests", "good" if good else "BAD", "distinct" if distinct else "SHARED")
print("\n".join(f"{n}: {f}" for n, f in sorted(fabrics.items())))
' <<<"$out")"
echo "$fabrics"
expect_in "each test has its own fabric, a valid name" "$fabrics" "11 tests good distinct"

for round in 1 2 3; do
  run ctest --test-dir "$build" --output-on-failure -j 4 --timeout 300
  ((round == 1 || status != 0)) && echo "$out"
  expect_status "ctest -j4, round $round: passes" 0 "$status"
  expect_in "ctest -j4, round $round: 11 tests" "$out" "100% tests passed, 0 tests failed out of 11"
done
for t in "${the_tests[@]}"; do
  expect_in "$t ran" "$out" " $t "
done
for t in peer_app_runs listener_a pair_app_pair peer_app_sweep peer_app_sharded_plan \
  peer_app_sharded_shard_2_of_3; do
  junit "$t" "$build/softrpma-junit/$t.xml" --failures=0
done
fault="ibv_alloc_pd:fail=EIO:nth=1; ibv_dealloc_pd:fail=EIO:nth=1"
junit "EXPECT_FAILURE: the expected failure is a passing case" \
  "$build/softrpma-junit/peer_app_reports_a_fault.xml" --cases=1 --failures=0
expect_in "EXPECT_FAILURE: the case is the fault spec, both rules (';' through CMake)" \
  "$(cat "$build/softrpma-junit/peer_app_reports_a_fault.xml")" "name=\"$fault, expected to fail\""
junit "the merge's whole-sweep JUnit" "$build/softrpma-reports/peer_app_sharded.xml" --failures=0
same="$(python3 -c '
import glob, json, sys
import xml.etree.ElementTree as ET
key = lambda r: [(x["point"], x["nth"], x["class"]) for x in r["runs"]]
a, b = (json.load(open(p)) for p in sys.argv[1:3])
cases = [c.get("name") for f in glob.glob(sys.argv[3] + "/peer_app_sharded_*.xml")
         for c in ET.parse(f).iter("testcase") if c.get("name") != "clean run"]
print(key(a) == key(b) and len(key(a)) > 5, len(cases) == len(key(b)))
' "$build/softrpma-reports/peer_app_sweep.json" "$build/softrpma-reports/peer_app_sharded.json" \
  "$build/softrpma-junit")"
check "the merged shards are the whole sweep" test "${same% *}" = True
check "softrpma-junit/ holds each run of the sharded sweep once" test "${same#* }" = True

# The control: with both listeners on one fabric, the second one's listen fails.
configure shared "$tree" "$project" "$work/build-shared" -DSHARED_FABRIC=ON
run ctest --test-dir "$work/build-shared" --output-on-failure -j 2 -R '^listener_'
echo "$out"
check "one fabric: the listeners collide (ctest fails)" test "$status" -ne 0
expect_in "one fabric: the listeners collide (said)" "$out" "cannot listen on 127.0.0.1:7300"

# Fixtures: the merge alone runs the plan and the shards; a shard alone, the plan and it.
fixtures="$work/build-fixtures"
configure fixtures "$tree" "$project" "$fixtures"
run ctest --test-dir "$fixtures" --output-on-failure -R '^peer_app_sharded_merge$'
echo "$out"
expect_status "ctest -R merge (a fresh build): passes" 0 "$status"
expect_in "ctest -R merge: 5 tests" "$out" "100% tests passed, 0 tests failed out of 5"
for t in peer_app_sharded_plan peer_app_sharded_shard_1_of_3 peer_app_sharded_shard_2_of_3 \
  peer_app_sharded_shard_3_of_3 peer_app_sharded_merge; do
  expect_in "ctest -R merge: $t ran" "$out" " $t "
done
rm -f "$fixtures"/softrpma-reports/*
run ctest --test-dir "$fixtures" --output-on-failure -R '^peer_app_sharded_shard_2_of_3$'
echo "$out"
expect_status "ctest -R shard_2_of_3: passes" 0 "$status"
expect_in "ctest -R shard_2_of_3: the plan and the shard" "$out" \
  "100% tests passed, 0 tests failed out of 2"
expect_in "ctest -R shard_2_of_3: the plan ran" "$out" " peer_app_sharded_plan "
check "ctest -R shard_2_of_3: shard 1 did not run" \
  test ! -e "$fixtures/softrpma-reports/peer_app_sharded_shard_1_of_3.json"
# The shards' fixture left out: the merge finds a shard's report missing and is not run.
run ctest --test-dir "$fixtures" -R '^peer_app_sharded_merge$' -FS peer_app_sharded_shards
echo "$out$err"
check "a shard's report missing: the merge fails" test "$status" -ne 0
expect_in "a shard's report missing: said, naming it" "$out$err" \
  "Unable to find required file: $fixtures/softrpma-reports/peer_app_sharded_shard_1_of_3.json"

# ---- The tests that must fail -------------------------------------------------------------
failing="$work/build-failing"
configure failing "$tree" "$project" "$failing" -DFAILING_TESTS=ON
expect_in "WILL_FAIL: configuring warns that the JUnit case disagrees" "$out" \
  "test failing_will_fail has WILL_FAIL"
run ctest --test-dir "$failing" --output-on-failure -j 4 -R '^failing_'
echo "$out"
check "the failing tests: ctest fails" test "$status" -ne 0
expect_in "a pair whose client fails: ctest fails it" "$out" "- failing_pair_client (Failed)"
expect_in "a pair whose client fails: the client named" "$out" \
  "softrpma-pair: FAILED: the client failed (exit 1); the server was stopped"
expect_in "a pair whose client fails: the server, deaf to SIGTERM, killed" "$out" \
  "softrpma-pair: the server was still running 3 s after SIGTERM: SIGKILL"
junit "a pair whose client fails" "$failing/softrpma-junit/failing_pair_client.xml" --failures=1
expect_in "a pair that hangs: ctest fails it" "$out" "- failing_pair_hangs (Failed)"
expect_in "a pair that hangs: said" "$out" "softrpma-pair: FAILED: timed out after 3 s: the server"
no_process_left "the failing pairs" "$failing"
expect_in "EXPECT_FAILURE, the program exits 0: ctest fails it" "$out" \
  "- failing_expected_failure (Failed)"
junit "EXPECT_FAILURE, the program exits 0: a failing case" \
  "$failing/softrpma-junit/failing_expected_failure.xml" --failures=1
check "WILL_FAIL: ctest passes it ..." grep -qE 'failing_will_fail \.+ +Passed' <<<"$out"
junit "WILL_FAIL: ... while its JUnit case fails (what the warning says)" \
  "$failing/softrpma-junit/failing_will_fail.xml" --failures=1
crashed_shard="$(grep -oE 'failing_sharded_shard_[0-9]_of_3 \(Failed\)' <<<"$out" | head -n 1)"
check "a crash in a shard: ctest fails the shard" test -n "$crashed_shard"
check "a crash in a shard: its JUnit says so" grep -q 'type="crashed"' \
  "$failing/softrpma-junit/${crashed_shard% *}.xml"
expect_in "a crash in a shard: the merge does not pass" "$out" "- failing_sharded_merge (Not Run)"

# ---- find_package ---------------------------------------------------------------------------
# The version rule: the same major version, at least the one asked for (1.3.0 is softrpma's).
for ask in "softrpma 1.3 accepted" "softrpma 1.0 accepted" "softrpma 1.3 accepted EXACT" \
  "softrpma 1.4 refused" "softrpma 2.0 refused" "softrpma 1.2 refused EXACT" \
  "librpma 1.3 accepted" "librpma 2.0 refused"; do
  read -r package version verdict exact <<<"$ask"
  run env -u PKG_CONFIG_PATH cmake -S "$project/find_version" -B "$work/find-version" \
    -DCMAKE_PREFIX_PATH="$tree" -DPACKAGE="$package" -DVERSION="$version" \
    -DEXACT="${exact:+ON}"
  rm -rf "$work/find-version"
  if [[ "$verdict" == accepted ]]; then
    expect_status "find_package($package $version${exact:+ EXACT}) is accepted" 0 "$status"
    expect_in "find_package($package $version${exact:+ EXACT}): 1.3.0 found" "$out" \
      "found $package 1.3.0"
  else
    check "find_package($package $version${exact:+ EXACT}) is refused" test "$status" -ne 0
    expect_in "find_package($package $version${exact:+ EXACT}): the version found said" "$err" \
      "$package-config.cmake, version: 1.3.0"
  fi
done

# Upstream's package name and variables build and link a librpma program that runs.
configure upstream-names "$tree" "$project/upstream_names" "$work/build-upstream"
run "$tree/bin/rpma-sim" run -- "$work/build-upstream/peer_app"
expect_status "find_package(librpma): the program runs on the simulated NIC" 0 "$status"
expect_in "find_package(librpma): the program's work done" "$out" "peer_app: ok"

# ---- An install: the tree copied to another prefix (real files, not runfiles' symlinks) ----
cp -RL "$tree" "$work/prefix"
configure installed "$work/prefix" "$project" "$work/build-installed"
run ctest --test-dir "$work/build-installed" --output-on-failure -j 4 --timeout 300
echo "$out"
expect_status "installed: ctest -j4 passes" 0 "$status"
expect_in "installed: 11 tests" "$out" "100% tests passed, 0 tests failed out of 11"
check "installed: the pair test runs the prefix's softrpma-pair.sh" \
  grep -q "$work/prefix/lib/cmake/softrpma/softrpma-pair.sh" \
  "$work/build-installed/CTestTestfile.cmake"

# A librpma.pc that is not softrpma's is refused, saying so.
mkdir -p "$work/fake/lib/cmake/softrpma" "$work/fake/lib/pkgconfig"
cp "$tree/lib/cmake/softrpma/softrpma-config.cmake" "$work/fake/lib/cmake/softrpma/"
grep -v '^softrpma=' "$tree/lib/pkgconfig/librpma.pc" >"$work/fake/lib/pkgconfig/librpma.pc"
run env -u PKG_CONFIG_PATH cmake -S "$project" -B "$work/build-fake" -DCMAKE_PREFIX_PATH="$work/fake"
check "a librpma.pc not softrpma's: cmake fails" test "$status" -ne 0
expect_in "a librpma.pc not softrpma's: said" "$out$err" "is not softrpma's"

finish
