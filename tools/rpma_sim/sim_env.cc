#include "tools/rpma_sim/sim_env.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace softrpma::rpma_sim {
namespace {

// Text that softrpma's librpma.so.0 holds and another librpma (the distro's) does not: the
// prefix of the simulator's own messages.
constexpr absl::string_view kOurMarker = "softrpma-sim: ";

enum class LibraryCheck { kMissing, kOurs, kNotOurs };

LibraryCheck CheckLibrary(const std::string& dir) {
  if (dir.empty()) return LibraryCheck::kMissing;
  const std::string path = absl::StrCat(dir, "/", kLibraryName);
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return LibraryCheck::kMissing;
  std::ifstream file(path, std::ios::binary);
  // Read in blocks, each searched with the marker's length - 1 bytes of the one before.
  std::string window;
  char block[1 << 16];
  while (file.read(block, sizeof(block)) || file.gcount() > 0) {
    window.append(block, static_cast<size_t>(file.gcount()));
    if (absl::string_view(window).find(kOurMarker) != absl::string_view::npos) {
      return LibraryCheck::kOurs;
    }
    window.erase(0, window.size() - std::min(window.size(), kOurMarker.size() - 1));
  }
  return LibraryCheck::kNotOurs;
}

std::string DirName(absl::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

// `path` made absolute (against the current directory) and, when it exists, canonical.
std::string Canonical(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) != nullptr) return resolved;
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return absl::StrCat(cwd, "/", path);
}

bool IsShellSafe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         absl::string_view("_@%+=:,./-").find(c) != absl::string_view::npos;
}

// `word` in single quotes (a quote inside becomes '\'').
std::string SingleQuote(absl::string_view word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

}  // namespace

ChildCommand SimCommand(const SimConfig& config, std::vector<std::string> program) {
  ChildCommand command;
  command.argv = std::move(program);
  command.env_set.emplace_back(kBackendVar, "sim");
  auto set_or_unset = [&command](const char* name, const std::optional<std::string>& value) {
    if (value.has_value()) {
      command.env_set.emplace_back(name, *value);
    } else {
      command.env_unset.emplace_back(name);
    }
  };
  set_or_unset(kSeedVar, config.seed.has_value()
                             ? std::optional<std::string>(absl::StrCat(*config.seed))
                             : std::nullopt);
  set_or_unset(kFaultsVar, config.faults);
  auto non_empty = [](const std::string& s) {
    return s.empty() ? std::nullopt : std::optional<std::string>(s);
  };
  set_or_unset(kScenarioVar, non_empty(config.scenario));
  set_or_unset(kTraceVar, non_empty(config.trace));
  set_or_unset(kStatsVar, non_empty(config.stats));
  set_or_unset(kDeviceVar, non_empty(config.device));
  set_or_unset(kExecutionVar, non_empty(config.execution));
  command.env_set.emplace_back(kRaceDetectorVar, config.race_detector ? "1" : "0");
  if (!config.fabric.empty()) command.env_set.emplace_back(kFabricVar, config.fabric);
  if (!config.lib_dir.empty()) {
    const char* inherited = std::getenv("LD_LIBRARY_PATH");
    command.env_set.emplace_back("LD_LIBRARY_PATH",
                                 inherited != nullptr && *inherited != '\0'
                                     ? absl::StrCat(config.lib_dir, ":", inherited)
                                     : config.lib_dir);
  }
  return command;
}

std::vector<std::string> LibDirCandidates(absl::string_view exe, absl::string_view argv0,
                                          absl::string_view runfiles_dir) {
  std::vector<std::string> candidates;
  auto add = [&candidates](std::string dir) {
    if (std::find(candidates.begin(), candidates.end(), dir) == candidates.end()) {
      candidates.push_back(std::move(dir));
    }
  };
  auto add_layouts = [&add](absl::string_view program) {
    const std::string dir = DirName(program);
    add(dir);                                            // one directory
    add(absl::StrCat(dir, "/../lib"));                   // <prefix>/bin, <prefix>/lib
    add(absl::StrCat(dir, "/../../api"));                // bazel-bin/tools/rpma_sim, bazel-bin/api
    add(absl::StrCat(dir, "/../../api/librpma/lib"));    // bazel-bin/api/librpma (//api:librpma_pc)
    add(absl::StrCat(program, ".runfiles/softrpma/api"));  // bazel run, bazel test
  };
  add_layouts(exe);
  if (!argv0.empty()) add_layouts(argv0);
  if (!runfiles_dir.empty()) add(absl::StrCat(runfiles_dir, "/softrpma/api"));
  return candidates;
}

