#!/bin/bash
# The shim's two libraries as the dynamic linker sees them: rdma-core 44's sonames; every
# public function of Debian's libibverbs.so.1 / librdmacm.so.1 (their default @@ versions,
# read from the installed libraries) exported with the same version; nothing else exported but
# ibv_query_gid_type and softrpma_shim_*; and no DT_NEEDED that could recurse into the
# real libraries or into the shim itself (libibverbs.so.1 needs neither; librdmacm.so.1 needs
# only libibverbs.so.1, the shim's beside it). The stub direct-verbs libraries
# libmlx5.so.1 and libefa.so.1: rdma-core 44's sonames, every function of the real ones with
# its default version and nothing else, and no DT_NEEDED on any rdma-core library (libc only,
# and the sanitizer runtime under --config=asan). libibverbs.so.1, which holds the simulator and
# its threads, is NODELETE.
# Usage: shim_libs_test.sh <lib/libibverbs.so.1> <lib/librdmacm.so.1> <lib/libmlx5.so.1>
#          <lib/libefa.so.1>
set -u
verbs="$1"
rdmacm="$2"
mlx5="$3"
efa="$4"
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
real_dir=/usr/lib/x86_64-linux-gnu

defined() {  # defined <lib>: its defined dynamic symbols as name@@VERSION, sorted
  readelf --dyn-syms -W "$1" | awk '$7 != "UND" && $8 ~ /@@/ {print $8}' | sort
}
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
soname() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }

[[ "$(soname "$verbs")" == libibverbs.so.1 ]] || fail "libibverbs soname: $(soname "$verbs")"
[[ "$(soname "$rdmacm")" == librdmacm.so.1 ]] || fail "librdmacm soname: $(soname "$rdmacm")"
# The simulator's threads outlive any dlclose: libibverbs.so.1 is never unmapped (NODELETE).
readelf -d "$verbs" | grep -q "FLAGS_1.*NODELETE" ||
  fail "libibverbs.so.1 is not NODELETE: a dlclose would unmap the code its fabric thread runs"

if needed "$verbs" | grep -Eq '^lib(ibverbs|rdmacm)\.so'; then
  fail "the shim's libibverbs needs: $(needed "$verbs" | tr '\n' ' ')"
fi
if needed "$rdmacm" | grep -q '^librdmacm\.so'; then
  fail "the shim's librdmacm needs itself"
fi
for stub in "$mlx5" "$efa"; do
  name="$(basename "$stub")"
  [[ "$(soname "$stub")" == "$name" ]] || fail "$name soname: $(soname "$stub")"
  # libc (and a sanitizer's runtime under --config=asan / tsan), never an rdma-core library.
  if needed "$stub" | grep -Eq '^lib(ibverbs|rdmacm|mlx4|mlx5|efa|mana)\.so'; then
    fail "the stub $name needs: $(needed "$stub" | tr '\n' ' ')"
  fi
done
needed "$rdmacm" | grep -qx 'libibverbs.so.1' ||
  fail "the shim's librdmacm does not need libibverbs.so.1"

compare() {  # compare <real> <shim> <allowed extra regex>
  local real="$1" shim="$2" extra="$3"
  local missing
  missing="$(comm -23 <(defined "$real" | grep -v "@@IBVERBS_PRIVATE_") <(defined "$shim"))"
  [[ -z "$missing" ]] || fail "$(basename "$shim") lacks: $(echo $missing)"
  local unexpected
  unexpected="$(comm -13 <(defined "$real") <(defined "$shim") | grep -Ev "$extra")"
  [[ -z "$unexpected" ]] || fail "$(basename "$shim") also exports: $(echo $unexpected)"
}
if [[ -e "$real_dir/libibverbs.so.1" && -e "$real_dir/librdmacm.so.1" ]]; then
  compare "$(readlink -f "$real_dir/libibverbs.so.1")" "$verbs" \
    '^softrpma_shim_(backend|qp_made|qp_gone)@@SOFTRPMA_SHIM_PRIVATE_1$'
  compare "$(readlink -f "$real_dir/librdmacm.so.1")" "$rdmacm" '^$'
  for stub in "$mlx5" "$efa"; do
    if [[ -e "$real_dir/$(basename "$stub")" ]]; then
      compare "$(readlink -f "$real_dir/$(basename "$stub")")" "$stub" '^$'
    else
      fail "$real_dir/$(basename "$stub") is not installed (ibverbs-providers): nothing to compare with"
    fi
  done
  defined "$verbs" | grep -qx 'ibv_query_gid_type@@IBVERBS_PRIVATE_34' ||
    fail "ibv_query_gid_type@@IBVERBS_PRIVATE_34 (ibv_devinfo's) is not exported"
else
  fail "rdma-core's libraries are not in $real_dir (libibverbs1, librdmacm1): nothing to" \
    "compare with"
fi

# Loaded in place of the real ones, the shim resolves everything it refers to.
dir="$(cd "$(dirname "$verbs")" && pwd)"
for lib in "$verbs" "$rdmacm" "$mlx5" "$efa"; do
  out="$(LD_LIBRARY_PATH="$dir" timeout 20 ldd -r "$lib" 2>&1)"
  if grep -q "undefined symbol\|not found" <<<"$out"; then fail "ldd -r $lib: $out"; fi
done

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: sonames, symbol versions, DT_NEEDED and NODELETE of the shim and the stub libmlx5 / libefa"
