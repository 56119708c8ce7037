# shellcheck shell=bash disable=SC2034  # (variables for the tests that source this)
# testlib.sh: shared by the sh_tests of tools/rpma_sim (sourced, not run).
#
# Each check is one test case: the test writes its own JUnit XML (XML_OUTPUT_FILE) with a case
# per check, so that `N passed, N failed` counts them, and ends with `finish`.

root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
rpma_sim="$root/tools/rpma_sim/rpma-sim"
testdata="$root/tools/rpma_sim/testdata"
work="${TEST_TMPDIR:-$(mktemp -d)}"

# Each case: its name, the unit separator (a byte no name or message holds; a name may hold
# "|"), then its failure message ("" when it passed).
_sep=$'\x1f'
_cases=()
_failed=0

xml_escape() {
  printf '%s' "$1" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'
}

pass() {
  echo "PASS: $1"
  _cases+=("$1$_sep")
}

fail() {  # NAME WHY
  echo "FAIL: $1: $2"
  _cases+=("$1$_sep$2")
  _failed=$((_failed + 1))
}

# check NAME CONDITION-COMMAND...: a case that passes when the command succeeds.
check() {
  local name="$1"
  shift
  if "$@"; then pass "$name"; else fail "$name" "$*"; fi
}

# contains TEXT NEEDLE: whether TEXT has NEEDLE (fixed string).
contains() { [[ "$1" == *"$2"* ]]; }

# expect_in NAME TEXT NEEDLE: a case that passes when TEXT has NEEDLE; prints TEXT otherwise.
expect_in() {
  if contains "$2" "$3"; then
    pass "$1"
  else
    fail "$1" "missing: $3"
    echo "----- in:"
    echo "$2"
    echo "-----"
  fi
}

# expect_status NAME EXPECTED ACTUAL
expect_status() {
  if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1" "exit status $3, expected $2"; fi
}

# Each program `run` starts is killed after this many seconds (three quarters of the test's
# own timeout): a hang is then a failed check that shows what the program printed, and the
# checks after it still run, rather than a test that Bazel kills with nothing to read.
run_timeout=$(( ${TEST_TIMEOUT:-300} * 3 / 4 ))

# Runs "$@", its stdout in $out, stderr in $err, exit status in $status; never fails. A program
# still running after $run_timeout seconds is killed: status 124 and a line in $err.
run() {
  out="" err="" status=0
  if [[ "$(type -t "$1")" == file ]]; then
    out="$(timeout --kill-after=5 "$run_timeout" "$@" 2>"$work/stderr")" || status=$?
  else
    out="$("$@" 2>"$work/stderr")" || status=$?
  fi
  err="$(cat "$work/stderr")"
  if [[ "$status" == 124 ]]; then
    local killed="testlib: killed after ${run_timeout} s: $*"
    err="${err:+$err$'\n'}$killed"
    echo "$killed" >&2
  fi
}

# The flags a C program compiled here needs to load our librpma.so.0 when that is built with a
# sanitizer (bazel test --config=asan / tsan): its runtime must come first.
sanitizer_flags() {
  local deps
  deps="$(ldd "$1")"
  if [[ "$deps" == *libasan* ]]; then
    echo "-fsanitize=address,undefined"
  elif [[ "$deps" == *libtsan* ]]; then
    echo "-fsanitize=thread"
  fi
}

finish() {
  if [[ -n "${XML_OUTPUT_FILE:-}" ]]; then
    local suite entry name why
    suite="$(xml_escape "${TEST_TARGET:-test}")"
    {
      echo '<?xml version="1.0" encoding="UTF-8"?>'
      echo "<testsuites><testsuite name=\"$suite\" tests=\"${#_cases[@]}\"" \
        "failures=\"$_failed\" errors=\"0\">"
      for entry in "${_cases[@]}"; do
        name="$(xml_escape "${entry%%"$_sep"*}")"
        why="${entry#*"$_sep"}"
        if [[ -z "$why" ]]; then
          echo "<testcase name=\"$name\" classname=\"$suite\"/>"
        else
          echo "<testcase name=\"$name\" classname=\"$suite\">" \
            "<failure message=\"$(xml_escape "$why")\"/></testcase>"
        fi
      done
      echo "</testsuite></testsuites>"
    } >"$XML_OUTPUT_FILE"
  fi
  echo "${#_cases[@]} checks, $_failed failed"
  ((_failed == 0))
}
