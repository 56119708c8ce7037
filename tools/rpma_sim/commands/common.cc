// common.cc: the flags run and sweep share (and report merge's --report and --junit), and the
// helpers of common.h.

#include "tools/rpma_sim/commands/common.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/rpma_sim/command_line.h"
#include "tools/rpma_sim/sim_checks.h"
#include "tools/rpma_sim/sim_env.h"

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
ABSL_FLAG(std::string, lib, "",
          "the directory of softrpma's librpma.so.0, put first in LD_LIBRARY_PATH so that a "
          "program linked against the distro's librpma runs on it. Default: found near "
          "rpma-sim (its own directory, ../lib/softrpma, ../lib, bazel-bin/api); "
          "rpma-sim refuses to run without it");
ABSL_FLAG(std::string, verbs_lib, "",
          "the directory of the verbs shim's libibverbs.so.1 and librdmacm.so.1 "
          "(//simverbs/shim:verbs_lib_dir), put in LD_LIBRARY_PATH after softrpma's librpma so "
          "that a program calling libibverbs / librdmacm itself (ibv_devinfo, rping) runs on the "
          "simulated NIC too. Default: found near rpma-sim (its own directory, ../lib/softrpma/verbs-shim, "
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
ABSL_FLAG(std::string, report, "",
          "write a JSON report here: every run with its point, spec, exit, class, duration "
          "and replay command, and the counts per point");
ABSL_FLAG(std::string, junit, "",
          "write JUnit XML here, a test case per run (its point and hit, a failure with its "
          "outcome and replay line), for CI systems' test reports");

namespace softrpma::rpma_sim {
namespace {

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

}  // namespace

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

int Usage(absl::string_view message) {
  std::fprintf(stderr, "rpma-sim: %s\nRun `rpma-sim --help` for usage.\n",
               std::string(message).c_str());
  return kExitUsage;
}

std::string ToolName(const char* argv0) {
  std::string name = argv0 != nullptr ? argv0 : "";
  return name.find('/') != std::string::npos ? name : "rpma-sim";
}

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

std::optional<std::string> ExecutionFlag() {
  std::string value = absl::GetFlag(FLAGS_execution);
  if (value.empty() || value == "async" || value == "eager") return value;
  Usage(absl::StrCat("--execution: \"", value, "\" is neither async nor eager"));
  return std::nullopt;
}

std::optional<std::vector<std::string>> DevicesFlag(const CommandLine& line) {
  if (!line.given.contains("device")) return std::vector<std::string>{};
  absl::StatusOr<std::vector<std::string>> devices = ParseDeviceList(absl::GetFlag(FLAGS_device));
  if (!devices.ok()) {
    Usage(absl::StrCat("--device: ", devices.status().message()));
    return std::nullopt;
  }
  return *devices;
}

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

}  // namespace softrpma::rpma_sim
