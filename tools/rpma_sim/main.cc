// rpma-sim: runs librpma programs on softrpma's simulated NIC. Subcommands:
//   points  every fault point of the simulator
//   run     one run of a program with a seed, faults / a scenario and a trace
//   sweep   fail every hit of every fault point in turn; classify and report each run
//   trace   a trace as readable lines or as Chrome Trace Event JSON
//   report  `report merge`: the reports of the shards of a sweep, joined
// `rpma-sim --help` explains each with examples; docs/RPMA_SIM.md is the manual.

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "simverbs/sim/read_file.h"
#include "tools/rpma_sim/chrome_trace.h"
#include "tools/rpma_sim/classify.h"
#include "tools/rpma_sim/command_line.h"
#include "tools/rpma_sim/junit.h"
#include "tools/rpma_sim/process.h"
#include "tools/rpma_sim/report.h"
#include "tools/rpma_sim/shard.h"
#include "tools/rpma_sim/sim_checks.h"
#include "tools/rpma_sim/sim_env.h"
#include "tools/rpma_sim/sweep.h"
#include "tools/rpma_sim/trace.h"

ABSL_FLAG(uint64_t, seed, 0,
          "RPMA_SIM_SEED: the seed that decides everything the simulator is free to choose "
          "(decimal or 0x-hex). Not given: the simulator's default seed");
ABSL_FLAG(std::string, execution, "",
          "RPMA_SIM_EXECUTION: async (the default: a work request executes after its post "
          "returns, when the seed says, as on a NIC) or eager (inside the post)");
ABSL_FLAG(bool, races, true,
          "RPMA_SIM_RACE_DETECTOR: report a WRITE or SEND source changed between its post and "
          "its execution (`softrpma-sim: race:`; a sweep counts the run as racy) and poison READ "
          "and receive buffers until they are filled; --races=false turns it off");
ABSL_FLAG(std::string, device, "",
          "RPMA_SIM_DEVICE: the device the simulated NIC stands for: mlx5 (the default), rxe or "
          "siw (`rpma-sim devices`, docs/DEVICES.md). sweep: a comma-separated list runs the "
          "whole sweep once per device, and --report writes one report per device "
          "(FILE.json -> FILE.<device>.json)");
ABSL_FLAG(std::string, faults, "",
          "RPMA_SIM_FAULTS: a fault spec, e.g. 'ibv_post_send:fail=EIO:nth=3; "
          "malloc:fail=ENOMEM:nth=5' (docs/FAULTS.md). Checked before the program starts");
ABSL_FLAG(std::string, scenario, "",
          "RPMA_SIM_SCENARIO: a scenario file, fault rules one per line and an optional seed "
          "line (docs/FAULTS.md). With --faults too: the spec's rules, then the file's");
ABSL_FLAG(std::string, trace, "",
          "RPMA_SIM_TRACE: write the simulator's trace to this file (docs/TRACE.md); read it with "
          "`rpma-sim trace FILE`");
ABSL_FLAG(std::string, stats, "",
          "RPMA_SIM_STATS: at exit, write how often each fault point was hit to this file");
ABSL_FLAG(std::string, lib, "",
          "the directory of softrpma's librpma.so.0, put first in LD_LIBRARY_PATH so that a "
          "program linked against the distro's librpma runs on it. Default: found near "
          "rpma-sim (its own directory, ../lib, bazel-bin/api, bazel-bin/api/librpma/lib); "
          "rpma-sim refuses to run without it");
ABSL_FLAG(std::string, verbs_lib, "",
          "the directory of the verbs shim's libibverbs.so.1 and librdmacm.so.1 "
          "(//simverbs/shim:verbs_lib_dir), put in LD_LIBRARY_PATH after softrpma's librpma so "
          "that a program calling libibverbs / librdmacm itself (ibv_devinfo, rping) runs on the "
          "simulated NIC too. Default: found near rpma-sim (its own directory, ../lib/verbs-shim, "
          "bazel-bin/simverbs/shim/lib); rpma-sim refuses to run without it");
ABSL_FLAG(bool, upstream_librpma, false,
          "run PROGRAM on upstream librpma (the distro's librpma.so.0, Debian's librpma0) over "
          "the verbs shim instead of on softrpma's: softrpma's librpma is kept out of "
          "LD_LIBRARY_PATH (inherited entries holding it too), RPMA_BACKEND=ibverbs. The program "
          "must load librpma.so.0 dynamically; faults, seeds and traces are the shim's "
          "simulator's");
ABSL_FLAG(std::string, upstream_lib, "",
          "with --upstream-librpma (implied): the directory of the upstream librpma.so.0 to run "
          "on (a build of pmem/rpma, say), put after the shim's in LD_LIBRARY_PATH. Default: the "
          "distro's, in the system's library directories");
ABSL_FLAG(int32_t, j, 2, "runs at once");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(10),
          "per run (e.g. 10s, 500ms, 2m): a run still going then is killed with its process "
          "group and counts as hung");
ABSL_FLAG(uint64_t, max_runs, 0,
          "at most this many fault runs, shared fairly between the points and spread over "
          "each point's hits. 0: one run per hit");
ABSL_FLAG(std::string, points, "",
          "sweep only these fault points (comma-separated names, see `rpma-sim points`). "
          "Default: every point the clean run hit");
ABSL_FLAG(std::string, report, "",
          "write a JSON report here: every run with its point, spec, exit, class, duration "
          "and replay command, and the counts per point");
