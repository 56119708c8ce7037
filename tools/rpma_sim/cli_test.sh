#!/usr/bin/env bash
# rpma-sim's command line: --help and per-subcommand help, every kind of argument error (exit 2,
# with a message saying what to do), a malformed fault spec caught before the program runs,
# `points`, and `trace` on missing or malformed files.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"

run "$rpma_sim" --version
expect_status "--version exits 0" 0 "$status"
check "--version: softrpma's version" grep -qE '^rpma-sim \(softrpma\) [0-9]+\.[0-9]+\.[0-9]+$' <<<"$out"
expect_in "--version: the librpma API's" "$out" "librpma API 1.3 (librpma.so.0)"
expect_in "--version: the fabric protocol's" "$out" "fabric protocol 5"

# rpma-sim(1), made from the tables --help prints: every flag --help shows is in the page.
run "$rpma_sim" --man
expect_status "--man exits 0" 0 "$status"
check "--man: a man(7) page of section 1" grep -q '^\.TH RPMA\\-SIM 1 ' <<<"$out"
printf '%s\n' "$out" >"$work/rpma-sim.1"
if ! command -v man >/dev/null; then
  echo "SKIP: man -l of rpma-sim(1): no man (tools/ci/install_deps.sh installs man-db)"
else
  MANWIDTH=100 man --warnings -l "$work/rpma-sim.1" >"$work/man.txt" 2>"$work/man.err"
  expect_status "man -l renders rpma-sim(1)" 0 "$?"
  check "man -l: no roff warning" test ! -s "$work/man.err"
  cat "$work/man.err"
  page="$(cat "$work/man.txt")"
  for needle in "NAME" "SYNOPSIS" "DESCRIPTION" "COMMANDS" "EXIT STATUS" "SEE ALSO" \
    "rpma-sim sweep" "rpma-sim trace --fingerprint FILE..." "docs/RPMA_SIM.md"; do
    expect_in "man page: $needle" "$page" "$needle"
  done
  for sub in points devices run sweep trace report; do
    flags="$("$rpma_sim" "$sub" --help | grep -oE '^  --?[a-z][a-z_-]*')"
    for flag in $flags; do
      expect_in "man page: $sub's $flag" "$page" "$flag"
    done
  done
fi

run "$rpma_sim" --help
expect_status "--help exits 0" 0 "$status"
for needle in "Usage:" "Subcommands:" "  points  " "  devices " "  run     " "  sweep   " \
  "  trace   " "  report  " "rpma-sim report merge" \
  "Examples:" "rpma-sim sweep -j 4" "Exit status:"; do
  expect_in "--help: $needle" "$out" "$needle"
done

for sub in points devices run sweep trace report; do
  run "$rpma_sim" help "$sub"
  expect_status "help $sub exits 0" 0 "$status"
  expect_in "help $sub: usage" "$out" "Usage: rpma-sim $sub"
  expect_in "help $sub: examples" "$out" "Examples:"
  run "$rpma_sim" "$sub" --help
  expect_in "$sub --help is help $sub" "$out" "Usage: rpma-sim $sub"
done
run "$rpma_sim" help sweep
for flag in "--seed=S" "-j N" "--timeout=T  (default: 10s)" "--max-runs=M" "--points=P,..." \
  "--report=FILE" "--leaks" "--lib=DIR" "--device=D" "--junit=FILE" "--shard=K/N" \
  "--execution=async|eager" "--kinds=fail,wc,conn,kill" "--keep-traces=DIR" \
  "--plan-from=REPORT" "--plan-only"; do
  expect_in "help sweep lists $flag" "$out" "$flag"
done

usage_error() {  # NAME MESSAGE ARGS...
  local name="$1" message="$2"
  shift 2
  run "$rpma_sim" "$@"
  expect_status "$name: exit 2" 2 "$status"
  expect_in "$name: message" "$err" "$message"
}
usage_error "no arguments" \
  "no subcommand given; the subcommands are points, devices, run, sweep, trace, report"
usage_error "unknown subcommand" 'unknown subcommand "swep" (did you mean "sweep"?); the subcommands' \
  swep -- true
