#!/usr/bin/env bash
# `rpma-sim run`: the program runs unmodified with exactly the environment the flags give
# (RPMA_BACKEND=sim, RPMA_SIM_*, the inherited RPMA_SIM_* removed, LD_LIBRARY_PATH leading to our
# librpma.so.0 and then the verbs shim, ASLR off), its arguments untouched, and rpma-sim exits
# with its status. Then the behaviour: a fault from --faults reaches a librpma program; a program
# built against the DISTRO's librpma (skipped without librpma-dev) runs on ours through the
# default --lib lookup, and on the distro's over the shim with --upstream-librpma; Debian's
# ibv_devinfo runs on the shim with the device --device names.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
probe="$root/tools/rpma_sim/env_probe"
victim="$root/tools/rpma_sim/fault_victim"

export RPMA_SIM_SCENARIO=/inherited/scenario RPMA_SIM_STATS=/inherited/stats RPMA_BACKEND=ibverbs
run "$rpma_sim" run --seed=42 --faults='ibv_post_send:fail=EIO:nth=3' --trace="$work/t.trace" \
  -- "$probe" 7 a 'b c' --seed=1
expect_status "run exits with the program's status" 7 "$status"
expect_in "RPMA_BACKEND" "$out" "RPMA_BACKEND=sim"
expect_in "RPMA_SIM_SEED" "$out" "RPMA_SIM_SEED=42"
expect_in "RPMA_SIM_FAULTS" "$out" "RPMA_SIM_FAULTS=ibv_post_send:fail=EIO:nth=3"
expect_in "RPMA_SIM_TRACE" "$out" "RPMA_SIM_TRACE=$work/t.trace"
expect_in "no --device: RPMA_SIM_DEVICE removed" "$out" "RPMA_SIM_DEVICE=(unset)"
expect_in "inherited RPMA_SIM_SCENARIO removed" "$out" "RPMA_SIM_SCENARIO=(unset)"
expect_in "inherited RPMA_SIM_STATS removed" "$out" "RPMA_SIM_STATS=(unset)"
expect_in "LD_LIBRARY_PATH leads to our librpma.so.0" "$out" "librpma.so.0 there=yes"
expect_in "ASLR off" "$out" "aslr=off"
expect_in "arguments: 1" "$out" "arg[1]=a"
expect_in "arguments: 2 with a blank" "$out" "arg[2]=b c"
expect_in "arguments: flags after -- are the program's" "$out" "arg[3]=--seed=1"
unset RPMA_SIM_SCENARIO RPMA_SIM_STATS RPMA_BACKEND

RPMA_SIM_FAULTS='malloc:fail=ENOMEM' RPMA_SIM_SEED=9 run "$rpma_sim" run -- "$probe" 0
expect_status "plain run exits 0" 0 "$status"
expect_in "inherited RPMA_SIM_FAULTS removed" "$out" "RPMA_SIM_FAULTS=(unset)"
expect_in "inherited RPMA_SIM_SEED removed" "$out" "RPMA_SIM_SEED=(unset)"

RPMA_SIM_DEVICE=rxe run "$rpma_sim" run --device=siw -- "$probe" 0
expect_in "--device sets RPMA_SIM_DEVICE" "$out" "RPMA_SIM_DEVICE=siw"

run "$rpma_sim" run --faults= --stats="$work/s" -- "$probe" 0
expect_in "empty --faults is set" "$out" "RPMA_SIM_FAULTS="$'\n'
expect_in "RPMA_SIM_STATS" "$out" "RPMA_SIM_STATS=$work/s"

# The verbs shim's directory comes second: the one holding the shim's libibverbs.so.1 (which
# holds the simulator's messages, rdma-core's does not) and librdmacm.so.1.
run "$rpma_sim" run -- sh -c 'echo "$LD_LIBRARY_PATH"'
shim_dir="$(cut -d: -f2 <<<"$out")"
check "the verbs shim second in LD_LIBRARY_PATH" test -e "$shim_dir/librdmacm.so.1"
check "the verbs shim's libibverbs.so.1 is the simulator's" \
  grep -qa "softrpma-sim: " "$shim_dir/libibverbs.so.1"
run "$rpma_sim" run --verbs-lib=/nonexistent -- touch "$work/no-shim-ran"
expect_status "--verbs-lib without the shim: exit 2" 2 "$status"
expect_in "--verbs-lib without the shim: said" "$err" \
  "--verbs-lib=/nonexistent: there is no libibverbs.so.1 and librdmacm.so.1 in /nonexistent"