ABSL_FLAG(bool, leaks, false,
          "also look for leaks: with LeakSanitizer when the program is built with "
          "AddressSanitizer, else under valgrind when it is installed (rpma-sim says which)");
ABSL_FLAG(std::string, shard, "",
          "run part K of N of the plan (K/N, 1 <= K <= N): every run belongs to exactly one "
          "part, so N sweeps with 1/N to N/N make the whole sweep; `rpma-sim report merge` "
          "joins their reports. Not given: Bazel's TEST_TOTAL_SHARDS and TEST_SHARD_INDEX when "
          "set (a test with shard_count)");
ABSL_FLAG(std::string, junit, "",
          "write JUnit XML here, a test case per run (its point and hit, a failure with its "
          "outcome and replay line), for CI systems' test reports");
ABSL_FLAG(std::string, chrome, "",
          "write Chrome Trace Event JSON to this file ('-': stdout) instead of printing the "
          "trace; open it in https://ui.perfetto.dev or chrome://tracing");

namespace softrpma::rpma_sim {
namespace {

constexpr int kExitUsage = 2;

constexpr char kOverview[] =
    R"(rpma-sim: run a librpma program, unmodified, on softrpma's simulated NIC; inject faults
where you choose, sweep every fault point of the program, and read the simulator's traces.

Usage:
  rpma-sim points
  rpma-sim devices
  rpma-sim run   [--device=D] [--seed=S] [--faults=SPEC] [--scenario=FILE] [--trace=FILE]
                 [--stats=FILE] [--lib=DIR] [--verbs-lib=DIR] [--upstream-librpma]
                 [--junit=FILE] -- PROGRAM [ARGS...]
  rpma-sim sweep [--device=D,...] [--seed=S] [-j N] [--timeout=T] [--max-runs=M]
                 [--points=P,...] [--report=FILE] [--junit=FILE] [--shard=K/N] [--leaks]
                 [--lib=DIR] [--verbs-lib=DIR] [--upstream-librpma] -- PROGRAM [ARGS...]
  rpma-sim trace FILE [--chrome=OUT.json]
  rpma-sim trace FILE FILE... --chrome=OUT.json   (the processes of one run, merged)
  rpma-sim report merge [--report=OUT.json] [--junit=OUT.xml] SHARD.json...
  rpma-sim help [SUBCOMMAND]          (or: rpma-sim SUBCOMMAND --help)

Subcommands:
  points  List every fault point of the simulated NIC: the verbs / rdma_cm call it stands for
          (or malloc, every allocation), and whether it can be made to fail.
  devices List the devices the simulated NIC can stand for (--device, RPMA_SIM_DEVICE) and
          what differs between them: transport, immediate data, capabilities, limits, queue
          rounding, private data.
  run     Run PROGRAM once on the simulated NIC with the given seed, fault spec or scenario and
          trace file. The spec and scenario are checked first: a malformed one is an error
          naming the rule and column, and PROGRAM does not run. Exits with PROGRAM's status.
  sweep   Run PROGRAM once cleanly to count how often each fault point is hit, then once per
          hit with that hit failed (fail=EIO; ENOMEM for malloc), N at a time, each with a
          timeout. Classifies every run (clean, nonzero, crashed, hung, leaked, kept), prints
          the one-line command that replays each run that crashed, hung or leaked, and a table
          per point. Exits 1 if any run crashed, hung or leaked.
          --shard=K/N runs part K of N of the runs (CI machines side by side).
  trace   Print a trace that `run --trace` wrote as readable lines, or convert it to Chrome
          Trace Event JSON (one track per QP and per CQ, a slice per work request).
  report  `report merge`: join the JSON reports of the shards of one sweep into one table and
          one report (and JUnit XML), as if the sweep had run whole.

PROGRAM is any program that uses librpma: one built against //api:rpma, or one linked against
the distro's librpma.so.0 (LD_LIBRARY_PATH then leads it to softrpma's). It may also be a
program that calls libibverbs / librdmacm itself (ibv_devinfo, rping, a verbs application):
LD_LIBRARY_PATH leads it to the verbs shim, whose device is the same simulated NIC, with the
same seeds, faults and traces. --upstream-librpma runs a librpma program on upstream librpma
(the distro's) over the shim instead of on softrpma's. The command line is the whole
configuration: RPMA_SIM_* variables inherited from the environment are removed, so that a
replay line reproduces its run, and RPMA_BACKEND is set to sim (ibverbs with
--upstream-librpma).

Examples:
  rpma-sim points
  rpma-sim devices
  rpma-sim run --device=siw -- ./my_app
  rpma-sim run -- ibv_devinfo                      # a verbs program on the simulated NIC
  rpma-sim run --upstream-librpma -- ./my_app      # on the distro's librpma, over the shim
  rpma-sim sweep --device=mlx5,siw -- ./my_app
  rpma-sim run --faults='ibv_post_send:fail=EIO:nth=3' -- ./my_app 192.168.0.1 7204
  rpma-sim run --seed=42 --trace=app.trace -- ./my_app
  rpma-sim trace app.trace
  rpma-sim trace app.trace --chrome=app.json      # then open app.json in ui.perfetto.dev
  rpma-sim sweep -j 4 --timeout=30s --report=sweep.json -- ./my_app
  rpma-sim sweep --max-runs=40 --leaks -- bazel-bin/tools/demo --once
  rpma-sim sweep --shard=2/3 --report=s2.json --junit=s2.xml -- ./my_app
  rpma-sim report merge --report=all.json s1.json s2.json s3.json

Exit status: run: PROGRAM's (127: it could not be started); sweep: 0 when no run crashed, hung
or leaked, else 1 (130: interrupted); report merge: as sweep (1 also when a shard is missing);
points, devices, trace: 0, or 1 on an error; every
subcommand: 2 for a usage error, an unknown device or a malformed fault spec or scenario.
The manual: docs/RPMA_SIM.md. Fault specs: docs/FAULTS.md. Traces: docs/TRACE.md. Devices:
docs/DEVICES.md.
)";

struct SubcommandHelp {
  const char* synopsis;
  const char* description;
  const char* examples;
};

const std::vector<SubcommandSpec>& Subcommands() {
  static const auto* subcommands = new std::vector<SubcommandSpec>{
      {"points", {}, false, 0, 0},
      {"devices", {}, false, 0, 0},
      {"run",
       {"seed", "faults", "scenario", "trace", "stats", "lib", "verbs_lib", "upstream_librpma",
        "upstream_lib", "device", "execution", "races", "junit"},
       true,
       0,
       0},
      {"sweep",
       {"seed", "j", "timeout", "max_runs", "points", "report", "junit", "shard", "leaks", "lib",
        "verbs_lib", "upstream_librpma", "upstream_lib", "device", "execution", "races"},
       true,
       0,
       0},
      {"trace", {"chrome"}, false, 1, 64},
      {"report", {"report", "junit"}, false, 2, 100000},
  };
  return *subcommands;
}

SubcommandHelp HelpOf(absl::string_view name) {
  if (name == "points") {
    return {"rpma-sim points",
            "Lists every fault point of the simulated NIC, in the simulator's order: the verbs or\n"
            "rdma_cm call it stands for, or malloc (every allocation softrpma makes). A point\n"
            "marked \"void\" is a call that cannot fail: it is counted, never failed.",
            "  rpma-sim points\n"};
  }
  if (name == "devices") {
    return {"rpma-sim devices",
            "Lists the devices the simulated NIC can stand for, one column each (the default\n"
            "first), and the values that differ between them: the transport, immediate data,\n"
            "native atomic write, on-demand paging, what ibv_query_device_ex reports, how CQ and\n"
            "QP sizes are rounded, and the private data rdma_connect, rdma_accept and\n"
            "rdma_reject carry. docs/DEVICES.md names the source of each value.",
            "  rpma-sim devices\n"};
  }
  if (name == "run") {
    return {
        "rpma-sim run [--device=D] [--seed=S] [--faults=SPEC] [--scenario=FILE] "
        "[--trace=FILE]\n             [--stats=FILE] [--lib=DIR] [--verbs-lib=DIR] "
        "[--upstream-librpma] [--junit=FILE]\n             -- PROGRAM [ARGS...]",
        "Runs PROGRAM once, in place of rpma-sim, on the simulated NIC: RPMA_BACKEND=sim, the\n"
        "RPMA_SIM_* variables the flags give (the inherited ones removed), LD_LIBRARY_PATH\n"
        "starting with softrpma's librpma.so.0 and then the verbs shim's libibverbs.so.1 and\n"
        "librdmacm.so.1, address-space randomization off (pointers used as wr_id then repeat,\n"
        "so traces compare byte for byte). A librpma program runs on softrpma's librpma; a\n"
        "program calling libibverbs / librdmacm itself (ibv_devinfo, rping) runs on the shim,\n"
        "the same simulated NIC with the same variables. With --upstream-librpma a librpma\n"
        "program runs on upstream librpma (the distro's librpma.so.0) over the shim instead:\n"
        "softrpma's librpma is kept out of LD_LIBRARY_PATH and RPMA_BACKEND=ibverbs; an error\n"
        "(exit 2) when upstream librpma is not installed. The fault spec and the\n"
        "scenario are checked first with the simulator's own parser; a malformed one is an\n"
        "error naming the rule and column (exit 2). Exits with PROGRAM's status.\n"
        "With --junit=FILE, rpma-sim waits for PROGRAM instead (stdin from /dev/null, its\n"
        "output captured and printed when it ends), classifies the run as sweep does and writes\n"
        "a JUnit test case for it, failed unless PROGRAM exited 0 without a sanitizer report.",
        "  rpma-sim run -- ./my_app\n"
        "  rpma-sim run --faults='ibv_post_send:fail=EIO:nth=1' --junit=run.xml -- ./my_app\n"
        "  rpma-sim run --device=siw -- ./my_app\n"
        "  rpma-sim run -- ibv_devinfo\n"
        "  rpma-sim run -- rping -s -a 127.0.0.1 -C 3   # and `rpma-sim run -- rping -c ...`\n"
        "  rpma-sim run --upstream-librpma --faults='ibv_post_send:fail=EIO:nth=1' -- ./my_app\n"
        "  rpma-sim run --faults='ibv_get_cq_event:fail=EIO:nth=1' -- ./my_app\n"
        "  rpma-sim run --seed=7 --scenario=flaky_link.txt --trace=run.trace -- ./my_app\n"};
  }
  if (name == "sweep") {
    return {
        "rpma-sim sweep [--device=D,...] [--seed=S] [-j N] [--timeout=T] [--max-runs=M]\n"
        "               [--points=P,...] [--report=FILE] [--junit=FILE] [--shard=K/N] [--leaks]\n"
        "               [--lib=DIR] [--verbs-lib=DIR] [--upstream-librpma] -- PROGRAM [ARGS...]",
        "Runs PROGRAM once with no fault to count how often each fault point is hit\n"
        "(RPMA_SIM_STATS), then once per hit of every point that can fail, with that hit\n"
        "failed: --faults='<point>:fail=EIO:nth=<n>' (ENOMEM for malloc). With --max-runs,\n"
        "the runs are shared fairly between the points and spread over each point's hits.\n"
        "N runs at a time; a run still going after --timeout is killed with its process\n"
        "group. Each run is clean (exit 0), nonzero (exit > 0: the program reported the\n"
        "fault), crashed (a signal or a sanitizer error), hung (timed out), leaked (with\n"
        "--leaks) or kept (a destroy call failed and the NIC kept its object, as a real\n"
        "provider does: no leak of the program's). Each run that crashed, hung or leaked\n"
        "prints the one-line command that replays it. A progress bar is drawn on a terminal\n"
        "(plain lines elsewhere); a table per point ends the sweep.\n"
        "--shard=K/N runs part K of N of the runs (by default Bazel's TEST_TOTAL_SHARDS /\n"
        "TEST_SHARD_INDEX when set); `rpma-sim report merge` joins the shards' reports.\n"
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
        "  rpma-sim sweep --shard=1/3 --report=s1.json --junit=s1.xml -- ./my_app\n"};
  }
  if (name == "report") {
    return {"rpma-sim report merge [--report=OUT.json] [--junit=OUT.xml] SHARD.json...",
            "Joins the JSON reports (sweep --report) of the shards of one sweep (sweep\n"
            "--shard=K/N, K = 1..N) into one table per point, as the whole sweep prints it, and\n"
            "with --report one JSON report and with --junit one JUnit XML of every run. Reports of\n"
            "different sweeps (program, device, seed, --max-runs, leak checker) or overlapping\n"
            "shards (the same shard twice, a whole sweep's report among shards) are an error\n"
            "(exit 2). A missing shard is said, and fails the merge (exit 1), as does any run that\n"
            "crashed or hung (or leaked, with --leaks).",
            "  rpma-sim report merge s1.json s2.json s3.json\n"
            "  rpma-sim report merge --report=sweep.json --junit=sweep.xml shard-*.json\n"};
  }
  return {"rpma-sim trace FILE [--chrome=OUT.json]  |  rpma-sim trace FILE... --chrome=OUT.json",
          "Reads a trace that `rpma-sim run --trace=FILE` (RPMA_SIM_TRACE) wrote. Without\n"
          "--chrome: one readable line per event (simulated time, what happened), then a summary\n"
          "and whether the end line's fingerprint matches the events. With --chrome: Chrome Trace\n"
          "Event JSON for https://ui.perfetto.dev or chrome://tracing: one track per QP and per\n"
          "CQ, a slice per work request from its post to its completion, instant events for\n"
          "connection-manager events and injected faults. Several FILEs (the processes of one\n"
          "run, RPMA_SIM_TRACE=run.%p.trace) merge into one timeline with a process each, each\n"
          "on its own simulated clock (--chrome is then required).",
          "  rpma-sim trace run.trace\n"
          "  rpma-sim trace run.trace --chrome=run.json\n"
          "  rpma-sim trace run.*.trace --chrome=run.json\n"};
}

// `text` wrapped at kColumns, to be printed where the cursor is at `first_column`; the lines
// after the first start with `indent` blanks. Ends with a newline.
std::string Wrap(absl::string_view text, size_t indent, size_t first_column) {
  constexpr size_t kColumns = 100;
  std::string out;
  size_t column = first_column;
  bool line_empty = true;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line_empty && column + 1 + word.size() > kColumns) {
      absl::StrAppend(&out, "\n", std::string(indent, ' '));
      column = indent;
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++column;
    }
    absl::StrAppend(&out, word);
    column += word.size();
    line_empty = false;
  }
  out += '\n';
  return out;
}

