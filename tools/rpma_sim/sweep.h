// sweep.h: `rpma-sim sweep`: runs a program once cleanly to count how often each fault point is
// hit, then once per hit with that hit failed (sweep_plan.h), several runs at a time, each with a
// deadline; classifies every run (classify.h), prints a replay line for each failing one and a
// table per point, and writes a JSON report on request.
//
// Thread-safety: RunSweep starts child processes and blocks signals while they run (see
// process.h); call it from the main thread, once at a time.

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_SWEEP_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_SWEEP_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tools/rpma_sim/report.h"
#include "tools/rpma_sim/shard.h"
#include "tools/rpma_sim/sim_env.h"
#include "tools/rpma_sim/sweep_kinds.h"

namespace softrpma::rpma_sim {

struct SweepOptions {
  std::vector<std::string> program;  // argv of the program under test; REQUIRES: not empty
  std::optional<uint64_t> seed;      // RPMA_SIM_SEED of every run; none: the simulator's default
  // Each fault run under this many seeds: seed, seed + 1, ... (seed: the one above, else the
  // simulator's default); the clean run under the first. 1 <= seeds <= kMaxSeeds.
  uint64_t seeds = 1;
  std::string device;
  std::string execution;      // RPMA_SIM_EXECUTION of every run; "": the default (async)
  bool race_detector = true;  // RPMA_SIM_RACE_DETECTOR of every run                // RPMA_SIM_DEVICE of every run; "": the simulator's default
  int jobs = 2;                      // runs at once, >= 1
  absl::Duration timeout = absl::Seconds(10);  // per run; a run still going then is hung
  uint64_t max_runs = 0;                       // 0: one run per hit of every point
  std::vector<std::string> points;             // sweep only these points; empty: every point hit
  std::vector<SweepKind> kinds = AllSweepKinds();  // the kinds of fault injected (sweep_kinds.h)
  std::string report_path;                     // JSON report; "" for none
  std::string junit_path;                      // JUnit XML, a test case per run; "" for none
  std::optional<Shard> shard;                  // run only this part of the plan; none: all
  // --plan-from: the report of an earlier sweep (or --plan-only) of the same program, device
  // and kinds whose clean-run hit counts make the plan instead of this sweep's clean run's, so
  // that every shard plans the same runs however the program's counts vary from run to run.
  // This sweep's clean run still runs and must pass. `plan_from` names the file (messages).
  std::optional<SweepReport> plan;
  std::string plan_from;
  // --plan-only: the clean run and the plan, written to the report with no run; no fault run.
  bool plan_only = false;
  bool leaks = false;                          // look for leaks (ASan's LeakSanitizer or valgrind)
  // Trace every run (RPMA_SIM_TRACE=<scratch>/%r.%p.trace) and keep the traces of each run that
  // fails the sweep in <keep_traces>/run-N/ (N: the run's number, 0 for the clean run); "": off.
  // REQUIRES: an empty directory (PrepareKeepTracesDir).
  std::string keep_traces;
  std::string lib_dir;                         // softrpma's librpma.so.0 directory, "" for none
  std::string verbs_lib_dir;                   // the verbs shim's directory, "" for none
  bool upstream_librpma = false;               // SimConfig::upstream_librpma of every run
  std::string upstream_lib_dir;                // SimConfig::upstream_lib_dir of every run
  LibraryFlags library_flags;                  // the library flags as given (for replay lines)
  std::string tool = "rpma-sim";               // how replay lines call rpma-sim
  // Stderr is a terminal: draw a progress bar there; otherwise print a plain progress line at
  // every tenth of the runs (CI logs).
  bool progress = false;
  // Stop a run whose processes all exited but one that waits in the simulator for a peer that
  // is gone (`orphaned`, hang_report.h) instead of waiting for its timeout.
  bool kill_orphans = true;
  // How long gdb may take for the stacks of one process of a hung run.
  absl::Duration gdb_limit = absl::Seconds(10);
};

// Exit statuses of RunSweep.
inline constexpr int kSweepPassed = 0;  // no run crashed or hung (or leaked, with --leaks)
inline constexpr int kSweepFailed = 1;  // some did, or the sweep could not be made
inline constexpr int kSweepUsage = 2;   // the program or leak checker could not be found
inline constexpr int kSweepInterrupted = 130;

// Makes `dir` (and its parents) for --keep-traces. Errors: InvalidArgument naming it when it
// cannot be made, is no directory, or is not empty (a sweep's run-N directories must not mix
// with another's).
absl::Status PrepareKeepTracesDir(const std::string& dir);

// Runs the sweep that `options` describes; prints to `out` (progress to stderr). Returns one of
// the exit statuses above.
int RunSweep(const SweepOptions& options, std::FILE* out);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_SWEEP_H_