check "--verbs-lib without the shim: the program did not run" test ! -e "$work/no-shim-ran"
mkdir -p "$work/rdma-core"
cp /lib/x86_64-linux-gnu/libibverbs.so.1 /lib/x86_64-linux-gnu/librdmacm.so.1 "$work/rdma-core/" \
  2>/dev/null || printf 'ELF rdma-core\n' >"$work/rdma-core/libibverbs.so.1"
run "$rpma_sim" run --verbs-lib="$work/rdma-core" -- true
expect_status "--verbs-lib with rdma-core's libraries: exit 2" 2 "$status"
expect_in "--verbs-lib with rdma-core's libraries: said" "$err" "does not hold the verbs shim's"
cp "$shim_dir/libibverbs.so.1" "$shim_dir/librdmacm.so.1" "$work/"
LD_LIBRARY_PATH=/somewhere/else run "$rpma_sim" run --verbs-lib="$work" -- sh -c 'echo "$LD_LIBRARY_PATH"'
expect_in "--verbs-lib second in LD_LIBRARY_PATH, the inherited value after it" "$out" \
  ":$work:/somewhere/else"

# A raw verbs program (Debian's ibv_devinfo, ibverbs-utils) on the shim: the simulated device,
# of the profile --device names. Under --config=asan / tsan it needs the shim's sanitizer runtime
# preloaded (it is built without it), and its own leaks are not ours.
if command -v ibv_devinfo >/dev/null; then
  runtimes="$(ldd "$shim_dir/libibverbs.so.1" | awk '/lib(asan|ubsan|tsan)\.so/ {print $3}' | paste -sd: -)"
  LD_PRELOAD="$runtimes" ASAN_OPTIONS=detect_leaks=0 run "$rpma_sim" run --device=siw -- ibv_devinfo
  expect_status "ibv_devinfo on the shim: exit 0" 0 "$status"
  expect_in "ibv_devinfo on the shim: the simulated device" "$out" "hca_id:	softrpma_sim0"
  expect_in "ibv_devinfo on the shim: --device=siw reaches the shim" "$out" "iWARP"
else
  echo "SKIPPED: ibv_devinfo on the shim (ibverbs-utils is not installed)"
fi
# Debian's rping (rdmacm-utils) as two processes under rpma-sim, on their own fabric; a fault
# from --faults reaches the client through the shim.
if command -v rping >/dev/null; then
  runtimes="$(ldd "$shim_dir/libibverbs.so.1" | awk '/lib(asan|ubsan|tsan)\.so/ {print $3}' | paste -sd: -)"
  export RPMA_SIM_FABRIC="run-test-rping-$$"
  rping_port=$((27000 + RANDOM % 1000))
  LD_PRELOAD="$runtimes" ASAN_OPTIONS=detect_leaks=0 timeout 30 "$rpma_sim" run -- \
    rping -s -a 127.0.0.1 -p "$rping_port" -C 3 -v >"$work/rping_server.out" 2>&1 &
  rping_server=$!
  trap 'kill "$rping_server" 2>/dev/null' EXIT
  # The client comes once the server listens (its simulated listener's abstract socket).
  for ((tries = 0; tries < 100; tries++)); do
    grep -qF "@softrpma/$RPMA_SIM_FABRIC/127.0.0.1:$rping_port" /proc/net/unix && break
    kill -0 "$rping_server" 2>/dev/null || break
    sleep 0.1
  done
  LD_PRELOAD="$runtimes" ASAN_OPTIONS=detect_leaks=0 run "$rpma_sim" run -- \
    rping -c -a 127.0.0.1 -p "$rping_port" -C 3 -v
  expect_status "rping client under rpma-sim: exit 0" 0 "$status"
  expect_in "rping client under rpma-sim: three pings" "$out" "ping data: rdma-ping-2: "
  wait "$rping_server"
  expect_status "rping server under rpma-sim: exit 0" 0 "$?"
  LD_PRELOAD="$runtimes" ASAN_OPTIONS=detect_leaks=0 run "$rpma_sim" run \
    --faults='ibv_alloc_pd:fail=EIO:nth=1' -- rping -c -a 127.0.0.1 -p "$rping_port" -C 1
  check "rping with a fault: fails" test "$status" -ne 0
  expect_in "rping with a fault: the shim injected it" "$err$out" \
    "softrpma-sim: fault injected: ibv_alloc_pd:fail=EIO"
  unset RPMA_SIM_FABRIC
else
  echo "SKIPPED: rping on the shim (rdmacm-utils is not installed)"
fi

mkdir -p "$work/lib"
cp "$root/api/librpma.so.0" "$work/lib/"
LD_LIBRARY_PATH=/somewhere/else run "$rpma_sim" run --lib="$work/lib" -- "$probe" 0
expect_in "--lib goes first in LD_LIBRARY_PATH" "$out" "LD_LIBRARY_PATH first=$work/lib"