usage_error "unknown subcommand, nothing close" 'unknown subcommand "frobnicate"; the subcommands' \
  frobnicate -- true
usage_error "a mistyped flag" 'unknown flag --timout=3s (did you mean "--timeout"?); `rpma-sim sweep`' \
  sweep --timout=3s -- true
usage_error "a duration without its unit" \
  'bad value for --timeout: "10" has no unit; a duration is a number and its unit: 10s, 500ms' \
  sweep --timeout=10 -- true
usage_error "a mistyped point in --faults" \
  'unknown fault point "ibv_post_sned" (did you mean "ibv_post_send"?); known points:' \
  run --faults=ibv_post_sned:fail=EIO -- true
usage_error "unknown flag" "unknown flag --jobs=2; \`rpma-sim sweep\` takes --seed, -j" \
  sweep --jobs=2 -- true
usage_error "flag of another subcommand" 'flag --max-runs=3 is not a flag of `rpma-sim run`' \
  run --max-runs=3 -- true
usage_error "bad value" 'bad value for --timeout: "ten"' sweep --timeout=ten -- true
usage_error "run without --" 'unexpected argument "true"; the program to run comes after "--"' \
  run true
usage_error "sweep without a program" 'needs the program to run after "--"' sweep --
usage_error "trace without a file" '`rpma-sim trace` needs 1 argument' trace
usage_error "-j 0" "-j needs a number >= 1" sweep -j 0 -- true
usage_error "--points unknown" '--points: no fault point is called "ibv_foo" (`rpma-sim points`' \
  sweep --points=ibv_post_send,ibv_foo -- true
usage_error "--points mistyped" \
  '--points: no fault point is called "rdma_acept" (did you mean "rdma_accept"?)' \
  sweep --points=rdma_acept -- true
usage_error "--device unknown" \
  '--device: unknown device "mlx4": expected one of mlx5, rxe, siw' run --device=mlx4 -- true
usage_error "--device unknown in a list" '--device: unknown device "ib"' \
  sweep --device=mlx5,ib -- true
usage_error "--device empty" "--device: names no device" sweep --device=, -- true
usage_error "run takes one device" "--device: run takes one device (sweep takes a list)" \
  run --device=mlx5,siw -- true
usage_error "devices takes no flag" 'flag --device=siw is not a flag of `rpma-sim devices`' \
  devices --device=siw
usage_error "--lib without the library" "--lib=$work: there is no librpma.so.0" \
  run --lib="$work" -- true
usage_error "--plan-only without a report" "--plan-only needs --report=FILE" \
  sweep --plan-only -- true
usage_error "--plan-only with a shard" "--plan-only makes the plan of every shard" \
  sweep --plan-only --report="$work/p.json" --shard=1/2 -- true
usage_error "--plan-from a missing file" "--plan-from: cannot read \"$work/none.json\"" \
  sweep --plan-from="$work/none.json" -- true
echo '{"not": "a report"}' >"$work/garbage.json"
usage_error "--plan-from no report" "--plan-from: $work/garbage.json is not a sweep's report" \
  sweep --plan-from="$work/garbage.json" -- true
usage_error "--plan-only and --plan-from" "one makes a plan, the other takes one" \
  sweep --plan-only --report="$work/p.json" --plan-from="$work/garbage.json" -- true

# A malformed spec names the rule and the column, and the program never starts.
rm -f "$work/ran"
run "$rpma_sim" run --faults='ibv_poll_cq:fail=EIO; ibv_post_send:explode' -- touch "$work/ran"
expect_status "malformed spec: exit 2" 2 "$status"
expect_in "malformed spec: rule and column" "$err" \
  'rpma-sim: --faults: fault spec rule 2, column 37: unknown action "explode"'
check "malformed spec: the program did not run" test ! -e "$work/ran"
run "$rpma_sim" run --faults='ibv_ack_cq_events:fail=EIO' -- touch "$work/ran"
expect_in "void point: rejected" "$err" "action fail is not valid for ibv_ack_cq_events"
check "void point: the program did not run" test ! -e "$work/ran"