// What a flag's value is, in its help line: --seed=S, -j N.
const char* ValuePlaceholder(absl::string_view name) {
  if (name == "seed") return "S";
  if (name == "faults") return "SPEC";
  if (name == "lib" || name == "verbs_lib" || name == "upstream_lib") return "DIR";
  if (name == "j") return "N";
  if (name == "timeout") return "T";
  if (name == "max_runs") return "M";
  if (name == "points") return "P,...";
  if (name == "device") return "D";
  if (name == "chrome") return "OUT.json";
  if (name == "shard") return "K/N";
  return "FILE";
}

void PrintHelp(absl::string_view subcommand) {
  if (subcommand.empty()) {
    std::fputs(absl::ProgramUsageMessage().data(), stdout);
    return;
  }
  SubcommandHelp help = HelpOf(subcommand);
  std::printf("Usage: %s\n\n%s\n", help.synopsis, help.description);
  for (const SubcommandSpec& s : Subcommands()) {
    if (s.name != subcommand || s.flags.empty()) continue;
    std::printf("\nFlags:\n");
    for (const std::string& name : s.flags) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      if (flag == nullptr) continue;
      std::string spelling = FlagSpelling(name);
      std::string default_value = flag->DefaultValue();
      std::printf("  %s", spelling.c_str());
      if (!flag->IsOfType<bool>()) {
        std::printf("%s%s", name.size() == 1 ? " " : "=", ValuePlaceholder(name));
      }
      if (!default_value.empty() && name != "seed") {
        std::printf("  (default: %s)", default_value.c_str());
      }
      std::printf("\n      %s", Wrap(flag->Help(), 6, 6).c_str());
    }
  }
  std::printf("\nExamples:\n%s", help.examples);
}