# Where rpma-sim finds our librpma.so.0 by itself: next to it (both copied into one directory),
# in an install prefix (bin/rpma-sim, lib/softrpma/librpma.so.0: the layout of `./run install`),
# and nowhere, which is an error rather than a run on whatever librpma the loader finds.
# (RUNFILES_DIR, which bazel test sets, would lead to this test's own copy: not for these.)
lay="$work/layouts"  # (not $work: $work/lib holds a copy of the library, see above)
mkdir -p "$lay/flat" "$lay/prefix/bin" "$lay/prefix/lib/softrpma" "$lay/alone" "$lay/fake"
cp "$rpma_sim" "$root/api/librpma.so.0" "$shim_dir/libibverbs.so.1" "$shim_dir/librdmacm.so.1" \
  "$lay/flat/"
run env -u RUNFILES_DIR "$lay/flat/rpma-sim" run -- "$probe" 0
expect_status "library next to rpma-sim: exit 0" 0 "$status"
expect_in "library next to rpma-sim: found" "$out" "LD_LIBRARY_PATH first=$lay/flat"$'\n'
expect_status "library next to rpma-sim: nothing on stderr" "" "$err"
cp "$rpma_sim" "$lay/prefix/bin/"
cp "$root/api/librpma.so.0" "$lay/prefix/lib/softrpma/"
run env -u RUNFILES_DIR "$lay/prefix/bin/rpma-sim" run -- "$probe" 0
expect_status "no shim in the prefix: exit 2" 2 "$status"
expect_in "no shim in the prefix: said" "$err" \
  "rpma-sim: cannot find the verbs shim's libibverbs.so.1 and librdmacm.so.1 (looked in $lay/prefix/bin, "
mkdir -p "$lay/prefix/lib/softrpma/verbs-shim"
cp "$shim_dir/libibverbs.so.1" "$shim_dir/librdmacm.so.1" "$lay/prefix/lib/softrpma/verbs-shim/"
run env -u RUNFILES_DIR "$lay/prefix/bin/rpma-sim" run -- "$probe" 0
expect_in "library in <prefix>/lib/softrpma: found" "$out" \
  "LD_LIBRARY_PATH first=$lay/prefix/lib/softrpma"$'\n'
run env -u RUNFILES_DIR "$lay/prefix/bin/rpma-sim" run -- sh -c 'echo "$LD_LIBRARY_PATH"'
expect_in "shim in <prefix>/lib/softrpma/verbs-shim: found" "$out" \
  "$lay/prefix/lib/softrpma:$lay/prefix/lib/softrpma/verbs-shim"
cp "$rpma_sim" "$lay/alone/"
run env -u RUNFILES_DIR "$lay/alone/rpma-sim" run -- touch "$lay/alone-ran"
expect_status "no library: exit 2" 2 "$status"
expect_in "no library: said" "$err" "rpma-sim: cannot find softrpma's librpma.so.0 (looked in $lay/alone, "
check "no library: the program did not run" test ! -e "$lay/alone-ran"
check "no library: each directory named once" test "$(grep -o "$lay/alone," <<<"$err" | wc -l)" -eq 1
# Another librpma.so.0 there (the distro's, say) is not ours: the same refusal, saying so.
cp "$rpma_sim" "$lay/fake/"
printf '\177ELF not softrpma\n' >"$lay/fake/librpma.so.0"
run env -u RUNFILES_DIR "$lay/fake/rpma-sim" run -- touch "$lay/fake-ran"
expect_status "another librpma: exit 2" 2 "$status"
expect_in "another librpma: said" "$err" "the one in $lay/fake is another librpma"
check "another librpma: the program did not run" test ! -e "$lay/fake-ran"
run "$rpma_sim" run --lib="$lay/fake" -- touch "$lay/fake-ran"
expect_status "--lib with another librpma: exit 2" 2 "$status"
expect_in "--lib with another librpma: said" "$err" "librpma.so.0 in $lay/fake is not softrpma's"

run "$rpma_sim" run -- "$probe" TERM
expect_status "a signal ends rpma-sim run the same way" $((128 + 15)) "$status"

# Behaviour: the fault reaches the program, which reports it.
run "$rpma_sim" run -- "$victim" report
expect_status "victim without a fault: exit 0" 0 "$status"
expect_in "victim without a fault: output" "$out" "fault_victim: no fault"
run "$rpma_sim" run --faults='ibv_alloc_pd:fail=EIO:nth=1' -- "$victim" report
expect_status "victim with a fault: exit 1" 1 "$status"
expect_in "victim with a fault: injected" "$err" \
  "softrpma-sim: fault injected: ibv_alloc_pd:fail=EIO"
