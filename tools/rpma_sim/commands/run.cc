// `rpma-sim run`: PROGRAM once on the simulated NIC, in place of rpma-sim (or, with --junit or
// --expect-failure, as a child whose run is classified, and with --junit written as a JUnit test
// case).

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tools/rpma_sim/classify.h"
#include "tools/rpma_sim/command_line.h"
#include "tools/rpma_sim/commands/command.h"
#include "tools/rpma_sim/commands/common.h"
#include "tools/rpma_sim/device_files.h"
#include "tools/rpma_sim/junit.h"
#include "tools/rpma_sim/process.h"
#include "tools/rpma_sim/process_ends.h"
#include "tools/rpma_sim/sim_checks.h"
#include "tools/rpma_sim/sim_env.h"

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
ABSL_FLAG(bool, expect_failure, false,
          "the run passes when PROGRAM fails as a correct program does: a non-zero exit, no "
          "crash or sanitizer report in any of its processes (an injected fault it must "
          "report). Exits 0 then, 1 when PROGRAM exited 0; with --junit the test case says the "
          "same. As with --junit, rpma-sim waits for PROGRAM (stdin from /dev/null, its output "
          "printed when it ends)");

ABSL_FLAG(bool, device_files, false,
          "give PROGRAM the files a kernel driver would make for the device "
          "(/dev/infiniband/uverbs_softrpma0, /sys/class/infiniband/softrpma_sim0/...), which "
          "UCX needs to list it: in a mount namespace of the run's own (a user namespace too "
          "when not root); an error (exit 2) where namespaces are refused");

namespace softrpma::rpma_sim {
namespace {

// `run --junit=FILE` / `run --expect-failure`: PROGRAM as a child (its output captured, then
// printed), classified as a sweep run is, and with `junit` not "" one JUnit test case for it.
// Returns PROGRAM's exit status (128 + the signal that ended it); with `expect_failure`, 0 when
// PROGRAM failed as expected (a non-zero exit and no failure class), else that status or 1.
int RunAsChild(SimConfig config, const LibraryFlags& library_flags, const CommandLine& line,
               const char* argv0, const std::string& junit, bool expect_failure) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string tmp_dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::string output_path = absl::StrCat(tmp_dir, "/rpma-sim-run.XXXXXX");
  const int fd = mkstemp(output_path.data());
  if (fd < 0) {
    std::fprintf(stderr, "rpma-sim: cannot create a file for the output under $TMPDIR or /tmp\n");
    return 1;
  }
  close(fd);
  // Where every process of the run records how it ended: a script's crashed child fails the
  // test case too (TakeProcessEnds removes it).
  std::string run_dir = absl::StrCat(tmp_dir, "/rpma-sim-run.ends.XXXXXX");
  if (mkdtemp(run_dir.data()) == nullptr) {
    std::remove(output_path.c_str());
    std::fprintf(stderr, "rpma-sim: cannot create a directory under $TMPDIR or /tmp\n");
    return 1;
  }
  config.run_dir = run_dir;
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
  std::vector<std::string> errors;
  const std::vector<ProcessEnd> ends = TakeProcessEnds(run_dir, &errors);
  for (const std::string& error : errors) {
    std::fprintf(stderr, "rpma-sim: a process's end record (%s): %s\n", kRunDirVar,
                 error.c_str());
  }
  if (!exits.ok()) {
    std::fprintf(stderr, "rpma-sim: %s\n", std::string(exits.status().message()).c_str());
    return absl::IsCancelled(exits.status()) ? 130 : 1;
  }
  const ChildExit& exit = (*exits)[0];
  const RunVerdict verdict = WithProcessEnds(
      Classify(exit, output, LeakChecker::kNone, absl::InfiniteDuration()), ends, exit.pid,
      output);
  const int status = exit.signal != 0 ? 128 + exit.signal : exit.exit_code;
  const std::string spec = config.faults.value_or("");
  // Failed as a correct program fails: it exited non-zero and nothing a sweep calls a failure
  // (a signal, a sanitizer report, a crashed process of a script) happened.
  const bool failed_as_expected =
      exit.signal == 0 && exit.exit_code != 0 && !IsFailure(verdict.run_class);
  JunitCase c;
  c.name = spec.empty() ? "run without a fault" : spec;
  if (expect_failure) absl::StrAppend(&c.name, ", expected to fail");
  c.classname =
      absl::StrCat("rpma-sim.run.", config.device.empty() ? DefaultDevice() : config.device, ".",
                   std::filesystem::path(line.program[0]).filename().string());
  c.time_s = absl::ToDoubleSeconds(exit.duration);
  // A test passes when PROGRAM exits 0 (what `run` returns) and no sanitizer reported; with
  // --expect-failure, when it failed as expected.
  c.failed = expect_failure ? !failed_as_expected : status != 0 || IsFailure(verdict.run_class);
  std::string outcome = absl::StrCat(RunClassName(verdict.run_class), " (", verdict.detail, ")");
  if (expect_failure && status == 0 && !IsFailure(verdict.run_class)) {
    absl::StrAppend(&outcome, ", expected a failure (--expect-failure)");
    std::fprintf(stderr, "rpma-sim: %s exited 0; --expect-failure expected it to fail\n",
                 line.program[0].c_str());
  }
  if (c.failed) {
    c.failure_message = outcome;
    c.failure_type = RunClassName(verdict.run_class);
    c.failure_text = absl::StrCat(
        outcome, ": ", spec.empty() ? "no fault" : spec,
        "\n  replay: ", ReplayCommand(ToolName(argv0), config, library_flags, line.program), "\n");
    c.system_out = output.size() > 2000 ? output.substr(output.size() - 2000) : output;
  }
  JunitSuite suite{absl::StrCat("rpma-sim run ", ShellJoin(line.program)), {c}};
  const bool written = junit.empty() || WriteTextFile(junit, JunitXml(suite.name, {suite}),
                                                      "junit file");
  if (expect_failure) {
    if (!c.failed) return written ? 0 : 1;
    return status != 0 ? status : 1;
  }
  if (!written && status == 0) return 1;
  return status;
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
  if (absl::GetFlag(FLAGS_device_files)) {
    if (absl::Status status = EnterDeviceFiles(); !status.ok()) {
      std::fprintf(stderr, "rpma-sim: --device-files: %s\n",
                   std::string(status.message()).c_str());
      return kExitUsage;
    }
  }
  std::fflush(stdout);
  const std::string junit = absl::GetFlag(FLAGS_junit);
  const bool expect_failure = absl::GetFlag(FLAGS_expect_failure);
  if (!junit.empty() || expect_failure) {
    return RunAsChild(config, libraries->flags, line, argv0, junit, expect_failure);
  }
  absl::Status status = ExecInPlace(SimCommand(config, line.program));
  std::fprintf(stderr, "rpma-sim: cannot run %s: %s\n", line.program[0].c_str(),
               std::string(status.message()).c_str());
  return 127;
}

}  // namespace