int Usage(absl::string_view message) {
  std::fprintf(stderr, "rpma-sim: %s\nRun `rpma-sim --help` for usage.\n",
               std::string(message).c_str());
  return kExitUsage;
}

// How replay lines call rpma-sim: as it was called when that was a path, else by name.
std::string ToolName(const char* argv0) {
  std::string name = argv0 != nullptr ? argv0 : "";
  return name.find('/') != std::string::npos ? name : "rpma-sim";
}

// The directory of softrpma's librpma.so.0 that runs get in LD_LIBRARY_PATH: --lib, which must
// hold it, or the one found near rpma-sim. None: an error is printed and nullopt returned (a
// program linked against the distro's librpma would otherwise run on the distro's library, on
// no simulated NIC at all).
std::optional<std::string> ResolveLibDir(const std::string& lib_flag, const char* argv0) {
  absl::StatusOr<std::string> dir = FindLibDir(lib_flag, argv0);
  if (dir.ok()) return *dir;
  if (!lib_flag.empty()) {
    Usage(dir.status().message());
  } else {
    std::fprintf(stderr, "rpma-sim: %s\n", std::string(dir.status().message()).c_str());
  }
  return std::nullopt;
}

// The libraries of a run (sim_env.h): the flags as given, for replay lines, and the directories
// they lead to.
struct Libraries {
  LibraryFlags flags;
  std::string lib_dir;           // softrpma's librpma.so.0; "" with --upstream-librpma
  std::string verbs_lib_dir;     // the verbs shim's
  bool upstream_librpma = false;
  std::string upstream_lib_dir;  // --upstream-lib's directory; "" for the system's
};

