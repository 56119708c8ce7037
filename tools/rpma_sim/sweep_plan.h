// sweep_plan.h: which runs a fault sweep makes. A clean run of the program tells how often each
// fault point was hit (the simulator's RPMA_SIM_STATS file); the sweep then injects each effect
// of the kinds asked for (sweep_kinds.h: `fail=<errno>`, an error completion, a connection
// ended, a process killed) at each hit in turn, one run per (point, nth, effect). When
// --max-runs bounds the sweep, the runs are shared fairly between the points, within a point
// between its kinds and within a kind between its effects, and spread evenly over the hits.
//
// Thread-safety: every function is thread-safe (none keeps state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_SWEEP_PLAN_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_SWEEP_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/rpma_sim/sweep_kinds.h"

namespace softrpma::rpma_sim {

// How often one fault point was hit in one run (in the processes named `prog`; "" when the
// run's processes all go by one name).
struct PointHits {
  std::string point;
  uint64_t hits = 0;
  std::string prog;
};

// "point", or "prog:point" for a point of one program of several (tables, keys).
std::string PointLabel(const PointHits& p);

// Parses the simulator's stats file: one `<point> <hits>` per line (blanks around the two
// fields, blank lines and lines starting with '#' ignored: `# process`, `# kept`), in the
// file's order.
// Errors: InvalidArgument naming the line number and what is wrong with it.
absl::StatusOr<std::vector<PointHits>> ParseStats(absl::string_view text);

// The process name of a stats file: its `# process NAME pid N` line, or "" when it has none.
std::string StatsProcessName(absl::string_view text);

// How many objects the simulated NIC kept in one process after injected failures of destroy
// calls: the sum of the stats file's `# kept <point> <objects>` lines (none: 0).
// Errors: InvalidArgument naming the line number of a malformed `# kept` line.
absl::StatusOr<uint64_t> StatsKeptObjects(absl::string_view text);

// The hit counts of one run from the stats files of all its processes (one per process).
// When the processes go by one name (one process, or a program that forks copies of itself),
// each point's count is the largest of them and `prog` is ""; otherwise each (name, point)
// is an entry of its own, with `prog` set, names in sorted order, points in file order.
// Errors: those of ParseStats, naming the file's position.
absl::StatusOr<std::vector<PointHits>> MergeProcessStats(const std::vector<std::string>& texts);

// The errno name a sweep fails `point` with: "ENOMEM" for malloc, "EIO" for every other point.
const char* SweepErrno(absl::string_view point);

// The fault spec of one sweep run, e.g. "ibv_post_send:fail=EIO:nth=3", with ":prog=NAME"
// when `prog` is not empty.
std::string SweepFaultSpec(absl::string_view point, uint64_t nth, absl::string_view prog = "");
// The same with another action: "<point>:<action>:nth=N[:prog=NAME]".
std::string SweepFaultSpec(absl::string_view point, absl::string_view action, uint64_t nth,
                           absl::string_view prog);

// How many runs each point gets when at most `max_runs` may be made (0: no bound): each point
// gets all of its hits when they fit; otherwise the runs are dealt out in rounds, each point
// taking an equal share of what is left (never more than its hits), and when fewer runs than
// points remain the points listed first get one each (from entry `first` on, round the list:
// so that callers can rotate who gets the odd runs). Returns one count per entry of `hits`.
std::vector<uint64_t> ShareRuns(const std::vector<uint64_t>& hits, uint64_t max_runs,
                                size_t first = 0);

// Which hit numbers, of 1..hits, `budget` runs fail (1 <= budget <= hits): spread evenly,
// ascending, the first and (when budget >= 2) the last hit included. budget >= hits: all.
std::vector<uint64_t> SpreadHits(uint64_t hits, uint64_t budget);

// One run of a sweep.
struct PlannedRun {
  std::string point;
  std::string prog;
  uint64_t nth = 0;
  std::string spec;  // SweepFaultSpec(point, action, nth, prog)
  SweepKind kind = SweepKind::kFail;
  std::string action;  // the effect injected, e.g. "fail=EIO" (sweep_kinds.h)
  std::optional<uint64_t> seed;  // --seeds: this run's RPMA_SIM_SEED; none: the sweep's
};

// The simulator's seed when RPMA_SIM_SEED is not set (simverbs/sim/sched/sched.h,
// kDefaultSeed; sweep_plan_test checks that they agree).
inline constexpr uint64_t kSimulatorDefaultSeed = 0x736f667472706d61ULL;
// The most seeds --seeds may ask for.
inline constexpr uint64_t kMaxSeeds = 1000;

// `plan` under `seeds` seeds: each run once per seed `base`, base + 1, ... (wrapping), a run's
// seeds one after the other, in the plan's order. seeds <= 1: `plan` itself, no run naming a
// seed (the sweep's own, or the simulator's default, is every run's).
std::vector<PlannedRun> WithSeeds(const std::vector<PlannedRun>& plan, uint64_t base,
                                  uint64_t seeds);

// The runs for `points` (each to be swept: hits > 0 and able to fail) with every effect of
// `kinds` there on `device` (EffectsAt), point by point in the given order, then hit numbers
// ascending, then effects in their order; at most `max_runs` in all (0: no bound). Under the
// bound each point gets a fair share (ShareRuns over the points, each able to take hits x
// effects), shares it fairly between its kinds and each kind between its effects, and spreads
// each effect's runs over the hits (SpreadHits). The odd runs of a point go to its kinds round
// the list starting at a kind that moves on by one from point to point (and likewise for
// effects), so that a small bound still reaches every kind rather than the first point's.
std::vector<PlannedRun> PlanSweep(const std::vector<PointHits>& points,
                                  const std::vector<SweepKind>& kinds, absl::string_view device,
                                  uint64_t max_runs);
// The runs of the fail kind only (the sweep before kinds).
std::vector<PlannedRun> PlanSweep(const std::vector<PointHits>& points, uint64_t max_runs);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_SWEEP_PLAN_H_
