// report.h: a sweep's results as data: what `sweep --report` writes and `report merge` reads
// (the JSON of docs/RPMA_SIM.md), the table per point both print, the merge of the reports of a
// sharded sweep into the report of the whole, and the JUnit test cases of its runs.
//
// Outcome classes are names here ("clean", "crashed", ...), not RunClass values: a report read
// from a file may hold a class this build does not know, and it is counted and shown like the
// others; whether a run failed the sweep is the run's own `fails_sweep`.
//
// Thread-safety: every function is thread-safe (none keeps state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_REPORT_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/rpma_sim/junit.h"
#include "tools/rpma_sim/shard.h"
#include "tools/rpma_sim/sweep_plan.h"

namespace softrpma::rpma_sim {

// One run, as the report has it.
struct ReportRun {
  std::string point;  // "" for the clean run
  std::string prog;   // the program whose point is failed; "" when the run's processes are one
  uint64_t nth = 0;   // 0 for the clean run
  std::string spec;   // "" for the clean run
  std::string kind;    // "fail", "wc", "conn", "kill" (sweep_kinds.h); "" for the clean run
  std::string action;  // the effect injected, e.g. "wc_status=IBV_WC_REM_ACCESS_ERR"; "" ditto
  std::optional<uint64_t> seed;  // its own seed (sweep --seeds); none: the sweep's
  std::optional<int> exit_code;  // none when a signal ended it
  std::string signal;            // "SIGSEGV", "" for none
  std::string class_name;        // "clean", "nonzero", "crashed", ... (any name)
  std::string detail;            // "exit 1", "timed out after 10s", ...
  uint64_t kept_objects = 0;
  double duration_ms = 0;
  std::string replay;
  std::string output_tail;   // failing runs only, else ""
  std::vector<std::string> traces;  // the traces kept of a failing run (--keep-traces), else none
  // A hung or orphaned run: where its processes waited when it was stopped (hang_report.h:
  // stacks, the simulator's waits and outstanding WRs), as printed; else "".
  std::string hang_report;
  bool fails_sweep = false;  // this run makes the sweep fail (crashed, hung; leaked with --leaks)
};

struct SweepReport {
  std::vector<std::string> program;
  std::string device;
  std::optional<uint64_t> seed;
  uint64_t seeds = 1;  // --seeds: each fault run under this many seeds
  int64_t jobs = 0;
  double timeout_s = 0;
  uint64_t max_runs = 0;
  std::vector<std::string> kinds;  // --kinds, in the kinds' order ("fail" in a report without)
  std::string leak_checker;  // "none", "asan", "valgrind"
  bool interrupted = false;
  std::optional<Shard> shard;  // the part of the plan this report ran; none: all of it
  uint64_t plan_runs = 0;      // runs of the whole plan (every shard)
  ReportRun clean_run;
  std::vector<PointHits> points;     // swept, with the clean run's hits
  std::vector<PointHits> not_swept;  // hit, but cannot fail
  std::vector<ReportRun> runs;       // point by point, hits ascending
  // Set by MergeReports: how many shard reports, and the shards none of them ran.
  uint64_t merged_shards = 0;
  std::vector<uint64_t> missing_shards;
};

// The outcome classes a table and a report count, in column order: this build's classes
// (RunClassName, in RunClass order), then any other name the runs hold, sorted.
std::vector<std::string> ClassColumns(const SweepReport& report);

// The table per point: a header (point, hits, runs, a column per class), a row per swept point
// (unless the sweep injected fail=<errno> only, a row per point and kind that has runs, named
// "<point> [<kind>]", each with the point's hits) and a total row, then the points that cannot
// fail; each line ends with a newline, the first line is empty.
std::string FormatTable(const SweepReport& report);

// The report as JSON text (one line per point and per run), without a final newline.
std::string ReportJson(const SweepReport& report);

// Parses the JSON ReportJson writes. Errors: InvalidArgument naming the first member that is
// missing or of the wrong type ("runs[3].class: expected a string"), or the JSON error.
absl::StatusOr<SweepReport> ParseReport(absl::string_view text);

// The largest sweep report `rpma-sim report merge` reads: 256 MiB (a run's entry is a few
// hundred bytes, so about a million runs; parsed, a report takes several times its size).
inline constexpr uint64_t kMaxReportBytes = uint64_t{256} << 20;

// Whether the report's sweep failed: its clean run failed (any class but clean and leaked), a
// run fails the sweep, it was interrupted, or (merged) a shard is missing.
bool ReportFailed(const SweepReport& report);

// Joins the reports of the shards of one sweep (`names[i]` names reports[i] in messages): the
// points of all (the first report's order; the largest count when counts differ), every run
// ordered as the whole sweep lists them, the clean run of the lowest shard, `merged_shards`
// and `missing_shards` set, `shard` none. One report without a shard is returned as it is.
// `warnings` receives what does not prevent the merge (clean runs that counted different hits).
// Errors: InvalidArgument when the reports are of different sweeps (program, device, seed,
// --max-runs, --kinds, leak checker: the message names both files and the values), when one has no
// shard but there are several, when their shard counts differ, when two are the same shard or
// hold the same run (overlapping shards).
absl::StatusOr<SweepReport> MergeReports(const std::vector<SweepReport>& reports,
                                         const std::vector<std::string>& names,
                                         std::vector<std::string>* warnings);

// The JUnit suite of a report: a test case for the clean run ("clean run") and one per run
// (named "<point> hit <nth>", "<prog>:<point> hit <nth>" for one program of several; a run of
// another kind than fail adds its kind and effect: "ibv_post_send hit 2 (wc:
// wc_status=IBV_WC_REM_ACCESS_ERR)", "server:rdma_accept hit 1 (kill)"), classname
// "rpma-sim.sweep.<device>.<program's file name>", failed when the run fails the sweep (the
// clean run: when it failed), the failure's text its outcome and replay line.
JunitSuite ReportJunit(const SweepReport& report);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_REPORT_H_
