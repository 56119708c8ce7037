#!/usr/bin/env bash
# install_test: softrpma installed as a user installs it, then used from there alone.
#   1. stage.sh installs this configuration's tree (//api:librpma_pc) into a prefix: the files
#      are there, every ELF file loads Abseil from the prefix only and nothing is unresolved,
#      rpma-sim --version runs, man -l renders both pages;
#   2. a librpma program built against the prefix (pkg-config) runs on it under rpma-sim run,
#      and loads librpma.so.0 and Abseil from the prefix;
#   3. package.sh makes the .deb and the .tar.gz; the .deb holds /usr/bin/rpma-sim and its
#      control file the dependencies; both are unpacked and, from each unpacked tree, rpma-sim,
#      the librpma program, ibv_devinfo and an ib_write_bw -R pair run on the simulated NIC.
# Nothing from Bazel's output is on any library path of what runs (rpma-sim puts the prefix's
# directories there); LD_DEBUG shows where each library was loaded from.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
unset LD_LIBRARY_PATH RPMA_SIM_FABRIC
tree="$root/api/librpma"
here="$root/tools/install"
docs=("$root/docs/CI.md" "$root/docs/RPMA_SIM.md")
read -r -a sanitize <<<"$(sanitizer_flags "$tree/lib/softrpma/librpma.so.0")"
port=$((30000 + ($$ % 15000)))
# Under --config=asan / tsan the shim is built with a sanitizer, whose runtime a distro verbs
# program (ibv_devinfo, ib_write_bw) does not load first: preload it for those (as
# simverbs/shim/testlib.sh does).
verbs_env=(env)
runtimes="$(ldd "$tree/lib/softrpma/verbs-shim/libibverbs.so.1" |
  awk '/lib(asan|ubsan|tsan)\.so/ {print $3}' | paste -sd: -)"
if [[ -n "$runtimes" ]]; then
  verbs_env=(env LD_PRELOAD="$runtimes" ASAN_OPTIONS=detect_leaks=0)
fi

# loaded_outside PREFIX COMMAND...: each library (libabsl_*, librpma.so.0) the command's processes
# loaded that is outside PREFIX, one a line; empty when all came from PREFIX.
loaded_outside() {
  local prefix="$1"
  shift
  LD_DEBUG=files LD_DEBUG_OUTPUT="$work/ld" "$@" >/dev/null 2>&1
  cat "$work"/ld.* 2>/dev/null | sed -n 's/.*calling init: \(.*\)$/\1/p' |
    grep -E '/(libabsl_[^/]*|librpma\.so\.0)$' | xargs -r readlink -f |
    grep -v "^$(readlink -f "$prefix")/" | sort -u
  rm -f "$work"/ld.*
}

