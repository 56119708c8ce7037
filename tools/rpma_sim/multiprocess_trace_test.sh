#!/usr/bin/env bash
# The traces of a run's processes (a server, and its client forked after rpma_ep_listen) merge
# into one Chrome timeline with a process each: `rpma-sim trace A B --chrome=OUT`. Each process is
# named by its role (RPMA_SIM_ROLE, else the executable's name; `%r` in RPMA_SIM_TRACE), and two
# processes of one role (a fork) by their files too.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
peer="$root/tests/multiprocess/peer"
export RPMA_SIM_FABRIC="trace-test-$$"
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}die_after_fork=0"

run "$rpma_sim" run --trace="$work/run.%p.trace" -- "$peer" fork 127.0.0.1 7701
expect_status "the forking harness runs under rpma-sim" 0 "$status"
expect_in "its child served" "$out" "child client: ok"
traces=("$work"/run.*.trace)
check "a trace per process" test "${#traces[@]}" = 2

run "$rpma_sim" trace "${traces[@]}"
expect_status "several traces without --chrome are a usage error" 2 "$status"
expect_in "which says what to give" "$err" "give --chrome=OUT.json"

run "$rpma_sim" trace "${traces[@]}" --chrome="$work/merged.json"
expect_status "the traces merge" 0 "$status"
expect_in "it says how many processes" "$out" "2 processes"
run python3 "$testdata/check_chrome_trace.py" "$work/merged.json" 4
expect_status "the merged timeline is valid Chrome Trace Event JSON" 0 "$status"
summary="$(python3 -c '
import json, sys
doc = json.load(open(sys.argv[1]))
names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
         if e["ph"] == "M" and e["name"] == "process_name"}
slices = {}
for e in doc["traceEvents"]:
    if e["ph"] == "X":
        slices[e["pid"]] = slices.get(e["pid"], 0) + 1
print(len(names), len(doc["otherData"]["processes"]), min(slices.get(p, 0) for p in names))
print("|".join(sorted(n.rsplit(" (seed ", 1)[0] for n in names.values())))
' "$work/merged.json")"
echo "$summary"
read -r processes listed min_slices <<<"$(sed -n 1p <<<"$summary")"
check "a process per trace" test "${processes:-0}" = 2
check "both listed in otherData" test "${listed:-0}" = 2
check "each process has work-request slices" test "${min_slices:-0}" -ge 2
check "a role two processes share is followed by each one's file" \
  grep -qE '^peer \(run\.[0-9]+\.trace\)\|peer \(run\.[0-9]+\.trace\)$' <<<"$(sed -n 2p <<<"$summary")"

# --- two roles: %r names the files, the trace names its process ---
server="$root/tools/rpma_sim/aborting_server"
run "$rpma_sim" run --trace="$work/pair.%r.trace" -- "$testdata/aborting_pair.sh" "$server" 7702 abort
expect_status "a server and a client under rpma-sim" 0 "$status"
check "%r: the server's trace" test -s "$work/pair.server.trace"
check "%r: the client's trace" test -s "$work/pair.client.trace"
check "the trace names its process" test "$(sed -n 4p "$work/pair.server.trace")" = "process server"
run "$rpma_sim" trace "$work/pair.client.trace" "$work/pair.server.trace" --chrome="$work/pair.json"
expect_status "the pair's traces merge" 0 "$status"
names="$(python3 -c '
import json, sys
doc = json.load(open(sys.argv[1]))
print(" ".join(e["args"]["name"] for e in doc["traceEvents"]
               if e["ph"] == "M" and e["name"] == "process_name"))' "$work/pair.json")"
expect_in "Perfetto's processes are the roles" "$names" "client (seed 0x736f667472706d61) server (seed 0x736f667472706d61)"
finish