expect_in "victim with a fault: reported" "$err" "rpma_peer_new: "

# A trace or stats file that cannot be written: the program runs, and the simulator says so.
run "$rpma_sim" run --trace=/dev/full --stats=/dev/full -- "$victim" report
expect_status "unwritable trace and stats: the program's exit 0" 0 "$status"
expect_in "unwritable trace: said" "$err" \
  'softrpma-sim: RPMA_SIM_TRACE: cannot write "/dev/full": No space left on device'
expect_in "unwritable stats: said" "$err" \
  'softrpma-sim: RPMA_SIM_STATS: cannot write "/dev/full": No space left on device'

# A scenario file: passed on, and its rule reaches the program.
printf '# the PD cannot be allocated\nseed 7\nibv_alloc_pd:fail=EIO:nth=1\n' >"$work/pd.scenario"
run "$rpma_sim" run --scenario="$work/pd.scenario" -- "$probe" 0
expect_in "RPMA_SIM_SCENARIO" "$out" "RPMA_SIM_SCENARIO=$work/pd.scenario"
run "$rpma_sim" run --scenario="$work/pd.scenario" -- "$victim" report
expect_status "victim with a scenario: exit 1" 1 "$status"
expect_in "victim with a scenario: injected" "$err" \
  "softrpma-sim: fault injected: ibv_alloc_pd:fail=EIO"