// The libraries the flags ask for, each found; nullopt with the error printed (a missing shim,
// or a missing upstream librpma with --upstream-librpma, would make the run a run on something
// else than asked).
std::optional<Libraries> ResolveLibraries(const char* argv0) {
  Libraries libraries;
  libraries.flags.lib = absl::GetFlag(FLAGS_lib);
  libraries.flags.verbs_lib = absl::GetFlag(FLAGS_verbs_lib);
  libraries.flags.upstream_librpma = absl::GetFlag(FLAGS_upstream_librpma);
  libraries.flags.upstream_lib = absl::GetFlag(FLAGS_upstream_lib);
  libraries.upstream_librpma =
      libraries.flags.upstream_librpma || !libraries.flags.upstream_lib.empty();
  if (libraries.upstream_librpma) {
    if (!libraries.flags.lib.empty()) {
      Usage("--lib names softrpma's librpma, which --upstream-librpma keeps out: give one of them");
      return std::nullopt;
    }
    absl::StatusOr<std::string> upstream =
        FindUpstreamLibDir(libraries.flags.upstream_lib, SystemLibDirs());
    if (!upstream.ok()) {
      std::fprintf(stderr, "rpma-sim: --upstream-librpma: %s\n",
                   std::string(upstream.status().message()).c_str());
      return std::nullopt;
    }
    // The system's is found by the loader itself: its directory stays out of LD_LIBRARY_PATH,
    // where it would come before the inherited entries.
    if (!libraries.flags.upstream_lib.empty()) libraries.upstream_lib_dir = *upstream;
  } else {
    std::optional<std::string> lib_dir = ResolveLibDir(libraries.flags.lib, argv0);
    if (!lib_dir.has_value()) return std::nullopt;
    libraries.lib_dir = *lib_dir;
  }
  absl::StatusOr<std::string> verbs = FindVerbsLibDir(libraries.flags.verbs_lib, argv0);
  if (!verbs.ok()) {
    if (!libraries.flags.verbs_lib.empty()) {
      Usage(verbs.status().message());
    } else {
      std::fprintf(stderr, "rpma-sim: %s\n", std::string(verbs.status().message()).c_str());
    }
    return std::nullopt;
  }
  if (libraries.upstream_librpma && HoldsOurLibrpma(*verbs)) {
    // (One directory holding rpma-sim, our librpma and the shim, as an install tree may.)
    std::fprintf(stderr,
                 "rpma-sim: --upstream-librpma: the verbs shim's directory %s also holds "
                 "softrpma's librpma.so.0, which the program would load instead of upstream's; "
                 "give --verbs-lib=DIR a directory with the shim only\n",
                 verbs->c_str());
    return std::nullopt;
  }
  libraries.verbs_lib_dir = *verbs;
  return libraries;
}

void ApplyLibraries(const Libraries& libraries, SimConfig* config) {
  config->lib_dir = libraries.lib_dir;
  config->verbs_lib_dir = libraries.verbs_lib_dir;
  config->upstream_librpma = libraries.upstream_librpma;
  config->upstream_lib_dir = libraries.upstream_lib_dir;
}

