// `rpma-sim sweep`: PROGRAM run once cleanly, then once per hit of every fault point with that
// hit failed; every run classified, a table per point, a report (sweep.h does the work).

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "simverbs/did_you_mean.h"
#include "tools/rpma_sim/command_line.h"
#include "tools/rpma_sim/commands/command.h"
#include "tools/rpma_sim/commands/common.h"
#include "tools/rpma_sim/shard.h"
#include "tools/rpma_sim/sim_checks.h"
#include "tools/rpma_sim/sweep.h"
#include "tools/rpma_sim/sweep_plan.h"

ABSL_FLAG(int32_t, j, 2, "runs at once");
ABSL_FLAG(uint64_t, seeds, 1,
          "run each fault run under this many seeds: S, S+1, ... (S: --seed, else the simulator's "
          "default), as a NIC's timing differs from run to run; the clean run uses S. Each run's "
          "seed is in its replay line, the report and its JUnit name. --max-runs bounds the runs "
          "of one seed");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(10),
          "per run (e.g. 10s, 500ms, 2m): a run still going then is killed with its process "
          "group and counts as hung");
ABSL_FLAG(uint64_t, max_runs, 0,
          "at most this many fault runs, shared fairly between the points and spread over "
          "each point's hits. 0: one run per hit");
ABSL_FLAG(std::string, points, "",
          "sweep only these fault points (comma-separated names, see `rpma-sim points`). "
          "Default: every point the clean run hit");
ABSL_FLAG(std::string, kinds, "fail,wc,conn,kill",
          "the kinds of fault injected, comma-separated: fail (the call fails with an errno), "
          "wc (a posted work request completes with each error status the device's NIC gives "
          "for it; a receive is flushed), conn (at a post the connection is lost, and "
          "separately disconnected; at rdma_connect / rdma_accept it is rejected, and "
          "unreachable), kill (in a run of several programs, the process dies of SIGKILL at "
          "the hit). Each applies where the fault grammar has it (docs/FAULTS.md)");
ABSL_FLAG(bool, leaks, false,
          "also look for leaks: with LeakSanitizer when the program is built with "
          "AddressSanitizer, else under valgrind when it is installed (rpma-sim says which)");
ABSL_FLAG(std::string, keep_traces, "",
          "trace every run (RPMA_SIM_TRACE, a file per process named by its role) and keep the "
          "traces of each run that fails the sweep in DIR/run-N/ (DIR: made when missing; must "
          "be empty)");
ABSL_FLAG(bool, kill_orphans, true,
          "stop a run whose processes all exited but one that waits in the simulator for a "
          "peer that is gone (orphaned) instead of waiting for --timeout; --kill-orphans=false "
          "lets it time out (hung)");
ABSL_FLAG(std::string, shard, "",
          "run part K of N of the plan (K/N, 1 <= K <= N): every run belongs to exactly one "
          "part, so N sweeps with 1/N to N/N make the whole sweep; `rpma-sim report merge` "
          "joins their reports. Not given: Bazel's TEST_TOTAL_SHARDS and TEST_SHARD_INDEX when "
          "set (a test with shard_count)");
ABSL_FLAG(std::string, plan_from, "",
          "plan the runs from the clean run of this report (--report of an earlier sweep, or of "
          "--plan-only, of the same program, device and kinds) instead of this sweep's own: "
          "shards given one plan run every run once even when the program's hit counts vary "
          "from run to run (threads, several processes). This sweep's clean run still runs "
          "and must pass");
ABSL_FLAG(bool, plan_only, false,
          "run the clean run, print the plan and write it to --report (no run in it); no fault "
          "run. For --plan-from");

namespace softrpma::rpma_sim {
namespace {

// --report=FILE for one device of several: FILE.json -> FILE.<device>.json (FILE -> FILE.<device>).
std::string ReportPathFor(const std::string& path, const std::string& device) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return absl::StrCat(path, ".", device);
  }
  return absl::StrCat(path.substr(0, dot), ".", device, path.substr(dot));
}

