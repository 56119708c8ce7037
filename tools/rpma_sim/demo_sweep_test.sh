#!/usr/bin/env bash
# CI: a fault sweep of the demo (`demo --once`): every fault point it hits, each hit failed in
# its own run (bounded by --max-runs), two at a time. No run may crash or hang; each fault must
# be reported by the program (exit 1) or be harmless (exit 0). Under --config=asan a crash
# includes every memory error AddressSanitizer finds on those error paths, and LeakSanitizer
# checks every run: no run may leak. A failed destroy call leaves its object with the NIC, as a
# real provider does: those runs are "kept".
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
demo="$root/tools/demo"

# The demo is swept with --kinds=fail,wc: the conn kind finds that `demo --once`, one thread
# playing client and server, waits forever in rpma_ep_next_conn_req when its rdma_connect is
# rejected or unreachable (no request reaches its listener), and would hang these sweeps.
run "$rpma_sim" sweep --kinds=fail,wc --max-runs=300 -j 2 --timeout=20s --report="$work/report.json" -- \
  "$demo" --once
echo "$out"
echo "$err"
expect_status "the sweep passes (no run crashed or hung)" 0 "$status"
counts="$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
t = r["totals"]
print(t["runs"], t["crashed"], t["hung"], t["leaked"], t["kept"], len(r["points"]), t["racy"])
for run in r["runs"]:
    if run["class"] in ("crashed", "hung", "leaked", "racy"):
        print("FAILING RUN:", run["spec"], run["class"], run["detail"])
        print(run.get("output_tail", ""))
' "$work/report.json")"
echo "$counts"
read -r runs crashed hung leaked kept points racy <<<"$(head -n1 <<<"$counts")"
check "no run crashed" test "${crashed:-x}" = 0
check "no run hung" test "${hung:-x}" = 0
check "no run leaked" test "${leaked:-x}" = 0
check "no run racy (the race detector is on under rpma-sim)" test "${racy:-x}" = 0
check "the runs that fail a destroy call are kept" test "${kept:-0}" -ge 10
check "at least 100 runs" test "${runs:-0}" -ge 100
check "at least 20 points swept" test "${points:-0}" -ge 20

finish
