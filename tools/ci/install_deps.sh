#!/usr/bin/env bash
# Installs the Debian packages softrpma builds and tests with, only those that are missing.
# Idempotent: on a machine that has them all it changes nothing and needs no network.
set -euo pipefail

packages=(
  bazel-bootstrap    # Bazel 4.2.3, builds offline (see WORKSPACE)
  g++
  pkg-config         # how tools/bazel/system_library.bzl finds the libraries below
  python3            # tools/ci/count_tests.py
  python3-yaml       # tools/rpma_sim:ci_examples_test reads docs/examples' CI files
  libxml2-utils      # xmllint: tools/rpma_sim:junit_cli_test checks JUnit XML against a schema
  cmake              # tools/rpma_sim:cmake_recipe_test builds a CMake project against the tree
  man-db             # man -l: tools/rpma_sim:cli_test renders rpma-sim --man (brings groff-base)
  patchelf           # ./run install: the installed libraries find their Abseil beside them ($ORIGIN)
  libabsl-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  libibverbs-dev
  librdmacm-dev
  ibverbs-utils      # ibv_devices, ibv_devinfo: //simverbs/shim:devinfo_test runs them on the shim
  rdmacm-utils       # rping: the verbs shim's rdma_cm test
  perftest           # ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw, the _lat ones: //simverbs/shim:perftest_test
  libfabric-dev      # //tools:bench's baseline: libfabric's shm provider (tools/shm_baseline.h)
  libfabric-bin      # fi_pingpong: the bench's send/recv baseline; //simverbs/shim:fi_pingpong_test (verbs provider on the shim)
  ucx-utils          # ucx_info, ucx_perftest: //tools/rpma_sim:device_files_test (UCX's rc_verbs on the shim)
  openmpi-bin        # mpirun: //simverbs/shim:mpi_pingpong_test (Open MPI over libfabric's verbs provider on the shim)
  libopenmpi-dev     # mpicc, mpi.h: the same test builds its two-rank program
)
if [[ "${SOFTRPMA_WITH_DISTRO_LIBRPMA:-0}" == 1 ]]; then
  # Upstream librpma (Debian's 1.2), only for the tests that use it: librpma-dev's header and
  # -lrpma build programs the way a user's were (//tests/dropin:dropin_test runs one on ours;
  # //tests/differential:differential_test and //tools/rpma_sim:run_test run them on both), and
  # librpma0's librpma.so.0 is what `rpma-sim run --upstream-librpma` runs them on. Without
  # them those tests skip the cases that need them.
  packages+=(librpma0 librpma-dev)
fi
if [[ "${SOFTRPMA_WITH_FUZZ:-0}" == 1 ]]; then
  # Only for the libFuzzer binaries (bazel build --config=fuzz); the corpus tests use g++.
  packages+=(clang-14 libclang-rt-14-dev)
fi

missing=()
for package in "${packages[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null)" == *"install ok installed"* ]] ||
    missing+=("$package")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "softrpma: installing missing packages: ${missing[*]}" >&2
sudo=""
if [[ "$(id -u)" != 0 ]]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
