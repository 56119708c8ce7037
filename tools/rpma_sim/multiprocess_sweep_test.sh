#!/usr/bin/env bash
# A fault sweep of a program that is TWO PROCESSES: a script that starts a server and a client
# (tests/multiprocess/pair.sh, each named by RPMA_SIM_ROLE). The clean run counts the hits of
# every point in both processes; each (program, point, hit) is then failed in its own run
# (prog=), every run on a fabric of its own so that runs side by side do not meet.
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
peer="$root/tests/multiprocess/peer"
pair="$root/tests/multiprocess/pair.sh"

# (--kinds=fail: the plan across programs is what this test is about; other kinds below.)
run "$rpma_sim" sweep -j 2 --timeout=20s --kinds=fail --report="$work/report.json" -- "$pair" "$peer" 7601
echo "$out"
echo "$err"
expect_status "the sweep passes (no run in which a process crashed or hung)" 0 "$status"
expect_in "the clean run counted both processes" "$out" "the clean run's 2 processes hit fault points"
expect_in "the table has the client's points" "$out" "client:rdma_connect"
expect_in "the table has the server's points" "$out" "server:rdma_accept"
summary="$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
progs = sorted({p["prog"] for p in r["points"]})
specs = [run["spec"] for run in r["runs"]]
print(" ".join(progs))
print(sum(p["hits"] for p in r["points"]), len(specs), len(set(specs)))
print("ok" if all(s.endswith(":prog=client") or s.endswith(":prog=server") for s in specs) else "bad")
print([run["replay"] for run in r["runs"] if "rdma_accept" in run["spec"]][0])
kept = [run for run in r["runs"] if run["class"] == "kept"]
print(len([k for k in kept if k["prog"] == "client"]), len([k for k in kept if k["prog"] == "server"]),
      all(k["kept_objects"] >= 1 for k in kept), r["totals"]["kept"] == len(kept))
' "$work/report.json")"
echo "$summary"
check "points of both programs" test "$(sed -n 1p <<<"$summary")" = "client server"
read -r hits runs distinct <<<"$(sed -n 2p <<<"$summary")"
check "one run per hit of every point that can fail, each its own" test "${runs:-0}" = "${distinct:-x}"
check "at least 100 runs" test "${runs:-0}" -ge 100
check "every run fails a point of one program (prog=)" test "$(sed -n 3p <<<"$summary")" = ok
replay="$(sed -n 4p <<<"$summary")"
expect_in "the replay line names the program" "$replay" "--faults='rdma_accept:fail=EIO:nth=1:prog=server'"
# A failed destroy call in either process leaves its object with that process's NIC: the
# run's stats files (one per process) say so, and the run is kept.
read -r kept_client kept_server kept_counted kept_totals <<<"$(sed -n 5p <<<"$summary")"
check "kept runs in the client" test "${kept_client:-0}" -ge 1
check "kept runs in the server" test "${kept_server:-0}" -ge 1
check "every kept run counted its objects, and the totals agree" \
  test "${kept_counted:-x} ${kept_totals:-x}" = "True True"

# The replay line reproduces that run: the server's accept fails, and the pair says so.
run "$rpma_sim" run --faults='rdma_accept:fail=EIO:nth=1:prog=server' -- "$pair" "$peer" 7602
expect_status "the replayed run fails as the sweep said (nonzero)" 1 "$status"
expect_in "the server reports the injected failure" "$err$out" "rdma_accept:fail=EIO (hit 1)"

# The kill kind: each process killed at its hits (a bounded sample). The survivor's handling of
# a dead peer is what is swept; the killed process is not a crash of the program.
run "$rpma_sim" sweep -j 2 --timeout=20s --kinds=kill --max-runs=8 --report="$work/kill.json" \
  -- "$pair" "$peer" 7603
echo "$out"
echo "$err"
expect_status "the kill sweep passes (a killed process is the fault, not a crash)" 0 "$status"
kill_summary="$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
runs = r["runs"]
print(len(runs), all(":kill" in run["spec"] for run in runs),
      any(run["class"] == "crashed" for run in runs))
