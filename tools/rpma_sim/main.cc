// rpma-sim: runs librpma programs on softrpma's simulated NIC. Subcommands:
//   points  every fault point of the simulator
//   devices the devices the simulated NIC can stand for
//   run     one run of a program with a seed, faults / a scenario and a trace
//   sweep   fail every hit of every fault point in turn; classify and report each run
//   trace   a trace as readable lines or as Chrome Trace Event JSON
//   report  `report merge`: the reports of the shards of a sweep, joined
// `rpma-sim --help` explains each with examples; docs/RPMA_SIM.md is the manual.
// This file holds the overview and the dispatch; each subcommand, its flags and its help are
// in commands/ (command.h is the table).

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "simverbs/sim/fabric/wire.h"
#include "tools/rpma_sim/command_line.h"
#include "tools/rpma_sim/commands/command.h"
#include "tools/rpma_sim/commands/common.h"
#include "tools/rpma_sim/env_page.h"
#include "tools/rpma_sim/man_page.h"

namespace softrpma::rpma_sim {
namespace {

// THE OVERVIEW (`rpma-sim --help`), in parts that the man page (`rpma-sim --man`) uses too.
constexpr char kSummary[] =
    R"(run a librpma program, unmodified, on softrpma's simulated NIC; inject faults
where you choose, sweep every fault point of the program, and read the simulator's traces.)";
constexpr char kUsageLines[] =
    R"(  rpma-sim points
  rpma-sim devices
  rpma-sim run   [--device=D] [--seed=S] [--faults=SPEC] [--scenario=FILE] [--trace=FILE]
                 [--stats=FILE] [--lib=DIR] [--verbs-lib=DIR] [--upstream-librpma]
                 [--junit=FILE] [--expect-failure] [--device-files] -- PROGRAM [ARGS...]
  rpma-sim sweep [--device=D,...] [--seed=S] [-j N] [--timeout=T] [--max-runs=M]
                 [--points=P,...] [--report=FILE] [--junit=FILE] [--shard=K/N] [--leaks]
                 [--lib=DIR] [--verbs-lib=DIR] [--upstream-librpma] -- PROGRAM [ARGS...]
  rpma-sim trace FILE [--chrome=OUT.json]
  rpma-sim trace FILE FILE... --chrome=OUT.json   (the processes of one run, merged)
  rpma-sim trace --fingerprint FILE...   (one line that two runs compare by)
  rpma-sim report merge [--report=OUT.json] [--junit=OUT.xml] SHARD.json...
  rpma-sim help [SUBCOMMAND]          (or: rpma-sim SUBCOMMAND --help)
  rpma-sim help env                   (the environment variables the simulated NIC reads)
  rpma-sim --version                  (softrpma's, the librpma API's, the fabric protocol's)
  rpma-sim --man                      (this help as the man page rpma-sim(1), in roff)
  rpma-sim --man-env                  (help env as the man page softrpma-env(7), in roff))";
constexpr char kSubcommands[] =
    R"(  points  List every fault point of the simulated NIC: the verbs / rdma_cm call it stands for
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
          one report (and JUnit XML), as if the sweep had run whole.)";
constexpr char kProgramText[] =
    R"(PROGRAM is any program that uses librpma: one built against //api:rpma, or one linked against
the distro's librpma.so.0 (LD_LIBRARY_PATH then leads it to softrpma's). It may also be a
program that calls libibverbs / librdmacm itself (ibv_devinfo, rping, a verbs application):
LD_LIBRARY_PATH leads it to the verbs shim, whose device is the same simulated NIC, with the
same seeds, faults and traces. --upstream-librpma runs a librpma program on upstream librpma
(the distro's) over the shim instead of on softrpma's. The command line is the whole
configuration: RPMA_SIM_* variables inherited from the environment are removed, so that a
replay line reproduces its run, and RPMA_BACKEND is set to sim (ibverbs with
--upstream-librpma).)";
constexpr char kExamples[] =
    R"(  rpma-sim points
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
  rpma-sim report merge --report=all.json s1.json s2.json s3.json)";
constexpr char kExitStatus[] =
    R"(Exit status: run: PROGRAM's (127: it could not be started); sweep: 0 when no run crashed, hung
or leaked, else 1 (130: interrupted); report merge: as sweep (1 also when a shard is missing);
points, devices, trace: 0, or 1 on an error; every
subcommand: 2 for a usage error, an unknown device or a malformed fault spec or scenario.)";
constexpr char kManual[] =
    R"(The manual: docs/RPMA_SIM.md. Fault specs: docs/FAULTS.md. Traces: docs/TRACE.md. Devices:
docs/DEVICES.md.)";

const std::string& Overview() {
  static const std::string* overview = new std::string(
      absl::StrCat("rpma-sim: ", kSummary, "\n\nUsage:\n", kUsageLines, "\n\nSubcommands:\n",
                   kSubcommands, "\n\n", kProgramText, "\n\nExamples:\n", kExamples, "\n\n",
                   kExitStatus, "\n", kManual, "\n"));
  return *overview;
}

// The subcommands, in the overview's order.
const std::vector<const Command*>& Commands() {
  static const auto* commands = new std::vector<const Command*>{
      &PointsCommand(), &DevicesCommand(), &RunCommand(),
      &SweepCommand(), &TraceCommand(), &ReportCommand(),
  };
  return *commands;
}

