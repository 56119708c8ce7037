#!/bin/bash
# Open MPI 4.1 (Debian's openmpi-bin, not rebuilt) over libfabric's verbs provider on the
# simulated NIC, through `rpma-sim run` (which puts the shim on the library path; no
# LD_PRELOAD): mpirun starts two ranks of mpi_pingpong.c (built here with Debian's mpicc) with
# `--mca pml cm --mca mtl ofi` and FI_PROVIDER=verbs, so every message goes over
# "verbs;ofi_rxm" on the shim. Both ranks check every byte of 8 B, 4 KiB and 1 MiB messages;
# the run must exit 0 (MPI_Finalize included: libfabric and Open MPI dlclose the shim's users
# there), each rank print its line with 0 data errors, and the OFI MTL name the verbs provider.
# A second run without the shim must fail to select the cm PML: the first one's messages went
# over the simulated NIC, not a fallback. Then the same ranks with `--mca pml ucx` over UCX's
# rc_verbs + ud_verbs (UCP wires up over UD) on the simulated NIC, through `rpma-sim run
# --device-files` (UCX looks for the device node), where this machine allows it. Without Open MPI
# the test says so and passes; under a sanitizer build too (Open MPI's memory hooks and a
# preloaded sanitizer runtime do not mix).
# Usage: mpi_pingpong_test.sh <rpma-sim> <librpma.so.0> <lib/libibverbs.so.1 of verbs_lib_dir>
#                             <mpi_pingpong.c>
set -u
# shellcheck source=simverbs/shim/testlib.sh
source "$(dirname "$0")/testlib.sh"
rpma_sim="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
rpma_lib="$(cd "$(dirname "$2")" && pwd)"
source_file="$4"
shim_test_init "$3"
for tool in mpirun mpicc; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIPPED: $tool is not installed (packages openmpi-bin, libopenmpi-dev: tools/ci/install_deps.sh)"
    exit 0
  fi
done
if [[ -n "${LD_PRELOAD:-}" ]]; then
  echo "SKIPPED: the shim is sanitizer-built (its runtime must be preloaded, which Open MPI does not bear)"
  exit 0
fi
program="$dir/mpi_pingpong"
mpicc -O1 -o "$program" "$source_file" || { echo "FAILED: mpicc could not build $source_file"; exit 1; }

mpi=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml cm --mca mtl ofi --mca btl self
  --mca mtl_ofi_verbose 100 -x FI_PROVIDER=verbs)
use_shim mpi-pingpong
timeout 120 "$rpma_sim" run --lib="$rpma_lib" --verbs-lib="$libdir" -- "${mpi[@]}" "$program" \
  >"$dir/run.out" 2>&1
rc=$?
[[ "$rc" == 0 ]] || fail "mpirun exited $rc: $(tail -40 "$dir/run.out")"
for rank in 0 1; do
  grep -q "^rank $rank: 60 checked messages, 0 data errors$" "$dir/run.out" ||
    fail "rank $rank did not report 60 checked messages without errors: $(tail -40 "$dir/run.out")"
done
grep -q "mtl:ofi:prov: verbs;ofi_rxm" "$dir/run.out" ||
  fail "the OFI MTL did not choose verbs;ofi_rxm: $(grep -i "mtl:ofi" "$dir/run.out" | head)"

# UCX's PML: UCP over rc_verbs + ud_verbs only (no shared memory, no TCP), so both ranks' messages
# cross the simulated NIC.
ucx=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx --mca btl self --mca osc ^ucx
  -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=softrpma_sim0:1)
if ! command -v ucx_info >/dev/null; then
  echo "SKIPPED (pml ucx): UCX is not installed (ucx-utils: tools/ci/install_deps.sh)"
elif ! "$rpma_sim" run --device-files -- true 2>/dev/null; then
  echo "SKIPPED (pml ucx): this machine refuses rpma-sim run --device-files (docs/RPMA_SIM.md)"
else
  timeout 120 "$rpma_sim" run --device-files --lib="$rpma_lib" --verbs-lib="$libdir" -- \
    "${ucx[@]}" "$program" >"$dir/ucx.out" 2>&1
  rc=$?
  [[ "$rc" == 0 ]] || fail "mpirun --mca pml ucx exited $rc: $(tail -40 "$dir/ucx.out")"
  for rank in 0 1; do
    grep -q "^rank $rank: 60 checked messages, 0 data errors$" "$dir/ucx.out" ||
      fail "pml ucx: rank $rank did not report 60 checked messages: $(tail -40 "$dir/ucx.out")"
  done
fi

# Without the shim (this machine has no RDMA device): no verbs provider, so no cm PML.
env -u LD_LIBRARY_PATH timeout 120 "${mpi[@]}" "$program" >"$dir/without.out" 2>&1
rc=$?
[[ "$rc" != 0 ]] || fail "without the shim the run succeeded too: it did not need the simulated NIC"

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: Open MPI's two ranks ping-ponged 8 B, 4 KiB and 1 MiB messages with checked data over libfabric's verbs provider (and UCX's rc_verbs + ud_verbs) on the simulated NIC"