absl::StatusOr<std::string> FindLibDir(absl::string_view lib_flag, absl::string_view argv0) {
  if (!lib_flag.empty()) {
    std::string dir = Canonical(std::string(lib_flag));
    switch (CheckLibrary(dir)) {
      case LibraryCheck::kOurs:
        return dir;
      case LibraryCheck::kNotOurs:
        return absl::NotFoundError(absl::StrCat("--lib=", lib_flag, ": the ", kLibraryName,
                                                " in ", dir, " is not softrpma's"));
      case LibraryCheck::kMissing:
        break;
    }
    return absl::NotFoundError(
        absl::StrCat("--lib=", lib_flag, ": there is no ", kLibraryName, " in ", dir));
  }
  // The executable with its symlinks resolved (where Bazel put it), then as it was called (a
  // symlink to it elsewhere), each in the layouts that LibDirCandidates() lists.
  std::string invoked;
  if (argv0.find('/') != absl::string_view::npos) {
    invoked = absl::StrCat(Canonical(DirName(argv0)), "/", argv0.substr(argv0.rfind('/') + 1));
  }
  const char* runfiles = std::getenv("RUNFILES_DIR");
  std::vector<std::string> candidates =
      LibDirCandidates(Canonical("/proc/self/exe"), invoked, runfiles != nullptr ? runfiles : "");
  std::vector<std::string> looked;  // each directory once, as the loader would see it
  std::vector<std::string> not_ours;
  for (const std::string& candidate : candidates) {
    const std::string dir = Canonical(candidate);
    if (std::find(looked.begin(), looked.end(), dir) != looked.end()) continue;
    looked.push_back(dir);
    switch (CheckLibrary(dir)) {
      case LibraryCheck::kOurs:
        return dir;
      case LibraryCheck::kNotOurs:
        not_ours.push_back(dir);
        break;
      case LibraryCheck::kMissing:
        break;
    }
  }
  std::string message =
      absl::StrCat("cannot find softrpma's ", kLibraryName, " (looked in ",
                   absl::StrJoin(looked, ", "), ")");
  if (!not_ours.empty()) {
    absl::StrAppend(&message, "; the one in ", absl::StrJoin(not_ours, " and "),
                    " is another librpma");
  }
  absl::StrAppend(&message, "; build //api:librpma.so.0, or pass --lib=DIR");
  return absl::NotFoundError(message);
}

std::string ShellQuote(absl::string_view word) {
  if (!word.empty()) {
    bool safe = true;
    for (char c : word) safe = safe && IsShellSafe(c);
    if (safe) return std::string(word);
  }
  return SingleQuote(word);
}

std::string ShellJoin(const std::vector<std::string>& words) {
  return absl::StrJoin(
      words, " ", [](std::string* out, const std::string& word) { out->append(ShellQuote(word)); });
}

std::string ReplayCommand(absl::string_view tool, const SimConfig& config,
                          absl::string_view lib_dir_flag, const std::vector<std::string>& program) {
  // Values of --faults and --scenario are always quoted: a spec reads the same in every line.
  std::string out = absl::StrCat(ShellQuote(tool), " run");
  if (!config.device.empty()) absl::StrAppend(&out, " --device=", ShellQuote(config.device));
  if (!config.execution.empty()) {
    absl::StrAppend(&out, " --execution=", ShellQuote(config.execution));
  }
  if (!config.race_detector) absl::StrAppend(&out, " --races=false");
  if (config.seed.has_value()) absl::StrAppend(&out, " --seed=", *config.seed);
  if (config.faults.has_value()) absl::StrAppend(&out, " --faults=", SingleQuote(*config.faults));
  if (!config.scenario.empty()) {
    absl::StrAppend(&out, " --scenario=", SingleQuote(config.scenario));
  }
  if (!lib_dir_flag.empty()) absl::StrAppend(&out, " --lib=", ShellQuote(lib_dir_flag));
  absl::StrAppend(&out, " -- ", ShellJoin(program));
  return out;
}

}  // namespace softrpma::rpma_sim