# A program built against the distro's librpma, run on ours with no --lib.
distro_dev="$(cc -print-file-name=librpma.so)"
if [[ -e /usr/include/librpma.h && "$distro_dev" == /* && -e "$distro_dev" ]]; then
  read -r -a sanitize <<<"$(sanitizer_flags "$root/api/librpma.so.0")"
  if cc -std=c11 -Wall -Wextra -Werror "${sanitize[@]}" "$testdata/fault_victim.c" \
    -o "$work/victim_distro" -L"$(dirname "$distro_dev")" -lrpma 2>"$work/cc.err"; then
    pass "fault_victim.c builds against the distro's librpma"
    run "$rpma_sim" run --faults='ibv_alloc_pd:fail=EIO:nth=1' -- "$work/victim_distro" report
    expect_status "distro-built program on ours: exit 1" 1 "$status"
    expect_in "distro-built program on ours: the simulator injected the fault" "$err" \
      "softrpma-sim: fault injected: ibv_alloc_pd:fail=EIO"
    run "$rpma_sim" run -- "$work/victim_distro" report
    expect_status "distro-built program on ours, no fault: exit 0" 0 "$status"
    # --upstream-librpma: the same program on the distro's librpma, over the shim, whose
    # simulator injects the fault (upstream logs its own message for it).
    LD_LIBRARY_PATH="$work/lib" run "$rpma_sim" run --upstream-librpma -- \
      sh -c 'echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH RPMA_BACKEND=$RPMA_BACKEND"'
    expect_in "--upstream-librpma: the shim first, RPMA_BACKEND=ibverbs" "$out" \
      "LD_LIBRARY_PATH=$shim_dir RPMA_BACKEND=ibverbs"
    LD_LIBRARY_PATH="$work/lib" run "$rpma_sim" run --upstream-librpma -- ldd "$work/victim_distro"
    loaded="$(awk '$1 == "librpma.so.0" {print $3}' <<<"$out")"
    check "--upstream-librpma: the distro's librpma.so.0 loads (ours inherited: dropped)" \
      test "$(readlink -f "$loaded")" == "$(readlink -f "$distro_dev")"
    expect_in "--upstream-librpma: the shim's libibverbs.so.1 loads" "$out" \
      "libibverbs.so.1 => $shim_dir/libibverbs.so.1"
    run "$rpma_sim" run --upstream-librpma -- "$work/victim_distro" report
    expect_status "distro-built program on upstream, no fault: exit 0" 0 "$status"
    expect_in "distro-built program on upstream, no fault: output" "$out" "fault_victim: no fault"
    run "$rpma_sim" run --upstream-librpma --faults='ibv_alloc_pd:fail=EIO:nth=1' -- \
      "$work/victim_distro" report
    expect_status "distro-built program on upstream with a fault: exit 1" 1 "$status"
    expect_in "distro-built program on upstream: the shim injected the fault" "$err" \
      "softrpma-sim: fault injected: ibv_alloc_pd:fail=EIO"
    # sweep takes it too: the shim's simulator counts the hits and fails each.
    run "$rpma_sim" sweep --upstream-librpma --points=ibv_alloc_pd --timeout=20s -- \
      "$work/victim_distro" report
    expect_status "sweep --upstream-librpma: exit 0" 0 "$status"
    expect_in "sweep --upstream-librpma: the point was hit and failed" "$out" "sweep passed: 1 runs"
  else
    fail "fault_victim.c builds against the distro's librpma" "$(cat "$work/cc.err")"
  fi
else
  echo "SKIPPED: the distro-built program check (librpma-dev is not installed)"
fi

# --upstream-librpma's errors: a directory without upstream librpma, ours named as upstream, and
# --lib with it. The program never runs.
run "$rpma_sim" run --upstream-lib=/nonexistent -- touch "$work/upstream-ran"
expect_status "--upstream-lib without a librpma: exit 2" 2 "$status"
expect_in "--upstream-lib without a librpma: said" "$err" \
  "rpma-sim: --upstream-librpma: --upstream-lib=/nonexistent: there is no librpma.so.0 in /nonexistent"
run "$rpma_sim" run --upstream-lib="$work/lib" -- touch "$work/upstream-ran"
expect_status "--upstream-lib with ours: exit 2" 2 "$status"
expect_in "--upstream-lib with ours: said" "$err" "is softrpma's, not upstream librpma"
run "$rpma_sim" run --upstream-librpma --lib="$work/lib" -- touch "$work/upstream-ran"
expect_status "--upstream-librpma with --lib: exit 2" 2 "$status"
# The shim found in a directory that also holds our librpma (the flat layout above): the program
# would load ours, so it does not run.
if [[ -e /usr/lib/x86_64-linux-gnu/librpma.so.0 ]]; then
  run env -u RUNFILES_DIR "$lay/flat/rpma-sim" run --upstream-lib=/usr/lib/x86_64-linux-gnu -- \
    touch "$work/upstream-ran"
  expect_status "--upstream-librpma with the shim beside our librpma: exit 2" 2 "$status"
  expect_in "--upstream-librpma with the shim beside our librpma: said" "$err" \
    "also holds softrpma's librpma.so.0"
fi
check "--upstream-librpma errors: the program did not run" test ! -e "$work/upstream-ran"
if [[ ! -e /usr/lib/x86_64-linux-gnu/librpma.so.0 && ! -e /lib/x86_64-linux-gnu/librpma.so.0 ]]; then
  run "$rpma_sim" run --upstream-librpma -- touch "$work/upstream-ran"
  expect_status "--upstream-librpma, librpma0 not installed: exit 2" 2 "$status"
  expect_in "--upstream-librpma, librpma0 not installed: said" "$err" "apt-get install librpma0"
fi


# --expect-failure: the run passes (exit 0, a passing JUnit case) when the program reports the
# fault with a non-zero exit; it fails when the program exits 0 (exit 1, said) or crashes (its
# signal's status), and the JUnit case says the same as the exit status.
fault='ibv_alloc_pd:fail=EIO:nth=1'
run "$rpma_sim" run --expect-failure --faults="$fault" --junit="$work/expected.xml" -- \
  "$victim" report
expect_status "--expect-failure, the fault reported: exit 0" 0 "$status"
expect_in "--expect-failure, the fault reported: the program's output" "$out" "rpma_peer_new:"
check "--expect-failure, the fault reported: the case passed" \
  grep -q '<testsuite name=.* tests="1" failures="0"' "$work/expected.xml"
expect_in "--expect-failure, the fault reported: the case's name says so" \
  "$(cat "$work/expected.xml")" "name=\"$fault, expected to fail\""
run "$rpma_sim" run --expect-failure --junit="$work/unexpected.xml" -- "$victim" report
expect_status "--expect-failure, exit 0: exit 1" 1 "$status"
expect_in "--expect-failure, exit 0: said" "$err" "exited 0; --expect-failure expected it to fail"
expect_in "--expect-failure, exit 0: a failing case" "$(cat "$work/unexpected.xml")" \
  'message="clean (exit 0), expected a failure (--expect-failure)"'
run "$rpma_sim" run --expect-failure --faults="$fault" --junit="$work/crashed.xml" -- \
  "$victim" crash
# (SIGSEGV's 139; 1 under --config=asan, where AddressSanitizer reports the crash and exits)
check "--expect-failure, a crash: a failing status" test "$status" -ne 0
expect_in "--expect-failure, a crash: a failing case" "$(cat "$work/crashed.xml")" \
  'message="crashed ('
run "$rpma_sim" run --expect-failure --faults="$fault" -- "$victim" report
expect_status "--expect-failure without --junit: exit 0" 0 "$status"

finish
