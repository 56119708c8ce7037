#!/usr/bin/env bash
# Every row of tests/conformance/rpma-errors.tsv is claimed by a conformance test, and every row
# a test claims is in the spec, byte for byte: //tools:conformance --coverage_only (which runs
# no test; the tests themselves run as //tests/conformance:*_test).
set -euo pipefail
"$1" --coverage_only