# uses_prefix NAME PREFIX PORT: what a user does with an installed prefix.
uses_prefix() {
  local name="$1" prefix="$2" p="$3" sim="$2/bin/rpma-sim"
  run "$sim" --version
  expect_status "$name: rpma-sim --version" 0 "$status"
  expect_in "$name: rpma-sim names the API" "$out" "librpma API 1.3"

  # A librpma program built against the prefix as README.md shows (pkg-config).
  local flags
  flags="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs librpma)"
  # shellcheck disable=SC2086  # (pkg-config's flags are words)
  run cc -std=c11 "${sanitize[@]}" "$root/tests/dropin/dropin.c" $flags -o "$work/dropin-$name"
  expect_status "$name: a librpma program builds with pkg-config" 0 "$status"
  [[ "$status" == 0 ]] || echo "$err"
  run "$sim" run -- "$work/dropin-$name" run "$p"
  expect_status "$name: it runs on the simulated NIC" 0 "$status"
  expect_in "$name: on the prefix's librpma.so.0" "$out" \
    "librpma.so.0: $(readlink -f "$prefix/lib/softrpma/librpma.so.0")"
  [[ "$status" == 0 ]] || echo "$out$err"
  local outside
  outside="$(loaded_outside "$prefix" "$sim" run -- "$work/dropin-$name" where)"
  check "$name: rpma-sim and the program load librpma and Abseil from the prefix only" \
    test -z "$outside"
  [[ -z "$outside" ]] || echo "loaded from outside: $outside"

  # Verbs programs on the prefix's shim.
  if command -v ibv_devinfo >/dev/null; then
    run "${verbs_env[@]}" "$sim" run -- ibv_devinfo -l
    expect_in "$name: ibv_devinfo lists the simulated device" "$out" "softrpma_sim0"
  else
    echo "SKIP: $name: ibv_devinfo (ibverbs-utils is not installed)"
  fi
  if command -v ib_write_bw >/dev/null; then
    # perftest's -R client may connect its QPs before the server listens for them, and then
    # both give up (perftest's own race, README.md): a pair is started again, up to 3 times.
    local attempt server server_status tries
    for attempt in 1 2 3; do
      "${verbs_env[@]}" "$sim" run -- timeout 60 ib_write_bw -R -n 50 -p "$((p + attempt))" \
        >"$work/bw-server-$name" 2>&1 &
      server=$!
      tries=0
      # The client retries until the server listens (a refused connect exits at once).
      while :; do
        run "${verbs_env[@]}" "$sim" run -- timeout 60 ib_write_bw -R -n 50 \
          -p "$((p + attempt))" 127.0.0.1
        [[ "$status" != 0 ]] && ((++tries < 20)) && kill -0 "$server" 2>/dev/null || break
        sleep 0.5
      done
      wait "$server"
      server_status=$?
      [[ "$status" != 0 || "$server_status" != 0 ]] || break
      echo "$name: ib_write_bw -R pair, attempt $attempt: client $status, server $server_status"
      echo "$out$err" | tail -n 5
      tail -n 5 "$work/bw-server-$name"
    done
    expect_status "$name: ib_write_bw -R client" 0 "$status"
    expect_in "$name: ib_write_bw -R client's table" "$out" "#bytes"
    expect_status "$name: ib_write_bw -R server" 0 "$server_status"
  else
    echo "SKIP: $name: ib_write_bw (perftest is not installed)"
  fi
}

# 1. The install.
prefix="$work/prefix"
run "$here/stage.sh" "$tree" "$prefix" "${docs[@]}"
expect_status "stage.sh installs" 0 "$status"
[[ "$status" == 0 ]] || echo "$out$err"
for f in bin/rpma-sim include/librpma.h lib/softrpma/librpma.so.0 lib/softrpma/librpma.so \
  lib/softrpma/verbs-shim/libibverbs.so.1 lib/softrpma/verbs-shim/librdmacm.so.1 \
  lib/softrpma/verbs-shim/libmlx5.so.1 lib/softrpma/verbs-shim/libefa.so.1 \
  lib/pkgconfig/librpma.pc lib/cmake/softrpma/softrpma-config.cmake \
  lib/cmake/softrpma/softrpma-config-version.cmake lib/cmake/librpma/librpma-config.cmake \
  share/man/man1/rpma-sim.1 share/man/man7/softrpma-env.7 share/doc/softrpma/CI.md; do
  check "installed: $f" test -e "$prefix/$f"
done
check "installed: Abseil beside librpma.so.0" compgen -G "$prefix/lib/softrpma/libabsl_base.so.*"
# absl_outside FILE: the Abseil libraries ldd resolves for FILE outside the prefix (real paths).
absl_outside() {
  ldd "$1" | awk '$1 ~ /^libabsl_/ {print $3}' | while read -r lib; do
    [[ "$(readlink -f "$lib")" == "$(readlink -f "$prefix")/lib/softrpma/"* ]] || echo "$lib"
  done
}
deps="$(ldd "$prefix/lib/softrpma/librpma.so.0")"
check "ldd librpma.so.0: nothing unresolved" test -z "$(grep 'not found' <<<"$deps")"
check "ldd librpma.so.0: Abseil found (the check below looks at something)" \
  grep -q libabsl_ <<<"$deps"
for f in lib/softrpma/librpma.so.0 bin/rpma-sim lib/softrpma/verbs-shim/libibverbs.so.1; do
  outside="$(absl_outside "$prefix/$f")"
  check "ldd $f: Abseil only from the prefix" test -z "$outside"
  [[ -z "$outside" ]] || echo "$outside"
done
if command -v man >/dev/null; then
  for page in man1/rpma-sim.1 man7/softrpma-env.7; do
    MANWIDTH=100 man --warnings -l "$prefix/share/man/$page" >"$work/man.txt" 2>"$work/man.err"
    expect_status "man -l renders $page" 0 "$?"
    check "man -l $page: no roff warning" test ! -s "$work/man.err"
    check "man -l $page: has a SEE ALSO" grep -q "SEE ALSO" "$work/man.txt"
  done
