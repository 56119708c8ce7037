#!/bin/bash
# Runs verbs_program (built against rdma-core's libraries) with the shim's directory on
# LD_LIBRARY_PATH; it checks shim.h's lists call by call. Also checks that it really ran on the
# shim (ldd names the shim's libraries).
# Usage: shim_program_test.sh <lib/libibverbs.so.1> <verbs_program>
set -u
libdir="$(cd "$(dirname "$1")" && pwd)"
program="$2"
if ! LD_LIBRARY_PATH="$libdir" ldd "$program" | grep -q "$libdir/libibverbs.so.1"; then
  echo "FAILED: $program does not load the shim: $(LD_LIBRARY_PATH="$libdir" ldd "$program")"
  exit 1
fi
# siw's port first (a profile of its own: RPMA_SIM_DEVICE=siw), then everything on the default.
env -u RPMA_SIM_FAULTS -u RPMA_SIM_SCENARIO RPMA_SIM_DEVICE=siw \
  RPMA_SIM_FABRIC="shim-program-siw-$$" LD_LIBRARY_PATH="$libdir" timeout 30 "$program" siw-port ||
  exit 1
env -u RPMA_SIM_DEVICE -u RPMA_SIM_FAULTS -u RPMA_SIM_SCENARIO RPMA_SIM_FABRIC="shim-program-$$" \
  LD_LIBRARY_PATH="$libdir" timeout 30 "$program"