// The shard a sweep runs: --shard, else Bazel's (touching TEST_SHARD_STATUS_FILE, which tells
// Bazel the test knows about sharding), else none. nullopt with a usage error printed.
std::optional<std::optional<Shard>> ShardOfSweep(const CommandLine& line) {
  if (line.given.contains("shard")) {
    absl::StatusOr<Shard> shard = ParseShard(absl::GetFlag(FLAGS_shard));
    if (!shard.ok()) {
      Usage(absl::StrCat("--shard: ", shard.status().message()));
      return std::nullopt;
    }
    return std::optional<Shard>(*shard);
  }
  absl::StatusOr<std::optional<Shard>> from_env = ShardFromEnvironment(&std::getenv);
  if (!from_env.ok()) {
    Usage(from_env.status().message());
    return std::nullopt;
  }
  if (const char* status_file = std::getenv(kShardStatusFileVar);
      from_env->has_value() && status_file != nullptr && *status_file != '\0') {
    std::ofstream touch(status_file, std::ios::app);
  }
  return *from_env;
}

int Sweep(const CommandLine& line, const char* argv0) {
  // Output to a closed pipe (`rpma-sim sweep ... | head`) must not kill rpma-sim before it has
  // stopped its runs and written the report; children get SIGPIPE back (process.cc).
  signal(SIGPIPE, SIG_IGN);
  SweepOptions options;
  options.program = line.program;
  std::optional<std::string> execution = ExecutionFlag();
  if (!execution.has_value()) return kExitUsage;
  options.execution = *execution;
  options.race_detector = absl::GetFlag(FLAGS_races);
  if (line.given.contains("seed")) options.seed = absl::GetFlag(FLAGS_seed);
  options.seeds = absl::GetFlag(FLAGS_seeds);
  if (options.seeds < 1 || options.seeds > kMaxSeeds) {
    return Usage(absl::StrCat("--seeds needs a number from 1 to ", kMaxSeeds));
  }
  options.jobs = absl::GetFlag(FLAGS_j);
  if (options.jobs < 1) return Usage("-j needs a number >= 1");
  options.timeout = absl::GetFlag(FLAGS_timeout);
  if (options.timeout <= absl::ZeroDuration()) return Usage("--timeout needs a positive duration");
  options.max_runs = absl::GetFlag(FLAGS_max_runs);
  const std::vector<PointInfo> known = ListPoints();
  for (absl::string_view point :
       absl::StrSplit(absl::GetFlag(FLAGS_points), ',', absl::SkipWhitespace())) {
    point = absl::StripAsciiWhitespace(point);
    if (std::none_of(known.begin(), known.end(),
                     [point](const PointInfo& p) { return p.name == point; })) {
      std::vector<std::string> names;
      for (const PointInfo& p : known) names.push_back(p.name);
      return Usage(absl::StrCat("--points: no fault point is called \"", point, "\"",
                                DidYouMeanSuffix(point, names), " (`rpma-sim points` lists them)"));
    }
    options.points.emplace_back(point);
  }
  absl::StatusOr<std::vector<SweepKind>> kinds = ParseSweepKinds(absl::GetFlag(FLAGS_kinds));
  if (!kinds.ok()) return Usage(absl::StrCat("--kinds: ", kinds.status().message()));
  options.kinds = *kinds;
  options.report_path = absl::GetFlag(FLAGS_report);
  options.junit_path = absl::GetFlag(FLAGS_junit);
  std::optional<std::optional<Shard>> shard = ShardOfSweep(line);
  if (!shard.has_value()) return kExitUsage;
  options.shard = *shard;
  options.leaks = absl::GetFlag(FLAGS_leaks);
  options.keep_traces = absl::GetFlag(FLAGS_keep_traces);
  if (line.given.contains("keep_traces")) {
    if (options.keep_traces.empty()) return Usage("--keep-traces needs a directory");
    if (absl::Status status = PrepareKeepTracesDir(options.keep_traces); !status.ok()) {
      return Usage(absl::StrCat("--keep-traces: ", status.message()));
    }
  }
  options.kill_orphans = absl::GetFlag(FLAGS_kill_orphans);
  options.plan_only = absl::GetFlag(FLAGS_plan_only);
  if (options.plan_only && options.report_path.empty()) {
    return Usage("--plan-only needs --report=FILE: the plan goes there");
  }
  if (options.plan_only && line.given.contains("shard")) {
    return Usage("--plan-only makes the plan of every shard: give --shard to the sweeps that "
                 "take it (--plan-from)");
  }
  options.plan_from = absl::GetFlag(FLAGS_plan_from);
  if (line.given.contains("plan_from")) {
    if (options.plan_only) return Usage("--plan-only and --plan-from: one makes a plan, the other takes one");
    std::ifstream file(options.plan_from, std::ios::binary);
    if (!file) return Usage(absl::StrCat("--plan-from: cannot read \"", options.plan_from, "\""));
    const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    absl::StatusOr<SweepReport> plan = ParseReport(text);
    if (!plan.ok()) {
      return Usage(absl::StrCat("--plan-from: ", options.plan_from, " is not a sweep's report (",
                                plan.status().message(), ")"));
    }
    options.plan = *std::move(plan);
  }
  std::optional<Libraries> libraries = ResolveLibraries(argv0);
  if (!libraries.has_value()) return kExitUsage;
  options.library_flags = libraries->flags;
  options.lib_dir = libraries->lib_dir;
  options.verbs_lib_dir = libraries->verbs_lib_dir;
  options.upstream_librpma = libraries->upstream_librpma;
  options.upstream_lib_dir = libraries->upstream_lib_dir;
  options.tool = ToolName(argv0);
  options.progress = isatty(STDERR_FILENO) != 0;
  std::optional<std::vector<std::string>> devices = DevicesFlag(line);
  if (!devices.has_value()) return kExitUsage;
  if (devices->size() <= 1) {
    if (!devices->empty()) options.device = devices->front();
    return RunSweep(options, stdout);
  }
  // One whole sweep per device, one after the other; the worst status wins.
  int status = kSweepPassed;
  const std::string report = options.report_path;
  const std::string junit = options.junit_path;
  const std::string keep_traces = options.keep_traces;
  for (size_t i = 0; i < devices->size(); ++i) {
    options.device = (*devices)[i];
    if (!report.empty()) options.report_path = ReportPathFor(report, options.device);
    if (!junit.empty()) options.junit_path = ReportPathFor(junit, options.device);
    if (!keep_traces.empty()) {
      options.keep_traces = absl::StrCat(keep_traces, "/", options.device);
      if (absl::Status status = PrepareKeepTracesDir(options.keep_traces); !status.ok()) {
        return Usage(absl::StrCat("--keep-traces: ", status.message()));
      }
    }
    if (i > 0) std::printf("\n");
    std::printf("== device %s (%zu of %zu) ==\n", options.device.c_str(), i + 1, devices->size());
    std::fflush(stdout);
    const int device_status = RunSweep(options, stdout);
    if (device_status == kSweepInterrupted || device_status == kSweepUsage) return device_status;
    status = std::max(status, device_status);
  }
  return status;
}

}  // namespace

