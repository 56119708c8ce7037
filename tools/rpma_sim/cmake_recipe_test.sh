#!/usr/bin/env bash
# The CMake / CTest recipe of docs/CI.md: a small CMake project (testdata/cmake_project) built
# with Debian's cmake against //api:librpma_pc's tree (find_package(softrpma), which finds
# librpma through the tree's pkg-config file), its tests, registered by softrpma_add_run_test
# and softrpma_add_sweep_test, run by ctest: a run, a run with a fault, a sweep, and a sweep in
# 3 shards then merged. Each writes JUnit XML as CI systems read it; the merged sweep's runs are
# the whole sweep's. Then the same from a copy of the tree elsewhere (an install prefix).
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

# build_and_test NAME PREFIX: configures, builds and runs the project's tests against PREFIX.
build_and_test() {
  local name="$1" prefix="$2" build="$work/build-$1"
  rm -rf "$build"
  # The distro's librpma.pc must not be what is found (librpma-dev may be installed).
  run env -u PKG_CONFIG_PATH cmake -S "$project" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="${sanitize[*]}" -DCMAKE_EXE_LINKER_FLAGS="${sanitize[*]}"
  echo "$out"
  echo "$err"
  expect_status "$name: cmake configures the project" 0 "$status"
  run cmake --build "$build" -j 2
  echo "$out$err" | tail -n 5
  expect_status "$name: cmake builds it" 0 "$status"
  # The program is linked against the tree's librpma, not the distro's.
  local used
  used="$(LD_LIBRARY_PATH="$prefix/lib/softrpma" ldd "$build/peer_app" | awk '/librpma\.so\.0/ {print $3}')"
  check "$name: linked against the tree's library" \
    test "$(readlink -f "$used")" = "$(readlink -f "$prefix/lib/softrpma/librpma.so.0")"
  run ctest --test-dir "$build" --output-on-failure -j 2 --timeout 300
  echo "$out"
  expect_status "$name: ctest passes" 0 "$status"
  expect_in "$name: 7 tests" "$out" "100% tests passed, 0 tests failed out of 7"
  for t in peer_app_runs peer_app_sweep peer_app_sharded_shard_1_of_3 peer_app_sharded_shard_3_of_3 \
    peer_app_sharded_merge; do
    expect_in "$name: $t ran" "$out" " $t "
  done
  for xml in peer_app_runs peer_app_reports_a_fault peer_app_sweep peer_app_sharded_shard_2_of_3 \
    peer_app_sharded; do
    check "$name: $xml.xml is JUnit" \
      python3 "$testdata/check_junit.py" "$build/softrpma-junit/$xml.xml"
    check "$name: $xml.xml is valid against the schema" \
      xmllint --noout --schema "$testdata/junit.xsd" "$build/softrpma-junit/$xml.xml"
  done
  check "$name: the run with a fault is a failing JUnit case" \
    python3 "$testdata/check_junit.py" "$build/softrpma-junit/peer_app_reports_a_fault.xml" \
    --failures=1 --failing="ibv_alloc_pd:fail=EIO:nth=1"
  same="$(python3 -c '
import json, sys
key = lambda r: [(x["point"], x["nth"], x["class"]) for x in r["runs"]]
a, b = (json.load(open(p)) for p in sys.argv[1:])
print(key(a) == key(b) and len(key(a)) > 5)
' "$build/softrpma-reports/peer_app_sweep.json" "$build/softrpma-reports/peer_app_sharded.json")"
  check "$name: the merged shards are the whole sweep" test "$same" = True
}

build_and_test bazel-bin "$tree"

# An install: the tree copied to another prefix (real files, not runfiles' symlinks).
cp -RL "$tree" "$work/prefix"
build_and_test installed "$work/prefix"

# A librpma.pc that is not softrpma's is refused, saying so.
mkdir -p "$work/fake/lib/cmake/softrpma" "$work/fake/lib/pkgconfig"
cp "$tree/lib/cmake/softrpma/softrpma-config.cmake" "$work/fake/lib/cmake/softrpma/"
grep -v '^softrpma=' "$tree/lib/pkgconfig/librpma.pc" >"$work/fake/lib/pkgconfig/librpma.pc"
run env -u PKG_CONFIG_PATH cmake -S "$project" -B "$work/build-fake" -DCMAKE_PREFIX_PATH="$work/fake"
check "a librpma.pc not softrpma's: cmake fails" test "$status" -ne 0
expect_in "a librpma.pc not softrpma's: said" "$out$err" "is not softrpma's"

finish