' "$work/kill.json")"
echo "$kill_summary"
check "8 kill runs, none crashed" test "$kill_summary" = "8 True False"

# `report merge` of a two-process sweep run in 2 shards is the unsharded sweep's report: every
# entry, the not-swept calls included, names its program, and the clean runs' counts are
# compared per (program, point) (issue 20, item 5).
#
# Two processes are not deterministic yet (their interleaving is the OS scheduler's, issue 22):
# a server's clean run may poll its CQ once more in one shard than in another, and with
# --max-runs the plan follows the counts. So when the reports differ and the three clean runs
# counted different hits, the three sweeps are tried again (up to 3 times); reports that differ
# from clean runs that agree, or three disagreements in a row, fail the test.
compare_sweeps() {  # whole.json merged.json part1.json part2.json
  python3 -c '
import json, sys
def key(path):
    # Run outcomes left out: they follow the scheduler (above). The plan, the points and the
    # not-swept calls of each program must be the same.
    r = json.load(open(path))
    runs = sorted((x["prog"], x["point"], x["nth"], x["spec"]) for x in r["runs"])
    points = sorted((p["prog"], p["point"], p["runs"]) for p in r["points"])
    not_swept = sorted((p["prog"], p["point"], p["reason"]) for p in r["not_swept"])
    return (points, not_swept, r["totals"]["runs"], runs, r["plan_runs"])
def counts(path):
    r = json.load(open(path))
    return sorted((p["prog"], p["point"], p["hits"]) for p in r["points"] + r["not_swept"])
whole, merged = key(sys.argv[1]), key(sys.argv[2])
print("named" if all(p["prog"] for p in json.load(open(sys.argv[1]))["not_swept"]) else "unnamed")
agree = counts(sys.argv[1]) == counts(sys.argv[3]) == counts(sys.argv[4])
print("same" if whole == merged else
      "counts differ" if not agree else "differ: %r %r" % (whole, merged))
' "$@"
}
for attempt in 1 2 3; do
  run "$rpma_sim" sweep -j 2 --timeout=20s --max-runs=30 --report="$work/whole2.json" \
    -- "$pair" "$peer" 7604
  expect_status "the bounded sweep passes" 0 "$status"
  for k in 1 2; do
    run "$rpma_sim" sweep -j 2 --timeout=20s --max-runs=30 --shard="$k/2" \
      --report="$work/part$k.json" -- "$pair" "$peer" 7604
    expect_status "shard $k of 2 passes" 0 "$status"
  done
  run "$rpma_sim" report merge --report="$work/merged2.json" "$work/part1.json" "$work/part2.json"
  echo "$out"
  echo "$err"
  expect_status "the merge passes" 0 "$status"
  # A determinism warning may be true (above); what must hold is that it names the program of
  # the point it compares.
  warnings="$(grep 'not deterministic' <<<"$out$err" || true)"
  echo "warnings: ${warnings:-none}"
  check "a determinism warning names the program of its point" \
    bash -c '! grep -v -E "hit (client|server):[a-z_]+ " <<<"$1" | grep -q .' _ "$warnings"
  compare="$(compare_sweeps "$work/whole2.json" "$work/merged2.json" "$work/part1.json" \
    "$work/part2.json")"
  echo "attempt $attempt: $compare"
  [[ "$(sed -n 2p <<<"$compare")" == "counts differ" ]] || break
done
check "the merged report equals the unsharded one" test "$(sed -n 2p <<<"$compare")" = same
check "every not-swept entry names its program" test "$(sed -n 1p <<<"$compare")" = named

# One plan for every shard (--plan-only, then --plan-from): the shards and the unsharded sweep
# plan the same runs whatever their own clean runs counted, so the merge equals the unsharded
# report on the first try.
run "$rpma_sim" sweep -j 2 --timeout=20s --max-runs=30 --plan-only --report="$work/plan.json" \
  -- "$pair" "$peer" 7605
