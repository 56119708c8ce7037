#include "tools/rpma_sim/sim_env.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace softrpma::rpma_sim {
namespace {

bool HasLibrary(const std::string& dir) {
  struct stat st;
  return !dir.empty() && stat(absl::StrCat(dir, "/", kLibraryName).c_str(), &st) == 0 &&
         S_ISREG(st.st_mode);
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

absl::StatusOr<std::string> FindLibDir(absl::string_view lib_flag, absl::string_view argv0) {
  if (!lib_flag.empty()) {
    std::string dir = Canonical(std::string(lib_flag));
    if (HasLibrary(dir)) return dir;
    return absl::NotFoundError(
        absl::StrCat("--lib=", lib_flag, ": there is no ", kLibraryName, " in ", dir));
  }
  std::vector<std::string> candidates;
  std::string self = Canonical("/proc/self/exe");
  candidates.push_back(DirName(self) + "/../../api");
  candidates.push_back(self + ".runfiles/softrpma/api");
  if (argv0.find('/') != absl::string_view::npos) {
    std::string invoked = Canonical(DirName(argv0));
    candidates.push_back(invoked + "/../../api");
    candidates.push_back(absl::StrCat(Canonical(std::string(argv0)), ".runfiles/softrpma/api"));
  }
  if (const char* runfiles = std::getenv("RUNFILES_DIR"); runfiles != nullptr) {
    candidates.push_back(absl::StrCat(runfiles, "/softrpma/api"));
  }
  for (const std::string& dir : candidates) {
    if (HasLibrary(dir)) return Canonical(dir);
  }
  return absl::NotFoundError(absl::StrCat(
      "softrpma's ", kLibraryName, " is not next to rpma-sim (looked in ",
      absl::StrJoin(candidates, ", "), "); build //api:librpma.so.0 or pass --lib=DIR"));
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