const Command& SweepCommand() {
  static const Command command{
      {"sweep",
       {"seed", "j", "timeout", "max_runs", "seeds", "points", "kinds", "report", "junit",
        "shard", "plan_from", "plan_only", "leaks", "keep_traces", "kill_orphans", "lib",
        "verbs_lib", "upstream_librpma", "upstream_lib", "device", "execution", "races"},
       true,
       0,
       0},
      "rpma-sim sweep [--device=D,...] [--seed=S] [--seeds=N] [-j N] [--timeout=T]\n"
      "               [--max-runs=M]\n"
      "               [--points=P,...] [--kinds=fail,wc,conn,kill] [--report=FILE]\n"
      "               [--junit=FILE] [--shard=K/N] [--plan-from=REPORT] [--plan-only]\n"
      "               [--leaks] [--keep-traces=DIR]\n"
      "               [--kill-orphans=false]\n"
      "               [--lib=DIR] [--verbs-lib=DIR] [--upstream-librpma] -- PROGRAM [ARGS...]",
      "Runs PROGRAM once with no fault to count how often each fault point is hit\n"
      "(RPMA_SIM_STATS), then once per hit of every point that can fail and per fault of\n"
      "each --kinds that applies there, with that fault injected at that hit:\n"
      "  fail  --faults='<point>:fail=EIO:nth=<n>' (ENOMEM for malloc), every point;\n"
      "  wc    '<post>:wc_status=IBV_WC_...:nth=<n>': the work request completes with each\n"
      "        error status the device's NIC gives for it (ibv_post_send: REM_ACCESS,\n"
      "        RETRY_EXC, LOC_PROT, REM_INV_REQ, RNR_RETRY_EXC but on siw; ibv_post_recv:\n"
      "        WR_FLUSH, LOC_LEN; ibv_wr_complete: REM_ACCESS, RETRY_EXC, LOC_PROT);\n"
      "  conn  at a post the connection lost, and disconnected, mid-flight; at\n"
      "        rdma_connect / rdma_accept rejected, and unreachable;\n"
      "  kill  '<point>:kill:nth=<n>:prog=<name>': in a run of several programs, that\n"
      "        process dies of SIGKILL there (its peers meet a dead peer).\n"
      "Default: every kind. With --max-runs, the runs are shared fairly between the\n"
      "points, then each point's between its kinds, and spread over the hits.\n"
      "N runs at a time; a run still going after --timeout is killed with its process\n"
      "group, after rpma-sim printed where each of its processes waits (gdb's stacks when\n"
      "installed, the simulator's waits and outstanding WRs). A run whose processes all\n"
      "exited but one that waits in the simulator for a gone peer is stopped as orphaned\n"
      "(--kill-orphans=false: it times out). Each run is clean (exit 0), nonzero (exit > 0: the program reported the\n"
      "fault), crashed (a signal or a sanitizer error), hung (timed out), leaked (with\n"
      "--leaks) or kept (a destroy call failed and the NIC kept its object, as a real\n"
      "provider does: no leak of the program's). Each run that crashed, hung or leaked\n"
      "prints the one-line command that replays it; with --keep-traces=DIR its processes'\n"
      "traces (RPMA_SIM_TRACE=%r.%p.trace) are kept in DIR/run-N/ and named under it, in\n"
      "the report and in JUnit (the traces of the other runs are removed). A progress bar is drawn on a terminal\n"
      "(plain lines elsewhere); a table per point ends the sweep.\n"
      "--shard=K/N runs part K of N of the runs (by default Bazel's TEST_TOTAL_SHARDS /\n"
      "TEST_SHARD_INDEX when set); `rpma-sim report merge` joins the shards' reports.\n"
      "A program whose hit counts vary from run to run (threads, several processes) gives\n"
      "shards that plan apart; --plan-only --report=plan.json makes one plan and\n"
      "--plan-from=plan.json gives it to every shard.\n"
      "With --device=mlx5,siw the whole sweep runs once per device, each with its own\n"
      "summary (and report); the replay lines carry --device.\n"
      "Every run has the environment of `rpma-sim run`, --upstream-librpma included (the\n"
      "fault points are then the shim's: upstream librpma's own allocations are not the\n"
      "malloc point's).\n"
      "Exits 1 if any run crashed, hung or leaked.",
      "  rpma-sim sweep -- ./my_app\n"
      "  rpma-sim sweep --device=mlx5,rxe,siw -- ./my_app\n"
      "  rpma-sim sweep --upstream-librpma -- ./my_app\n"
      "  rpma-sim sweep -j 4 --timeout=30s --max-runs=200 --report=sweep.json -- ./my_app\n"
      "  rpma-sim sweep --points=ibv_post_send,malloc --leaks -- bazel-bin/tools/demo --once\n"
      "  rpma-sim sweep --kinds=wc,conn -- ./my_app\n"
      "  rpma-sim sweep --shard=1/3 --report=s1.json --junit=s1.xml -- ./my_app\n"
      "  rpma-sim sweep --plan-only --report=plan.json -- ./my_app\n"
      "  rpma-sim sweep --plan-from=plan.json --shard=1/3 --report=s1.json -- ./my_app\n",
      &Sweep,
  };
  return command;
}

}  // namespace softrpma::rpma_sim