int Points() {
  std::vector<PointInfo> points = ListPoints();
  size_t width = 0;
  for (const PointInfo& p : points) width = std::max(width, p.name.size());
  for (const PointInfo& p : points) {
    std::string actions = p.actions.empty() ? "none" : absl::StrJoin(p.actions, " ");
    if (p.accepts_qp) absl::StrAppend(&actions, "; condition qp=<n> too");
    if (!p.can_fail) absl::StrAppend(&actions, " (returns void: counted, cannot fail)");
    std::printf("%-*s  %s", static_cast<int>(width), p.name.c_str(),
                Wrap(p.description, width + 2, width + 2).c_str());
    std::printf("%*s%s", static_cast<int>(width + 2), "",
                Wrap(absl::StrCat("actions: ", actions), width + 2, width + 2).c_str());
  }
  return 0;
}

int Devices() {
  std::fputs(FormatDevices().c_str(), stdout);
  return 0;
}

// The devices --device names (empty when not given: the simulator's default), or a usage error
// printed and nullopt.
std::optional<std::vector<std::string>> DevicesFlag(const CommandLine& line) {
  if (!line.given.contains("device")) return std::vector<std::string>{};
  absl::StatusOr<std::vector<std::string>> devices = ParseDeviceList(absl::GetFlag(FLAGS_device));
  if (!devices.ok()) {
    Usage(absl::StrCat("--device: ", devices.status().message()));
    return std::nullopt;
  }
  return *devices;
}

// --report=FILE for one device of several: FILE.json -> FILE.<device>.json (FILE -> FILE.<device>).
std::string ReportPathFor(const std::string& path, const std::string& device) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return absl::StrCat(path, ".", device);
  }
  return absl::StrCat(path.substr(0, dot), ".", device, path.substr(dot));
}

// Writes `text` to `path`; false (said on stderr) when it cannot.
bool WriteTextFile(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::fprintf(stderr, "rpma-sim: cannot write the %s %s\n", what, path.c_str());
    return false;
  }
  return true;
}

