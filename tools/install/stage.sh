#!/usr/bin/env bash
# stage.sh TREE PREFIX [DOC...]: installs softrpma from TREE (the tree //api:librpma_pc builds:
# bin/rpma-sim, include/, lib/softrpma/ with the verbs shim, lib/pkgconfig/, lib/cmake/) into
# PREFIX, so that it runs with neither Bazel's output nor the system's Abseil:
#
#   PREFIX/bin/rpma-sim
#   PREFIX/include/librpma.h
#   PREFIX/lib/softrpma/librpma.so.0, librpma.so, libabsl_*.so.*   (the Abseil it was linked with)
#   PREFIX/lib/softrpma/verbs-shim/lib{ibverbs,rdmacm,mlx5,efa}.so.1
#   PREFIX/lib/pkgconfig/librpma.pc, PREFIX/lib/cmake/{softrpma,librpma}/
#   PREFIX/share/man/man1/rpma-sim.1, PREFIX/share/man/man7/softrpma-env.7
#   PREFIX/share/doc/softrpma/ (the DOC files)
#
# Every ELF file finds what it needs in the tree through an $ORIGIN run path (patchelf): the
# libraries in lib/softrpma/ find each other, the shim finds lib/softrpma/, rpma-sim finds
# lib/softrpma/. What is left to the system is what the package depends on: libibverbs1,
# librdmacm1 (and libnl, theirs), the C++ runtime and libc. The last step checks exactly that
# and fails, naming the library, when something else would be loaded from outside PREFIX.
# `./run install PREFIX` and `./run package` (tools/install/package.sh) use this; so does
# //tools/install:install_test, on the tree of the configuration it is built in.
set -euo pipefail

die() {
  echo "softrpma install: $*" >&2
  exit 1
}

(($# >= 2)) || die "usage: stage.sh TREE PREFIX [DOC...]"
tree="$1"
prefix="$2"
shift 2
[[ -x "$tree/bin/rpma-sim" && -e "$tree/lib/softrpma/librpma.so.0" ]] ||
  die "$tree is not softrpma's tree (bazel build -c opt //api:librpma_pc makes it)"
command -v patchelf >/dev/null || die "patchelf is needed (apt-get install patchelf)"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd -P)"  # (as $ORIGIN will see it: symlinks resolved)
[[ "$prefix" != / ]] || die "refusing / as the prefix: give softrpma a prefix of its own"
[[ "$prefix" != *[[:space:]]* ]] || die "the prefix '$prefix' has white space; choose another"

# The tree, as files (Bazel's outputs are read-only). Only softrpma's own paths are replaced:
# a prefix shared with other software (~/.local, /usr/local) keeps everything else.
for file in bin/rpma-sim include/librpma.h lib/pkgconfig/librpma.pc; do
  mkdir -p "$(dirname "$prefix/$file")"
  rm -f "$prefix/$file"
  cp -L "$tree/$file" "$prefix/$file"
  chmod u+w "$prefix/$file"
done
for dir in lib/softrpma lib/cmake/softrpma lib/cmake/librpma; do
  rm -rf "${prefix:?}/$dir"
  mkdir -p "$prefix/$dir"
  cp -RL "$tree/$dir/." "$prefix/$dir/"
  chmod -R u+w "$prefix/$dir"
done
rm -f "$prefix/lib/softrpma/librpma.so"
ln -s librpma.so.0 "$prefix/lib/softrpma/librpma.so"

# The ELF files of the tree.
elves=("$prefix/bin/rpma-sim" "$prefix/lib/softrpma/librpma.so.0"
  "$prefix"/lib/softrpma/verbs-shim/*.so.1)

# Abseil: every libabsl_* the tree's ELF files load (ldd follows their dependencies), copied
# beside librpma.so.0 under its soname.
mapfile -t absl < <(for elf in "${elves[@]}"; do ldd "$elf"; done |
  awk '$1 ~ /^libabsl_/ && $3 ~ /^\// {print $3}' | sort -u)
for lib in "${absl[@]}"; do
  install -m 0644 "$(readlink -f "$lib")" "$prefix/lib/softrpma/$(basename "$lib")"
done

# Run paths: each file finds the tree's libraries relative to where it is.
for lib in "$prefix/lib/softrpma/librpma.so.0" "$prefix"/lib/softrpma/libabsl_*; do
  [[ -e "$lib" ]] || continue
  patchelf --set-rpath '$ORIGIN' "$lib"
done
for lib in "$prefix"/lib/softrpma/verbs-shim/*.so.1; do
  patchelf --set-rpath '$ORIGIN:$ORIGIN/..' "$lib"
done
patchelf --set-rpath '$ORIGIN/../lib/softrpma' "$prefix/bin/rpma-sim"

# Man pages, from the tables --help prints.
mkdir -p "$prefix/share/man/man1" "$prefix/share/man/man7"
"$prefix/bin/rpma-sim" --man >"$prefix/share/man/man1/rpma-sim.1"
"$prefix/bin/rpma-sim" --man-env >"$prefix/share/man/man7/softrpma-env.7"

if (($# > 0)); then
  rm -rf "$prefix/share/doc/softrpma"
  mkdir -p "$prefix/share/doc/softrpma"
  for doc in "$@"; do install -m 0644 "$doc" "$prefix/share/doc/softrpma/"; done
fi

# What each file would load from outside the tree: only the system's verbs, libnl (theirs),
# the C++ runtime, libc and the sanitizer runtimes of a sanitizer build.
allowed='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s'
allowed+='|libibverbs|librdmacm|libnl-3|libnl-route-3|libasan|libtsan|libubsan)[-.]'
bad=0
for elf in "${elves[@]}" "$prefix"/lib/softrpma/libabsl_*; do
  [[ -e "$elf" ]] || continue
  while read -r name _ path _; do
    name="${name##*/}"
    if [[ "$name" == statically ]]; then  # (a library with no dependencies)
      :
    elif [[ "$path" == "not" ]]; then
      echo "softrpma install: $elf: $name is not found" >&2
      bad=1
    elif [[ "$path" == "$prefix/"* ]]; then
      :
    elif [[ ! "$name" =~ $allowed ]]; then
      echo "softrpma install: $elf loads $name from $path, outside $prefix" >&2
      bad=1
    fi
  done < <(env -u LD_LIBRARY_PATH ldd "$elf" | awk '{print $1, $2, $3, $4}')
done
((bad == 0)) || die "the installed tree would load libraries from outside $prefix (above)"
echo "softrpma installed in $prefix ($("$prefix/bin/rpma-sim" --version | head -n 1))"