else
  echo "SKIP: man -l (man-db is not installed)"
fi
# A second install over the first replaces it (a user upgrading in place).
run "$here/stage.sh" "$tree" "$prefix"
expect_status "stage.sh installs over an earlier install" 0 "$status"
# Refused: a directory that is not the tree.
run "$here/stage.sh" "$work" "$work/other"
check "stage.sh refuses a directory that is not softrpma's tree" test "$status" -ne 0
expect_in "stage.sh says what the tree is" "$err" "is not softrpma's tree"

# A prefix shared with other software keeps what is not softrpma's.
shared="$work/shared"
mkdir -p "$shared/bin" "$shared/include" "$shared/lib/pkgconfig"
touch "$shared/bin/other-tool" "$shared/include/other.h" "$shared/lib/pkgconfig/other.pc"
run "$here/stage.sh" "$tree" "$shared"
expect_status "stage.sh installs into a shared prefix" 0 "$status"
for f in bin/other-tool include/other.h lib/pkgconfig/other.pc; do
  check "a shared prefix keeps $f" test -e "$shared/$f"
done
check "a shared prefix gets rpma-sim" test -x "$shared/bin/rpma-sim"
run "$here/stage.sh" "$tree" /
check "stage.sh refuses / as the prefix" test "$status" -ne 0
expect_in "stage.sh says why it refuses /" "$err" "refusing / as the prefix"
run "$here/stage.sh" "$tree" "$work/a prefix"
check "stage.sh refuses a prefix with white space" test "$status" -ne 0
expect_in "stage.sh says why it refuses white space" "$err" "has white space"

uses_prefix installed "$prefix" "$port"

# 3. The packages.
run "$here/package.sh" "$tree" "$work/packages" "${docs[@]}"
expect_status "package.sh" 0 "$status"
[[ "$status" == 0 ]] || echo "$out$err"
deb="$(compgen -G "$work/packages/softrpma_*_*.deb" | head -n 1)"
tarball="$(compgen -G "$work/packages/softrpma-*-linux-*.tar.gz" | head -n 1)"
check "a .deb is made" test -n "$deb"
check "a .tar.gz is made" test -n "$tarball"
if [[ -n "$deb" ]]; then
  contents="$(dpkg-deb -c "$deb")"
  expect_in "the .deb holds /usr/bin/rpma-sim" "$contents" \
    "./usr/bin/rpma-sim -> ../lib/softrpma/bin/rpma-sim"
  expect_in "the .deb holds the library in its own prefix" "$contents" \
    "./usr/lib/softrpma/lib/softrpma/librpma.so.0"
  expect_in "the .deb holds rpma-sim(1)" "$contents" "./usr/share/man/man1/rpma-sim.1.gz"
  check "the .deb puts nothing in the loader's default directories" \
    test -z "$(grep -E '\./(usr/)?lib/(x86_64-linux-gnu/)?[^/]*\.so' <<<"$contents")"
  control="$(dpkg-deb -f "$deb" Package Version Depends)"
  expect_in "the .deb is softrpma" "$control" "Package: softrpma"
  for dep in libibverbs1 librdmacm1 "libstdc++6 (>= " "libc6 (>= "; do
    expect_in "the .deb depends on $dep" "$control" "$dep"
  done
  version="$("$prefix/bin/rpma-sim" --version | sed -n 's/^rpma-sim (softrpma) //p')"
  check "the .deb's version is rpma-sim's" test "$(dpkg-deb -f "$deb" Version)" = "$version"
  dpkg-deb -x "$deb" "$work/deb-root"
  run "$work/deb-root/usr/bin/rpma-sim" --version
  expect_status "the unpacked .deb: /usr/bin/rpma-sim (a symlink) runs" 0 "$status"
  uses_prefix deb "$work/deb-root/usr/lib/softrpma" "$((port + 10))"
fi
if [[ -n "$tarball" ]]; then
  mkdir -p "$work/unpacked"
  tar -C "$work/unpacked" -xzf "$tarball"
  top="$(compgen -G "$work/unpacked/softrpma-*" | head -n 1)"
  check "the .tar.gz holds one directory softrpma-VERSION" test -d "$top"
  uses_prefix tarball "$top" "$((port + 20))"
fi
finish
