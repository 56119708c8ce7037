#!/usr/bin/env bash
# run_fuzzers.sh TARGET...: runs each libFuzzer binary (//pkg:<name>_fuzzer, built already with
# --config=fuzz) for SOFTRPMA_FUZZ_SECONDS seconds (default 60) on a scratch copy of its seed
# corpus (the <name>_corpus filegroup of fuzz.bzl), so that nothing is written into the tree.
# Run from the workspace root (README.md, Fuzzing; .ci/run).
#
# Prints one line per target (`fuzz <target>: ok, <runs> runs, <corpus> inputs` or `FOUND ...`)
# and, for a finding, libFuzzer's report, the reproducer's path (kept; the scratch directory is
# removed only when nothing was found) and its bytes in base64, to add to the seeds with the
# fix. The last line is `fuzz: N passed, N failed` (one case per target); exits 1 when a target
# found something.
set -uo pipefail

seconds="${SOFTRPMA_FUZZ_SECONDS:-60}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "run_fuzzers.sh: SOFTRPMA_FUZZ_SECONDS=$seconds: expected a number of seconds" >&2
  exit 2
fi
bin_dir=$(bazel info --config=fuzz bazel-bin 2>/dev/null) || { echo "run_fuzzers.sh: bazel info failed" >&2; exit 2; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/softrpma-fuzz.XXXXXX") || exit 2

passed=0
failed=0
for target in "$@"; do
  pkg="${target#//}"
  pkg="${pkg%%:*}"
  name="${target##*:}"
  base="${name%_fuzzer}"
  work="$scratch/$base"
  mkdir -p "$work/corpus" "$work/artifacts"
  # The seeds: the labels of the corpus filegroup, as paths from the workspace root.
  seeds=$(bazel query --noshow_progress "labels(srcs, //$pkg:${base}_corpus)" 2>/dev/null)
  while IFS= read -r label; do
    [[ -z "$label" ]] && continue
    path="${label#//}"
    path="${path/://}"
    cp "$path" "$work/corpus/" || { echo "run_fuzzers.sh: cannot copy seed $path" >&2; exit 2; }
  done <<<"$seeds"
  # -timeout: one input running 30 s is a hang; the outer timeout is a last resort against a
  # fuzzer that does not stop itself.
  (cd "$work" && timeout --kill-after=30 $((seconds * 2 + 120)) "$bin_dir/$pkg/$name" \
    -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" corpus) >"$work/log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  inputs=$(find "$work/corpus" -type f | wc -l)
  if ((rc == 0)); then
    echo "fuzz $target: ok, ${runs:-?} runs in ${seconds} s, $inputs inputs in the corpus"
    passed=$((passed + 1))
    continue
  fi
  failed=$((failed + 1))
  echo "fuzz $target: FOUND something (exit $rc) in ${runs:-?} runs; libFuzzer's report:"
  grep -v '^#[0-9]' "$work/log" | tail -60 | sed 's/^/  /'
  found_any=0
  for artifact in "$work"/artifacts/*; do
    [[ -f "$artifact" ]] || continue
    case "$(basename "$artifact")" in slow-unit-*) continue ;; esac
    found_any=1
    echo "  reproducer: $artifact (add it to $pkg's testdata/fuzz/$base seeds with the fix)"
    echo "  base64: $(base64 -w0 "$artifact")"
  done
  ((found_any)) || echo "  (no reproducer written: see $work/log)"
done
if ((failed == 0)); then rm -rf "$scratch"; else echo "fuzz: findings kept under $scratch"; fi
echo "fuzz: ${passed} passed, ${failed} failed"
((failed == 0))
