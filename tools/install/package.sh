#!/usr/bin/env bash
# package.sh TREE OUTDIR [DOC...]: softrpma as a Debian package and as a tarball, from TREE (the
# tree //api:librpma_pc builds), into OUTDIR:
#
#   softrpma_<version>_<arch>.deb         installs the prefix /usr/lib/softrpma (its own, so
#                                         librpma.so.0 never shadows the distro's librpma0),
#                                         /usr/bin/rpma-sim -> ../lib/softrpma/bin/rpma-sim, the
#                                         man pages in /usr/share/man, the docs in
#                                         /usr/share/doc/softrpma
#   softrpma-<version>-linux-<machine>.tar.gz   the prefix (tools/install/stage.sh's layout) in a
#                                         directory softrpma-<version>/, to unpack anywhere
#
# Both run without Bazel's output and without Abseil installed (stage.sh ships it beside
# librpma.so.0). The .deb depends on what the tree loads from the system: libibverbs1,
# librdmacm1, the C++ runtime (the GCC release whose GLIBCXX the tree needs) and libc6 (the
# newest GLIBC symbol version it uses). `./run package [DIR]` builds TREE with -c opt and runs
# this; //tools/install:install_test runs it on its configuration's tree.
set -euo pipefail

die() {
  echo "softrpma package: $*" >&2
  exit 1
}

(($# >= 2)) || die "usage: package.sh TREE OUTDIR [DOC...]"
tree="$1"
out="$2"
shift 2
here="$(cd "$(dirname "$0")" && pwd)"
command -v dpkg-deb >/dev/null || die "dpkg-deb is needed (Debian's dpkg)"
command -v objdump >/dev/null || die "objdump is needed (Debian's binutils)"
umask 022  # (dpkg-deb refuses a DEBIAN directory others cannot read)
mkdir -p "$out"
out="$(cd "$out" && pwd)"
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT

version="$("$tree/bin/rpma-sim" --version | sed -n 's/^rpma-sim (softrpma) \([0-9.]*\)$/\1/p')"
[[ -n "$version" ]] || die "$tree/bin/rpma-sim --version did not name softrpma's version"
arch="$(dpkg --print-architecture)"
machine="$(uname -m)"

# The tarball: the prefix as stage.sh installs it.
name="softrpma-$version"
"$here/stage.sh" "$tree" "$staging/tar/$name" "$@" >/dev/null
tarball="$out/$name-linux-$machine.tar.gz"
tar -C "$staging/tar" --owner=0 --group=0 --numeric-owner --sort=name -czf "$tarball" "$name"

# The .deb: the same prefix at /usr/lib/softrpma; what Debian keeps elsewhere moved there.
root="$staging/deb"
prefix="$root/usr/lib/softrpma"
mkdir -p "$prefix"
cp -a "$staging/tar/$name/." "$prefix/"  # (relocatable: the same files, $ORIGIN run paths)
mkdir -p "$root/usr/bin" "$root/usr/share/man" "$root/usr/share/doc" "$root/DEBIAN"
ln -s ../lib/softrpma/bin/rpma-sim "$root/usr/bin/rpma-sim"
mv "$prefix/share/man/man1" "$prefix/share/man/man7" "$root/usr/share/man/"
gzip -9n "$root"/usr/share/man/man*/*
if [[ -d "$prefix/share/doc/softrpma" ]]; then
  mv "$prefix/share/doc/softrpma" "$root/usr/share/doc/softrpma"
fi
rm -rf "$prefix/share"

# Depends: the newest symbol versions the tree's files need from libc and libstdc++.
needs() {  # PREFIX-OF-VERSION: the newest version of that family the ELF files use
  find "$prefix" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec objdump -T {} + 2>/dev/null |
    grep -oE "$1_[0-9.]+" | sed "s/^$1_//" | sort -V | tail -n 1
}
glibc="$(needs GLIBC)"
glibcxx="$(needs GLIBCXX)"
case "$glibcxx" in  # GLIBCXX_3.4.N first shipped with GCC's libstdc++6 of this release
  3.4.2[0-7] | "") gcc=9 ;;
  3.4.28) gcc=10 ;;
  3.4.29) gcc=11 ;;
  3.4.30) gcc=12 ;;
  3.4.31) gcc=13 ;;
  3.4.32) gcc=13.2 ;;
  *) die "the tree needs GLIBCXX_$glibcxx; add its GCC release to package.sh" ;;
esac
installed_size="$(du -sk --apparent-size "$root/usr" | cut -f1)"
cat >"$root/DEBIAN/control" <<EOF
Package: softrpma
Version: $version
Architecture: $arch
Maintainer: softrpma developers <softrpma@localhost>
Installed-Size: $installed_size
Depends: libc6 (>= $glibc), libstdc++6 (>= $gcc), libgcc-s1, libibverbs1, librdmacm1
Suggests: libibverbs-dev, librdmacm-dev, pkg-config
Section: libs
Priority: optional
Description: librpma 1.3 on a simulated RDMA NIC, for tests without hardware
 softrpma is a drop-in librpma.so.0 (in /usr/lib/softrpma/lib/softrpma, which the loader does
 not search by default, so the distro's librpma0 is never shadowed) with a simulated NIC:
 deterministic by seed, with fault injection at every verbs and rdma_cm call, and a verbs shim
 (libibverbs, librdmacm) that runs unmodified verbs programs on it. rpma-sim runs a program on
 the simulated NIC, injects faults and sweeps every fault point (rpma-sim(1),
 softrpma-env(7)). Build against it with PKG_CONFIG_PATH=/usr/lib/softrpma/lib/pkgconfig or
 CMAKE_PREFIX_PATH=/usr/lib/softrpma (find_package(softrpma 1.3)).
EOF
deb="$out/softrpma_${version}_$arch.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
echo "$tarball"