// What the command line parser knows of each subcommand.
const std::vector<SubcommandSpec>& Subcommands() {
  static const auto* subcommands = [] {
    auto* specs = new std::vector<SubcommandSpec>;
    for (const Command* command : Commands()) specs->push_back(command->spec);
    return specs;
  }();
  return *subcommands;
}

// The subcommand called `name`. REQUIRES: it is one (the parser checked).
const Command& CommandNamed(absl::string_view name) {
  for (const Command* command : Commands()) {
    if (command->spec.name == name) return *command;
  }
  std::abort();
}

// What a flag's value is, in its help line: --seed=S, -j N.
const char* ValuePlaceholder(absl::string_view name) {
  if (name == "seed") return "S";
  if (name == "faults") return "SPEC";
  if (name == "lib" || name == "verbs_lib" || name == "upstream_lib") return "DIR";
  if (name == "j" || name == "seeds") return "N";
  if (name == "timeout") return "T";
  if (name == "max_runs") return "M";
  if (name == "points") return "P,...";
  if (name == "device") return "D";
  if (name == "chrome") return "OUT.json";
  if (name == "shard") return "K/N";
  if (name == "execution") return "async|eager";
  if (name == "kinds") return "fail,wc,conn,kill";
  if (name == "keep_traces") return "DIR";
  if (name == "plan_from") return "REPORT";
  return "FILE";
}

// The flags of `command` as its help shows them, in help order: one table for --help and the
// man page.
std::vector<ManFlag> FlagLines(const Command& command) {
  std::vector<ManFlag> lines;
  for (const std::string& name : command.spec.flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    ManFlag line;
    line.spelling = FlagSpelling(name);
    if (!flag->IsOfType<bool>()) line.placeholder = ValuePlaceholder(name);
    if (name != "seed") line.default_value = flag->DefaultValue();
    line.help = flag->Help();
    lines.push_back(std::move(line));
  }
  return lines;
}

void PrintHelp(absl::string_view subcommand) {
  if (subcommand.empty()) {
    std::fputs(absl::ProgramUsageMessage().data(), stdout);
    return;
  }
  const Command& command = CommandNamed(subcommand);
  std::printf("Usage: %s\n\n%s\n", command.synopsis, command.description);
  const std::vector<ManFlag> flags = FlagLines(command);
  if (!flags.empty()) std::printf("\nFlags:\n");
  for (const ManFlag& flag : flags) {
    std::printf("  %s", flag.spelling.c_str());
    if (!flag.placeholder.empty()) {
      std::printf("%s%s", flag.spelling.size() == 2 ? " " : "=", flag.placeholder.c_str());
    }
    if (!flag.default_value.empty()) std::printf("  (default: %s)", flag.default_value.c_str());
    std::printf("\n      %s", Wrap(flag.help, 6, 6).c_str());
  }
  std::printf("\nExamples:\n%s", command.examples);
}

// softrpma's own version (its changes to rpma-sim, the simulator and the shim), beside the
// librpma API it implements and the fabric protocol its processes speak.
constexpr char kSoftrpmaVersion[] = "0.29.0";
constexpr char kLibrpmaApiVersion[] = "1.3";

// rpma-sim(1): the overview's parts and every subcommand's help, as roff (man_page.h).
std::string ManPageText() {
  ManSource source;
  source.version = absl::StrCat("softrpma ", kSoftrpmaVersion);
  source.summary = absl::StrReplaceAll(kSummary, {{"\n", " "}});
  // A synopsis's continuation lines are indented for the "Usage: " that --help prints first.
  auto synopsis = [](const Command& command) {
    return absl::StrReplaceAll(command.synopsis, {{"\n       ", "\n"}});
  };
  for (const Command* command : Commands()) {
    absl::StrAppend(&source.synopsis, synopsis(*command), "\n");
  }
  absl::StrAppend(&source.synopsis,
                  "rpma-sim help [SUBCOMMAND]\nrpma-sim help env\nrpma-sim --version\n"
                  "rpma-sim --man\nrpma-sim --man-env\n");
  source.description = absl::StrCat(kProgramText, "\n\n", "Subcommands:\n", kSubcommands);
  for (const Command* command : Commands()) {
    source.commands.push_back(ManCommand{command->spec.name, synopsis(*command),
                                         command->description, FlagLines(*command),
                                         command->examples});
  }
  source.exit_status = kExitStatus;
  source.see_also = absl::StrCat(
      "softrpma-env(7): the environment variables. ", kManual,
      "\n(in softrpma's source tree, and in share/doc/softrpma/ of an installed prefix)");
  return ManPage(source);
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(Overview());
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--version" || args[0] == "version")) {
    std::printf("rpma-sim (softrpma) %s\nlibrpma API %s (librpma.so.0)\nfabric protocol %d\n",
                kSoftrpmaVersion, kLibrpmaApiVersion, sim::wire::kProtocolVersion);
    return 0;
  }
  if (args.size() == 1 && args[0] == "--man") {
    std::fputs(ManPageText().c_str(), stdout);
    return 0;
  }
  if (args.size() == 1 && args[0] == "--man-env") {
    std::fputs(EnvManPage(absl::StrCat("softrpma ", kSoftrpmaVersion)).c_str(), stdout);
    return 0;
  }
  if (args.size() == 2 && args[0] == "help" && args[1] == "env") {
    std::fputs(EnvHelpText().c_str(), stdout);
    return 0;
  }
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

  return CommandNamed(line->subcommand).run(*line, argv[0]);
}

}  // namespace
}  // namespace softrpma::rpma_sim

int main(int argc, char** argv) { return softrpma::rpma_sim::Main(argc, argv); }
