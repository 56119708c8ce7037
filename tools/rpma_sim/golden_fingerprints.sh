#!/usr/bin/env bash
# golden_fingerprints.sh RPMA_SIM DEMO SIM_TRACE_PROGRAM OUT_DIR: what golden_test pins,
# computed now, written to OUT_DIR as
#   fingerprints.txt         a line per run: its exit status, the trace's end line and what
#                            `rpma-sim trace` says of it (events, fingerprint, whether they match)
#                            for sim_trace_program with seeds 1 and 2, `demo --once` and
#                            `demo --once --reuse-early` with seeds 1 to 3;
#   demo_sweep_classes.txt   the class of every run of `rpma-sim sweep -- demo --once` (and of
#                            its clean run), a line "SPEC CLASS" each, sorted: no timings, no
#                            paths, nothing a run may vary.
# Every run is deterministic (single-threaded programs, given seeds), so the files are the same
# on every machine and every run; a change is a change of behaviour. golden_test.sh compares
# them with testdata/golden/; update_golden.sh rewrites testdata/golden/ with them.
# The programs come as arguments ($(rootpath ...) in BUILD, relative to the runfiles tree the
# script runs in: golden_test's, or its own under `bazel run`).
set -euo pipefail

if (($# != 4)); then
  echo "usage: golden_fingerprints.sh RPMA_SIM DEMO SIM_TRACE_PROGRAM OUT_DIR" >&2
  exit 2
fi
absolute() { if [[ "$1" == /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
rpma_sim="$(absolute "$1")"
demo="$(absolute "$2")"
trace_program="$(absolute "$3")"
out_dir="$4"
mkdir -p "$out_dir"
tmp="$(mktemp -d "${TEST_TMPDIR:-${TMPDIR:-/tmp}}/golden.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# fingerprint NAME RUN-FLAGS... -- PROGRAM ARGS...: one line of fingerprints.txt.
fingerprint() {
  local name="$1" status=0 end verdict
  shift
  "$rpma_sim" run --trace="$tmp/run.trace" "$@" >"$tmp/run.out" 2>"$tmp/run.err" || status=$?
  end="$(tail -n 1 "$tmp/run.trace")"
  verdict="$("$rpma_sim" trace "$tmp/run.trace" | sed -n 2p)"
  echo "$name: exit $status | $end | $verdict"
}

{
  echo "# golden_fingerprints.sh: NAME: exit STATUS | the trace's end line | rpma-sim trace's verdict"
  fingerprint "sim_trace_program seed 1" --seed=1 -- "$trace_program"
  fingerprint "sim_trace_program seed 2" --seed=2 -- "$trace_program"
  fingerprint "demo --once" -- "$demo" --once
  for seed in 1 2 3; do
    fingerprint "demo --once --reuse-early seed $seed" --seed="$seed" -- "$demo" --once --reuse-early
  done
} >"$out_dir/fingerprints.txt"

# The sweep: every hit of every point (no --max-runs); a generous timeout, so that a loaded
# machine does not turn a run into "hung".
status=0
# The demo is swept with --kinds=fail,wc: the conn kind finds that `demo --once`, one thread
# playing client and server, waits forever in rpma_ep_next_conn_req when its rdma_connect is
# rejected or unreachable (no request reaches its listener), and would hang these sweeps.
"$rpma_sim" sweep --kinds=fail,wc -j 2 --timeout=120s --report="$tmp/sweep.json" -- "$demo" --once \
  >"$tmp/sweep.out" 2>&1 || status=$?
if [[ ! -s "$tmp/sweep.json" ]]; then
  echo "golden_fingerprints.sh: the sweep wrote no report (exit $status):" >&2
  cat "$tmp/sweep.out" >&2
  exit 1
fi
python3 - "$tmp/sweep.json" "$status" >"$out_dir/demo_sweep_classes.txt" <<'PY'
import json
import sys

report = json.load(open(sys.argv[1]))
print("# golden_fingerprints.sh: rpma-sim sweep -- demo --once: SPEC CLASS per run, sorted")
print("sweep exit", sys.argv[2])
print("clean run", report["clean_run"]["class"])
for line in sorted("%s %s" % (run["spec"], run["class"]) for run in report["runs"]):
    print(line)
PY
