#!/usr/bin/env bash
# softrpma-env(7) against the shipped libraries: every RPMA_* variable name that librpma.so.0 and
# the verbs shim contain is on `rpma-sim help env`, and the page names none they do not contain
# (so a variable added, renamed or removed in the code without the table fails here). Then the
# page as roff: `rpma-sim --man-env` renders with man -l, without a warning.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"

libs=("$root/api/librpma.so.0" "$root"/simverbs/shim/lib/*.so.1)
# The names as the libraries hold them: NUL-terminated strings the environment is read with.
in_code="$(grep -ahoE 'RPMA_(SIM_[A-Z0-9_]+|BACKEND|FAULT_INJECTION)' "${libs[@]}" | sort -u)"
check "the libraries read RPMA_SIM_SEED (the scan finds names)" grep -qx RPMA_SIM_SEED <<<"$in_code"

run "$rpma_sim" help env
expect_status "help env exits 0" 0 "$status"
on_page="$(grep -oE '^  RPMA_[A-Z0-9_]+=' <<<"$out" | sed 's/^  //; s/=$//' | sort -u)"
while read -r name; do
  check "help env names $name" grep -qx "$name" <<<"$on_page"
done <<<"$in_code"
while read -r name; do
  check "the libraries read $name (on the page)" grep -qx "$name" <<<"$in_code"
done <<<"$on_page"

run "$rpma_sim" --man-env
expect_status "--man-env exits 0" 0 "$status"
check "--man-env: a page of section 7" grep -q '^\.TH SOFTRPMA\\-ENV 7 ' <<<"$out"
if ! command -v man >/dev/null; then
  echo "SKIP: man -l of softrpma-env(7): no man (tools/ci/install_deps.sh installs man-db)"
else
  printf '%s\n' "$out" >"$work/softrpma-env.7"
  MANWIDTH=100 man --warnings -l "$work/softrpma-env.7" >"$work/man.txt" 2>"$work/man.err"
  expect_status "man -l renders softrpma-env(7)" 0 "$?"
  check "man -l: no roff warning" test ! -s "$work/man.err"
  cat "$work/man.err"
  page="$(cat "$work/man.txt")"
  for needle in NAME DESCRIPTION VARIABLES "SEE ALSO" RPMA_SIM_SEED RPMA_FAULT_INJECTION; do
    expect_in "softrpma-env(7): $needle" "$page" "$needle"
  done
fi
finish
