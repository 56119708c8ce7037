#!/bin/bash
# exports_test: librpma.so.0 exports exactly the librpma 1.0 ABI: the 84 functions of
# testdata/librpma-1.0-symbols.txt, each under version LIBRPMA_1.0, and nothing else.
set -euo pipefail

lib="$1"
expected="$2"

actual_all="$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort)"
# The version node itself shows up as an absolute symbol.
versioned="$(grep -v '^LIBRPMA_1.0$' <<<"$actual_all")"

status=0
if grep -v '@@LIBRPMA_1.0$' <<<"$versioned" >/dev/null; then
  echo "FAIL: symbols exported outside version LIBRPMA_1.0:"
  grep -v '@@LIBRPMA_1.0$' <<<"$versioned"
  status=1
fi
names="$(sed 's/@@LIBRPMA_1.0$//' <<<"$versioned" | sort)"
if ! diff <(sort "$expected") <(echo "$names"); then
  echo "FAIL: exported names differ from $expected (< expected, > exported)"
  status=1
fi
if [[ "$(readelf -d "$lib")" != *'Library soname: [librpma.so.0]'* ]]; then
  echo "FAIL: soname is not librpma.so.0"
  status=1
fi
count="$(wc -l <<<"$names")"
if [[ $status -eq 0 ]]; then
  echo "PASS: $count functions exported under LIBRPMA_1.0"
fi
exit $status
