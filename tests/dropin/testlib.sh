# testlib.sh: shared by the sh_tests of tests/dropin (sourced, not run).
# shellcheck shell=bash

# skip_test REASON: ends the test as SKIPPED. Bazel has no skip status, so the test writes its
# own JUnit XML with a <skipped/> case (tools/ci/count_tests.py then counts it neither passed nor
# failed) and exits 0, printing why.
skip_test() {
  echo "SKIPPED: $1"
  if [[ -n "${XML_OUTPUT_FILE:-}" ]]; then
    cat >"$XML_OUTPUT_FILE" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="${TEST_TARGET:-test}" tests="1" failures="0" errors="0" skipped="1">
<testcase name="${TEST_TARGET:-test}" classname="${TEST_TARGET:-test}">
<skipped message="$1"/></testcase>
</testsuite></testsuites>
EOF
  fi
  exit 0
}

# require_sim: skips the test unless the simulated NIC is selected (RPMA_BACKEND unset or sim):
# the programs connect on 127.0.0.1 and inject faults with RPMA_SIM_FAULTS.
require_sim() {
  [[ -z "${RPMA_BACKEND:-}" || "${RPMA_BACKEND}" == sim ]] ||
    skip_test "needs the simulated NIC (RPMA_BACKEND=${RPMA_BACKEND})"
}

# sanitizer_flags LIB: the -fsanitize flags a program must be built with to load LIB (ours, built
# under --config=asan or --config=tsan, needs its sanitizer runtime loaded first).
sanitizer_flags() {
  local deps
  deps="$(ldd "$1")"
  if [[ "$deps" == *libasan* ]]; then
    echo "-fsanitize=address,undefined"
  elif [[ "$deps" == *libtsan* ]]; then
    echo "-fsanitize=thread"
  fi
}

# The distro's librpma-dev, or nothing: prints the directory of the distro's librpma.so.0.
distro_libdir() {
  local dev
  dev="$(cc -print-file-name=librpma.so)"  # the bare name when cc finds none
  [[ "$dev" == /* && -e "$dev" && -e "$(dirname "$dev")/librpma.so.0" ]] || return 1
  dirname "$(readlink -f "$dev")"
}
