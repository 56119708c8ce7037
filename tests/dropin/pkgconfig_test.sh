#!/usr/bin/env bash
# pkgconfig_test: the pkg-config file of //api:librpma_pc builds and runs a program against
# softrpma, as README.md ("pkg-config") tells users to:
#   cc dropin.c $(pkg-config --cflags --libs librpma)   with PKG_CONFIG_PATH=<tree>/lib/pkgconfig
#   LD_LIBRARY_PATH=$(pkg-config --variable=libdir librpma) ./dropin run PORT
# first with the tree where Bazel built it, then with a copy of it elsewhere (an "install": the
# .pc finds its prefix relative to itself). Checks that our header and our library (not the
# distro's, if librpma-dev is installed) were compiled, linked and loaded.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
source "$root/tests/dropin/testlib.sh"
require_sim

work="${TEST_TMPDIR:-$(mktemp -d)}"
tree="$root/api/librpma"
read -r -a sanitize <<<"$(sanitizer_flags "$tree/lib/softrpma/librpma.so.0")"
failures=0
fail() {
  echo "FAILED: $1"
  failures=$((failures + 1))
}

# check_prefix NAME PREFIX PORT: builds dropin.c with pkg-config from PREFIX/lib/pkgconfig and
# runs it on the library found there.
check_prefix() {
  local name="$1" prefix="$2" port="$3"
  local header lib out
  header="$(readlink -f "$prefix/include/librpma.h")"
  lib="$(readlink -f "$prefix/lib/softrpma/librpma.so.0")"
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  echo "== $name: PKG_CONFIG_PATH=$PKG_CONFIG_PATH"

  local version flags libdir
  version="$(pkg-config --modversion librpma)" || fail "$name: pkg-config finds no librpma"
  [[ "$version" == 1.3.0 ]] ||
    fail "$name: version is '$version', want 1.3.0 (ours, not the distro's)"
  flags="$(pkg-config --cflags --libs librpma)"
  libdir="$(pkg-config --variable=libdir librpma)"
  echo "pkg-config --cflags --libs librpma: $flags"
  [[ "$(readlink -f "$libdir")" == "$(readlink -f "$prefix/lib/softrpma")" ]] ||
    fail "$name: libdir $libdir is not $prefix/lib/softrpma"
  # Like the distro's librpma.pc, the flags bring libibverbs and librdmacm.
  [[ " $flags " == *" -libverbs "* && " $flags " == *" -lrdmacm "* ]] ||
    fail "$name: -libverbs -lrdmacm missing from the flags"

  local exe="$work/dropin_$name"
  # shellcheck disable=SC2086  # pkg-config's output is a list of words
  (cd "$work" && cc -std=c11 -Wall -Wextra -Werror "${sanitize[@]}" -MD -MF "$exe.d" \
    "$root/tests/dropin/dropin.c" -o "$exe" $flags -Wl,--trace >"$exe.trace") ||
    { fail "$name: the build failed"; return; }
  local used
  used="$(tr ' ' '\n' <"$exe.d" | grep 'librpma\.h$' | xargs readlink -f)"
  [[ "$used" == "$header" ]] || fail "$name: compiled with '$used', not $header"
  used="$(sed 's/[() ]/\n/g' "$exe.trace" | grep -F 'librpma.so' | xargs readlink -f)"
  [[ "$used" == "$lib" ]] || fail "$name: linked with '$used', not $lib"

  if out="$(LD_LIBRARY_PATH="$libdir" "$exe" run "$port" 2>&1)"; then
    echo "$out"
  else
    echo "$out"
    fail "$name: dropin run failed"
  fi
  [[ "$(head -n1 <<<"$out")" == "librpma.so.0: $lib" ]] || fail "$name: did not run on $lib"
  grep -qxF "run: 0 failed checks" <<<"$out" || fail "$name: dropin run did not finish its checks"
}

check_prefix bazel-bin "$tree" 24001

# An install, as README.md says: the tree Bazel built copied to another prefix (from bazel-out,
# not from the runfiles, whose files are symlinks into it; lib/librpma.so stays a symlink).
mkdir -p "$work/prefix"
cp -R "$(dirname "$(dirname "$(dirname "$(readlink -f "$tree/lib/softrpma/librpma.so.0")")")")/." \
  "$work/prefix/"
[[ -L "$work/prefix/lib/softrpma/librpma.so" && ! -L "$work/prefix/lib/softrpma/librpma.so.0" ]] ||
  fail "the copied tree does not have lib/softrpma/librpma.so -> librpma.so.0"
check_prefix installed "$work/prefix" 24002

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