const Command& RunCommand() {
  static const Command command{
      {"run",
       {"seed", "faults", "scenario", "trace", "stats", "lib", "verbs_lib", "upstream_librpma",
        "upstream_lib", "device", "execution", "races", "junit", "expect_failure",
        "device_files"},
       true,
       0,
       0},
      "rpma-sim run [--device=D] [--seed=S] [--faults=SPEC] [--scenario=FILE] "
      "[--trace=FILE]\n             [--stats=FILE] [--lib=DIR] [--verbs-lib=DIR] "
      "[--upstream-librpma] [--junit=FILE]\n             [--expect-failure] [--device-files] -- "
      "PROGRAM [ARGS...]",
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
      "a JUnit test case for it, failed unless PROGRAM exited 0 without a sanitizer report.\n"
      "With --expect-failure, rpma-sim waits for PROGRAM too, and the run passes (exit 0, and\n"
      "the test case of --junit) when PROGRAM failed as a correct program reports an injected\n"
      "fault: a non-zero exit and no crash or sanitizer report; it fails (exit 1) when PROGRAM\n"
      "exited 0, and with PROGRAM's status when it crashed.\n"
      "With --device-files, PROGRAM and its children see the files a kernel driver would\n"
      "make for the simulated device (/dev/infiniband/uverbs_softrpma0, a character device,\n"
      "and /sys/class/infiniband/softrpma_sim0 with its port's RoCE GID attributes), which\n"
      "UCX needs to list the device; they exist in a mount namespace of the run's own (with a\n"
      "user namespace when not root), so nothing else on the machine sees them. Where\n"
      "namespaces are refused it is an error (exit 2) and PROGRAM does not run.",
      "  rpma-sim run -- ./my_app\n"
      "  rpma-sim run --faults='ibv_post_send:fail=EIO:nth=1' --junit=run.xml -- ./my_app\n"
      "  rpma-sim run --faults='ibv_alloc_pd:fail=EIO:nth=1' --expect-failure -- ./my_app\n"
      "  rpma-sim run --device=siw -- ./my_app\n"
      "  rpma-sim run -- ibv_devinfo\n"
      "  rpma-sim run --device-files -- ucx_info -d\n"
      "  rpma-sim run -- rping -s -a 127.0.0.1 -C 3   # and `rpma-sim run -- rping -c ...`\n"
      "  rpma-sim run --upstream-librpma --faults='ibv_post_send:fail=EIO:nth=1' -- ./my_app\n"
      "  rpma-sim run --faults='ibv_get_cq_event:fail=EIO:nth=1' -- ./my_app\n"
      "  rpma-sim run --seed=7 --scenario=flaky_link.txt --trace=run.trace -- ./my_app\n",
      &Run,
  };
  return command;
}

}  // namespace softrpma::rpma_sim
