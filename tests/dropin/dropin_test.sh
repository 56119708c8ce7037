#!/usr/bin/env bash
# dropin_test: softrpma's librpma.so.0 is a drop-in for the distro's. dropin.c is compiled with
# the system cc against the DISTRO's /usr/include/librpma.h and linked against the DISTRO's
# library (librpma-dev), exactly as a user's existing program was. Then, unchanged:
#   * without LD_LIBRARY_PATH it loads the distro's librpma.so.0 (only which library loaded is
#     checked: with no RDMA device the distro's library can do nothing useful here);
#   * with LD_LIBRARY_PATH=<our lib dir> it loads ours (the program's own dl_iterate_phdr()
#     report and the dynamic loader's LD_DEBUG=libs trace both name our file), connects a client
#     and a server on the simulated NIC, writes, reads back, sends/receives and waits with
#     rpma_conn_wait(), checking every completion and byte;
#   * RPMA_SIM_FAULTS makes its rpma_write() fail with RPMA_E_PROVIDER and the simulator log the
#     injection: a behaviour only softrpma has.
# Skipped (with a message) when librpma-dev is not installed: `./run test` installs it
# (SOFTRPMA_WITH_DISTRO_LIBRPMA=1, tools/ci/install_deps.sh).
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
source "$root/tests/dropin/testlib.sh"
require_sim

[[ -e /usr/include/librpma.h ]] ||
  skip_test "/usr/include/librpma.h is missing: install librpma-dev (./run test does)"
distro_dir="$(distro_libdir)" ||
  skip_test "the distro's librpma.so(.0) is missing: install librpma-dev (./run test does)"
distro_lib="$(readlink -f "$distro_dir/librpma.so.0")"

work="${TEST_TMPDIR:-$(mktemp -d)}"
mkdir -p "$work/lib"
cp "$root/api/librpma.so.0" "$work/lib/"
ours="$(readlink -f "$work/lib/librpma.so.0")"
read -r -a sanitize <<<"$(sanitizer_flags "$ours")"

failures=0
fail() {
  echo "FAILED: $1"
  failures=$((failures + 1))
}

echo "== build against the distro: /usr/include/librpma.h, -lrpma from $distro_dir"
# No -I: <librpma.h> can only be the system one. -MD lists the headers used, -Wl,--trace the
# files the linker took.
(cd "$work" && cc -std=c11 -Wall -Wextra -Werror "${sanitize[@]}" -MD -MF dropin.d \
  "$root/tests/dropin/dropin.c" -o dropin -L"$distro_dir" -lrpma -libverbs \
  -Wl,--trace >link_trace.txt)
deps="$(cat "$work/dropin.d")"
[[ "$deps" == *" /usr/include/librpma.h"* ]] || fail "not compiled with /usr/include/librpma.h"
[[ "$deps" != *"api/include/librpma.h"* ]] || fail "compiled with softrpma's header"
linked="$(sed 's/[() ]/\n/g' "$work/link_trace.txt" | grep -F 'librpma.so' || true)"
[[ "$(readlink -f "$linked" 2>/dev/null)" == "$distro_lib" ]] ||
  fail "not linked against the distro's librpma.so (linker took: ${linked:-nothing})"
needed="$(readelf -d "$work/dropin")"
[[ "$needed" == *"Shared library: [librpma.so.0]"* ]] || fail "dropin does not NEED librpma.so.0"

echo "== no LD_LIBRARY_PATH: the distro's library"
out="$(env -u LD_LIBRARY_PATH "$work/dropin" where)" || fail "dropin where (distro) exited $?"
echo "$out"
[[ "$out" == "librpma.so.0: $distro_lib" ]] || fail "expected the distro's $distro_lib"

echo "== LD_LIBRARY_PATH=$work/lib: ours"
out="$(LD_LIBRARY_PATH="$work/lib" "$work/dropin" where)" || fail "dropin where (ours) exited $?"
echo "$out"
[[ "$out" == "librpma.so.0: $ours" ]] || fail "expected ours, $ours"
# The dynamic loader's own account, independent of the program's.
trace="$(LD_DEBUG=libs LD_LIBRARY_PATH="$work/lib" "$work/dropin" where 2>&1 >/dev/null)"
grep -qE "calling init: $work/lib/librpma\.so\.0\$" <<<"$trace" ||
  fail "LD_DEBUG=libs does not show ours being initialized"
if grep -qF "$distro_dir/librpma.so.0" <<<"$trace"; then fail "LD_DEBUG=libs shows the distro's"; fi

echo "== LD_LIBRARY_PATH=$work/lib: connect, write, read back, send/recv, rpma_conn_wait"
if LD_LIBRARY_PATH="$work/lib" "$work/dropin" run 23001 >"$work/run.out" 2>&1; then
  cat "$work/run.out"
else
  status=$?
  cat "$work/run.out"
  fail "dropin run exited $status"
fi
head -n1 "$work/run.out" | grep -qxF "librpma.so.0: $ours" || fail "dropin run did not run on ours"
grep -qxF "run: 0 failed checks" "$work/run.out" || fail "dropin run did not finish its checks"

echo "== RPMA_SIM_FAULTS='ibv_post_send:fail=EIO': rpma_write() -> RPMA_E_PROVIDER"
if RPMA_SIM_FAULTS='ibv_post_send:fail=EIO' LD_LIBRARY_PATH="$work/lib" "$work/dropin" \
  write_fault 23002 >"$work/fault.out" 2>&1; then
  cat "$work/fault.out"
else
  status=$?
  cat "$work/fault.out"
  fail "dropin write_fault exited $status"
fi
grep -qF "softrpma-sim: fault injected: ibv_post_send:fail=EIO" "$work/fault.out" ||
  fail "the simulator did not log the injected fault"
grep -qxF "write_fault: 0 failed checks" "$work/fault.out" ||
  fail "rpma_write() was not RPMA_E_PROVIDER"

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