// `run --junit=FILE`: PROGRAM as a child (its output captured, then printed), classified as a
// sweep run is, and one JUnit test case for it. Returns PROGRAM's exit status (128 + the
// signal that ended it).
int RunWithJunit(const SimConfig& config, const LibraryFlags& library_flags,
                 const CommandLine& line, const char* argv0, const std::string& junit) {
  const char* tmp = std::getenv("TMPDIR");
  std::string output_path =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/rpma-sim-run.XXXXXX");
  const int fd = mkstemp(output_path.data());
  if (fd < 0) {
    std::fprintf(stderr, "rpma-sim: cannot create a file for the output under $TMPDIR or /tmp\n");
    return 1;
  }
  close(fd);
  ChildCommand command = SimCommand(config, line.program);
  command.output_path = output_path;
  absl::StatusOr<std::vector<ChildExit>> exits =
      RunChildren({command}, 1, absl::InfiniteDuration(), nullptr);
  std::ifstream file(output_path, std::ios::binary);
  const std::string output((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
  std::remove(output_path.c_str());
  std::fwrite(output.data(), 1, output.size(), stdout);
  std::fflush(stdout);
  if (!exits.ok()) {
    std::fprintf(stderr, "rpma-sim: %s\n", std::string(exits.status().message()).c_str());
    return absl::IsCancelled(exits.status()) ? 130 : 1;
  }
  const ChildExit& exit = (*exits)[0];
  const RunVerdict verdict = Classify(exit, output, LeakChecker::kNone, absl::InfiniteDuration());
  const int status = exit.signal != 0 ? 128 + exit.signal : exit.exit_code;
  const std::string spec = config.faults.value_or("");
  JunitCase c;
  c.name = spec.empty() ? "run without a fault" : spec;
  c.classname = absl::StrCat("rpma-sim.run.", config.device.empty() ? DefaultDevice() : config.device,
                             ".", std::filesystem::path(line.program[0]).filename().string());
  c.time_s = absl::ToDoubleSeconds(exit.duration);
  // A test passes when PROGRAM exits 0 (what `run` returns) and no sanitizer reported.
  c.failed = status != 0 || IsFailure(verdict.run_class);
  const std::string outcome =
      absl::StrCat(RunClassName(verdict.run_class), " (", verdict.detail, ")");
  if (c.failed) {
    c.failure_message = outcome;
    c.failure_type = RunClassName(verdict.run_class);
    c.failure_text = absl::StrCat(outcome, ": ", spec.empty() ? "no fault" : spec, "\n  replay: ",
                                  ReplayCommand(ToolName(argv0), config, library_flags,
                                                line.program),
                                  "\n");
    c.system_out = output.size() > 2000 ? output.substr(output.size() - 2000) : output;
  }
  JunitSuite suite{absl::StrCat("rpma-sim run ", ShellJoin(line.program)), {c}};
  if (!WriteTextFile(junit, JunitXml(suite.name, {suite}), "junit file") && status == 0) return 1;
  return status;
}

// --execution: "" (the default) or a mode the simulator knows; nullopt after a usage message.
std::optional<std::string> ExecutionFlag() {
  std::string value = absl::GetFlag(FLAGS_execution);
  if (value.empty() || value == "async" || value == "eager") return value;
  Usage(absl::StrCat("--execution: \"", value, "\" is neither async nor eager"));
  return std::nullopt;
}

int Run(const CommandLine& line, const char* argv0) {
  SimConfig config;
  std::optional<std::string> execution = ExecutionFlag();
  if (!execution.has_value()) return kExitUsage;
  config.execution = *execution;
  config.race_detector = absl::GetFlag(FLAGS_races);
  std::optional<std::vector<std::string>> devices = DevicesFlag(line);
  if (!devices.has_value()) return kExitUsage;
  if (devices->size() > 1) return Usage("--device: run takes one device (sweep takes a list)");
  if (!devices->empty()) config.device = devices->front();
  if (line.given.contains("seed")) config.seed = absl::GetFlag(FLAGS_seed);
  if (line.given.contains("faults")) {
    config.faults = absl::GetFlag(FLAGS_faults);
    if (absl::Status status = CheckFaultSpec(*config.faults); !status.ok()) {
      std::fprintf(stderr, "rpma-sim: --faults: %s\n", std::string(status.message()).c_str());
      return kExitUsage;
    }
  }
  config.scenario = absl::GetFlag(FLAGS_scenario);
  if (!config.scenario.empty()) {
    if (absl::Status status = CheckScenarioFile(config.scenario); !status.ok()) {
      std::fprintf(stderr, "rpma-sim: --scenario: %s\n", std::string(status.message()).c_str());
      return kExitUsage;
    }
  }
  config.trace = absl::GetFlag(FLAGS_trace);
  config.stats = absl::GetFlag(FLAGS_stats);
  std::optional<Libraries> libraries = ResolveLibraries(argv0);
  if (!libraries.has_value()) return kExitUsage;
  ApplyLibraries(*libraries, &config);
  std::fflush(stdout);
  const std::string junit = absl::GetFlag(FLAGS_junit);
  if (!junit.empty()) return RunWithJunit(config, libraries->flags, line, argv0, junit);
  absl::Status status = ExecInPlace(SimCommand(config, line.program));
  std::fprintf(stderr, "rpma-sim: cannot run %s: %s\n", line.program[0].c_str(),
               std::string(status.message()).c_str());
  return 127;
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

int ReportCommand(const CommandLine& line) {
  if (line.args[0] != "merge") {
    return Usage(absl::StrCat("unknown report command \"", line.args[0],
                              "\"; rpma-sim report merge SHARD.json..."));
  }
  std::vector<std::string> names(line.args.begin() + 1, line.args.end());
  std::vector<SweepReport> reports;
  for (const std::string& name : names) {
    absl::StatusOr<std::string> text =
        softrpma::sim::ReadFileUpTo(name, kMaxReportBytes, "sweep report");
    if (!text.ok()) {
      std::fprintf(stderr, "rpma-sim: %s\n", std::string(text.status().message()).c_str());
      return kExitUsage;
    }
    absl::StatusOr<SweepReport> report = ParseReport(*text);
    if (!report.ok()) {
      std::fprintf(stderr, "rpma-sim: %s is not a sweep report: %s\n", name.c_str(),
                   std::string(report.status().message()).c_str());
      return kExitUsage;
    }
    reports.push_back(*std::move(report));
  }
  std::vector<std::string> warnings;
  absl::StatusOr<SweepReport> merged = MergeReports(reports, names, &warnings);
  if (!merged.ok()) {
    std::fprintf(stderr, "rpma-sim: %s\n", std::string(merged.status().message()).c_str());
    return kExitUsage;
  }
  for (const std::string& warning : warnings) {
    std::fprintf(stderr, "rpma-sim: warning: %s\n", warning.c_str());
  }
  std::printf("rpma-sim report merge: %s\n", ShellJoin(merged->program).c_str());
  if (merged->merged_shards == 0) {
    std::printf("device %s, the report of a whole sweep (no shards), %zu runs\n",
                merged->device.c_str(), merged->runs.size());
  } else {
    std::printf("device %s, %llu shard reports of %llu, %zu runs of the plan's %llu\n",
                merged->device.c_str(), static_cast<unsigned long long>(merged->merged_shards),
                static_cast<unsigned long long>(merged->merged_shards +
                                                merged->missing_shards.size()),
                merged->runs.size(), static_cast<unsigned long long>(merged->plan_runs));
  }
  std::fputs(FormatTable(*merged).c_str(), stdout);
  const std::string report_path = absl::GetFlag(FLAGS_report);
  const std::string junit_path = absl::GetFlag(FLAGS_junit);
  bool written = true;
  if (!report_path.empty()) {
    written = WriteTextFile(report_path, ReportJson(*merged) + "\n", "report") && written;
    if (written) std::printf("report: %s\n", report_path.c_str());
  }
  if (!junit_path.empty()) {
    written = WriteTextFile(junit_path,
                            JunitXml(absl::StrCat("rpma-sim sweep ", ShellJoin(merged->program)),
                                     {ReportJunit(*merged)}),
                            "junit file") &&
              written;
    if (written) std::printf("junit: %s\n", junit_path.c_str());
  }
  size_t failed = 0;
  for (const ReportRun& r : merged->runs) failed += r.fails_sweep ? 1 : 0;
  if (!merged->missing_shards.empty()) {
    std::printf("merge INCOMPLETE: no report of shard%s %s of %llu\n",
                merged->missing_shards.size() > 1 ? "s" : "",
                absl::StrJoin(merged->missing_shards, ", ").c_str(),
                static_cast<unsigned long long>(merged->merged_shards +
                                                merged->missing_shards.size()));
  }
  if (merged->clean_run.fails_sweep) {
    std::printf("sweep FAILED: a clean run failed (%s) without any fault\n  replay: %s\n",
                merged->clean_run.detail.c_str(), merged->clean_run.replay.c_str());
  } else if (failed > 0) {
    std::printf("sweep FAILED: %zu of %zu runs failed the sweep:\n", failed, merged->runs.size());
    for (const ReportRun& r : merged->runs) {
      if (!r.fails_sweep) continue;
      std::printf("%s (%s): %s\n  replay: %s\n", r.class_name.c_str(), r.detail.c_str(),
                  r.spec.c_str(), r.replay.c_str());
    }
  } else if (merged->interrupted) {
    std::printf("sweep INTERRUPTED: a shard was interrupted\n");
  } else if (merged->missing_shards.empty()) {
    std::printf("sweep passed: %zu runs, none failed the sweep\n", merged->runs.size());
  }
  if (!written) return 1;
  return ReportFailed(*merged) ? 1 : 0;
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
      return Usage(absl::StrCat("--points: no fault point is called \"", point,
                                "\" (`rpma-sim points` lists them)"));
    }
    options.points.emplace_back(point);
  }
  options.report_path = absl::GetFlag(FLAGS_report);
  options.junit_path = absl::GetFlag(FLAGS_junit);
  std::optional<std::optional<Shard>> shard = ShardOfSweep(line);
  if (!shard.has_value()) return kExitUsage;
  options.shard = *shard;
  options.leaks = absl::GetFlag(FLAGS_leaks);
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
  for (size_t i = 0; i < devices->size(); ++i) {
    options.device = (*devices)[i];
    if (!report.empty()) options.report_path = ReportPathFor(report, options.device);
    if (!junit.empty()) options.junit_path = ReportPathFor(junit, options.device);
    if (i > 0) std::printf("\n");
    std::printf("== device %s (%zu of %zu) ==\n", options.device.c_str(), i + 1,
                devices->size());
    std::fflush(stdout);
    const int device_status = RunSweep(options, stdout);
    if (device_status == kSweepInterrupted || device_status == kSweepUsage) return device_status;
    status = std::max(status, device_status);
  }
  return status;
}

int TraceCommand(const CommandLine& line) {
  std::string chrome = absl::GetFlag(FLAGS_chrome);
  if (line.args.size() > 1 && chrome.empty()) {
    return Usage("several trace files are merged into one Chrome timeline: give --chrome=OUT.json");
  }
  std::vector<Trace> traces;
  for (const std::string& path : line.args) {
    absl::StatusOr<std::string> text = ReadTraceFile(path);
    if (!text.ok()) {
      std::fprintf(stderr, "rpma-sim: %s\n", std::string(text.status().message()).c_str());
      return 1;
    }
    absl::StatusOr<Trace> trace = ParseTrace(*text);
    if (!trace.ok()) {
      std::fprintf(stderr, "rpma-sim: %s: %s\n", path.c_str(),
                   std::string(trace.status().message()).c_str());
      return 1;
    }
    for (const std::string& warning : trace->warnings) {
      std::fprintf(stderr, "rpma-sim: %s: warning: %s\n", path.c_str(), warning.c_str());
    }
    traces.push_back(*std::move(trace));
  }
  if (chrome.empty()) {
    std::fputs(FormatTrace(traces[0]).c_str(), stdout);
    return 0;
  }
  std::string json;
  size_t events = 0;
  for (const Trace& trace : traces) events += trace.events.size();
  if (traces.size() == 1) {
    json = ChromeTraceJson(traces[0]);
  } else {
    std::vector<NamedTrace> named;
    for (size_t i = 0; i < traces.size(); ++i) {
      named.push_back(NamedTrace{std::filesystem::path(line.args[i]).filename().string(),
                                 &traces[i]});
    }
    json = ChromeTraceJson(named);
  }
  if (chrome == "-") {
    std::fputs(json.c_str(), stdout);
    std::fputs("\n", stdout);
    return 0;
  }
  std::ofstream out(chrome, std::ios::trunc);
  out << json << "\n";
  out.close();
  if (!out) {
    std::fprintf(stderr, "rpma-sim: cannot write %s\n", chrome.c_str());
    return 1;
  }
  std::printf("wrote %s (%zu events%s): open it in https://ui.perfetto.dev or chrome://tracing\n",
              chrome.c_str(), events,
              traces.size() > 1 ? absl::StrCat(", ", traces.size(), " processes").c_str() : "");
  return 0;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kOverview);
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<CommandLine> line = ParseArgs(Subcommands(), args);
  if (!line.ok()) return Usage(line.status().message());
  if (line->help) {
    PrintHelp(line->subcommand);
    return 0;
  }
  // The flags were checked and set above; absl's own parse sees the same, normalized.
  std::vector<char*> absl_argv = {argv[0]};
  for (std::string& word : line->flag_words) absl_argv.push_back(word.data());
  absl::ParseCommandLine(static_cast<int>(absl_argv.size()), absl_argv.data());

  const std::string& sub = line->subcommand;
  if (sub == "points") return Points();
  if (sub == "devices") return Devices();
  if (sub == "run") return Run(*line, argv[0]);
  if (sub == "sweep") return Sweep(*line, argv[0]);
  if (sub == "report") return ReportCommand(*line);
  return TraceCommand(*line);
}

}  // namespace
}  // namespace softrpma::rpma_sim

int main(int argc, char** argv) { return softrpma::rpma_sim::Main(argc, argv); }