expect_status "the plan is made" 0 "$status"
expect_in "the plan says it ran no fault" "$out" "plan only: no fault run"
check "the plan's report has no run, and the plan's size" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["runs"] == [] and r["plan_runs"] == 30 and r["points"] else 1)
' "$work/plan.json"
run "$rpma_sim" sweep -j 2 --timeout=20s --max-runs=30 --plan-from="$work/plan.json" \
  --report="$work/whole3.json" -- "$pair" "$peer" 7605
expect_status "the unsharded sweep of the plan passes" 0 "$status"
for k in 1 2; do
  run "$rpma_sim" sweep -j 2 --timeout=20s --max-runs=30 --plan-from="$work/plan.json" \
    --shard="$k/2" --report="$work/plan$k.json" -- "$pair" "$peer" 7605
  expect_status "shard $k of 2 of the plan passes" 0 "$status"
done
run "$rpma_sim" report merge --report="$work/merged3.json" "$work/plan1.json" "$work/plan2.json"
expect_status "the merge of the plan's shards passes" 0 "$status"
check "the plan's shards give no determinism warning" \
  bash -c '! grep -q "not deterministic" <<<"$1"' _ "$out$err"
compare="$(compare_sweeps "$work/whole3.json" "$work/merged3.json" "$work/plan1.json" \
  "$work/plan2.json")"
echo "plan: $compare"
check "the merge of the plan's shards equals the unsharded sweep of it" \
  test "$(sed -n 2p <<<"$compare")" = same
# The plan decides, not this sweep's clean run: a plan whose client polled its CQ 100 times more
# than any run does is what the sweep's report and runs follow, and the sweep says the counts
# differ.
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
for p in r["points"]:
    if p["prog"] == "client" and p["point"] == "ibv_poll_cq":
        p["hits"] += 100
json.dump(r, open(sys.argv[2], "w"))
' "$work/plan.json" "$work/plan_more.json"
run "$rpma_sim" sweep -j 2 --timeout=20s --max-runs=30 --plan-from="$work/plan_more.json" \
  --shard=1/2 --report="$work/more.json" -- "$pair" "$peer" 7605
expect_status "a sweep of the edited plan passes" 0 "$status"
check "the sweep says its counts differ from the plan's" grep -q -E \
  "this clean run's hit counts differ from the plan's at [1-9][0-9]* points" <<<"$out"
check "its report has the plan's count" python3 -c '
import json, sys
plan = {(p["prog"], p["point"]): p["hits"] for p in json.load(open(sys.argv[1]))["points"]}
got = {(p["prog"], p["point"]): p["hits"] for p in json.load(open(sys.argv[2]))["points"]}
sys.exit(0 if plan == got and plan[("client", "ibv_poll_cq")] > 100 else 1)
' "$work/plan_more.json" "$work/more.json"

# A plan is of one program, device and set of kinds: another's is refused before anything runs.
run "$rpma_sim" sweep --plan-from="$work/plan.json" -- "$peer" fork 127.0.0.1 7606
expect_status "a plan of another program: usage error" 2 "$status"
expect_in "a plan of another program: said" "$err" "it is the report of another program"
check "a plan of another program: no clean run" bash -c '! grep -q "clean run:" <<<"$1"' _ "$out"
run "$rpma_sim" sweep --device=siw --plan-from="$work/plan.json" -- "$pair" "$peer" 7605
expect_status "a plan of another device: usage error" 2 "$status"
expect_in "a plan of another device: said" "$err" "it was swept on device mlx5, this sweep is on siw"
run "$rpma_sim" sweep --kinds=fail --plan-from="$work/plan.json" -- "$pair" "$peer" 7605
expect_status "a plan of other kinds: usage error" 2 "$status"
expect_in "a plan of other kinds: said" "$err" "--kinds=fail,wc,conn,kill, this sweep has --kinds=fail"
finish