printf '# two rules\nibv_post_send:fail=EIO\nibv_post_send:explode\n' >"$work/bad.scenario"
run "$rpma_sim" run --scenario="$work/bad.scenario" -- touch "$work/ran"
expect_status "malformed scenario: exit 2" 2 "$status"
expect_in "malformed scenario: file, line and column" "$err" \
  "rpma-sim: --scenario: $work/bad.scenario:3:15: unknown action \"explode\""
check "malformed scenario: the program did not run" test ! -e "$work/ran"
run "$rpma_sim" run --scenario="$work/no-such-scenario" -- touch "$work/ran"
expect_status "missing scenario: exit 2" 2 "$status"
expect_in "missing scenario: message" "$err" "no-such-scenario: cannot read scenario file"
check "missing scenario: the program did not run" test ! -e "$work/ran"
mkdir -p "$work/scenario-dir"
run "$rpma_sim" run --scenario="$work/scenario-dir" -- touch "$work/ran"
expect_status "scenario is a directory: exit 2" 2 "$status"
expect_in "scenario is a directory: message" "$err" \
  "rpma-sim: --scenario: $work/scenario-dir: cannot read scenario file: it is a directory"
check "scenario is a directory: the program did not run" test ! -e "$work/ran"
run "$rpma_sim" run --scenario=/dev/zero -- touch "$work/ran"
expect_status "endless scenario: exit 2" 2 "$status"
expect_in "endless scenario: message names the file and the limit" "$err" \
  "rpma-sim: --scenario: /dev/zero: cannot read scenario file: it is larger than 16 MiB"
check "endless scenario: the program did not run" test ! -e "$work/ran"

run "$rpma_sim" run -- no-such-program-xyz
expect_status "missing program: exit 127" 127 "$status"
expect_in "missing program: message" "$err" "rpma-sim: cannot run no-such-program-xyz"

run "$rpma_sim" points
expect_status "points exits 0" 0 "$status"
check "points lists 48 points" test "$(grep -c '^[a-z]' <<<"$out")" -eq 48
check "points: first" grep -qE '^ibv_query_device_ex +query the device' <<<"$out"
check "points: last" grep -qE '^malloc ' <<<"$out"
expect_in "points: actions" "$out" "actions: fail=<errno>"
expect_in "points: void" "$out" "(returns void: counted, cannot fail)"

run "$rpma_sim" devices
expect_status "devices exits 0" 0 "$status"
check "devices: a column per profile, the default first" \
  grep -qE '^ +mlx5 \(default\) +rxe +siw$' <<<"$out"
check "devices: transport" grep -qE '^transport +IB +IB +iWARP$' <<<"$out"
check "devices: connection manager" grep -qE '^connection manager +IB CM +IB CM +iWARP$' <<<"$out"
check "devices: immediate data" grep -qE '^immediate data +yes +yes +no$' <<<"$out"
check "devices: native atomic write" grep -qE '^native atomic write +no +yes +no$' <<<"$out"
check "devices: max_sge" grep -qE '^max_sge +32 +32 +6$' <<<"$out"
check "devices: CQ rounding" grep -qE '^cq->cqe of n +2\^k - 1 >= n +2\^k - 1 >= n +2\^k >= n$' \
  <<<"$out"
check "devices: private data" grep -qE '^private data: connect +56 +56 +255$' <<<"$out"
expect_in "devices: where the values come from" "$out" "docs/DEVICES.md"

run "$rpma_sim" trace "$work/no-such.trace"
expect_status "trace of a missing file: exit 1" 1 "$status"
expect_in "trace of a missing file: message" "$err" "$work/no-such.trace: cannot read trace file"
printf 'softrpma-sim-trace 9\nseed 0x1\nfaults -\n' >"$work/v9.trace"
run "$rpma_sim" trace "$work/v9.trace"
expect_status "trace of an unknown version: exit 1" 1 "$status"
expect_in "trace of an unknown version: message" "$err" \
  "v9.trace: line 1: trace format version 9; rpma-sim reads versions 1 to 2"

finish
