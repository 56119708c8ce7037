#!/usr/bin/env bash
# update_golden.sh: rewrites tools/rpma_sim/testdata/golden/ (what //tools/rpma_sim:golden_test
# pins) from the current code, and shows what changed. For a change of behaviour that is meant;
# commit the new files with it, saying why. Run from anywhere in the workspace. Extra arguments
# go to `bazel run` (e.g. -c opt).
set -euo pipefail
cd "$(dirname "$0")/../.."
golden="$PWD/tools/rpma_sim/testdata/golden"
bazel run "$@" //tools/rpma_sim:golden_fingerprints -- "$golden"
git --no-pager diff --stat -- "$golden" || true
git --no-pager diff -- "$golden" || true
