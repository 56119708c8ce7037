#include "tools/rpma_sim/sim_env.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace softrpma::rpma_sim {
namespace {

// Text that softrpma's librpma.so.0 holds and another librpma (the distro's) does not: the
// prefix of the simulator's own messages.
constexpr absl::string_view kOurMarker = "softrpma-sim: ";

enum class LibraryCheck { kMissing, kOurs, kNotOurs };

// Whether dir/name exists and holds `marker` (softrpma's build of that library does).
LibraryCheck CheckFile(const std::string& dir, absl::string_view name, absl::string_view marker) {
  if (dir.empty()) return LibraryCheck::kMissing;
  const std::string path = absl::StrCat(dir, "/", name);
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return LibraryCheck::kMissing;
  std::ifstream file(path, std::ios::binary);
  // Read in blocks, each searched with the marker's length - 1 bytes of the one before.
  std::string window;
  char block[1 << 16];
  while (file.read(block, sizeof(block)) || file.gcount() > 0) {
    window.append(block, static_cast<size_t>(file.gcount()));
    if (absl::string_view(window).find(marker) != absl::string_view::npos) {
      return LibraryCheck::kOurs;
    }
    window.erase(0, window.size() - std::min(window.size(), marker.size() - 1));
  }
  return LibraryCheck::kNotOurs;
}

LibraryCheck CheckLibrary(const std::string& dir) {
  return CheckFile(dir, kLibraryName, kOurMarker);
}

// The shim's libibverbs.so.1 holds the simulator (its messages); its librdmacm.so.1 is thin, but
// reaches that simulator through the shim's private entry point, whose name it holds.
constexpr absl::string_view kShimRdmacmMarker = "softrpma_shim_backend";

LibraryCheck CheckVerbsDir(const std::string& dir) {
  const LibraryCheck verbs = CheckFile(dir, kVerbsLibraryName, kOurMarker);
  if (verbs != LibraryCheck::kOurs) return verbs;
  return CheckFile(dir, kRdmacmLibraryName, kShimRdmacmMarker);
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
  command.env_set.emplace_back(kBackendVar, config.upstream_librpma ? "ibverbs" : "sim");
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
  set_or_unset(kRunDirVar, non_empty(config.run_dir));
  command.env_set.emplace_back(kRaceDetectorVar, config.race_detector ? "1" : "0");
  if (!config.fabric.empty()) command.env_set.emplace_back(kFabricVar, config.fabric);
  std::vector<std::string> path;
  for (const std::string* dir :
       {&config.lib_dir, &config.verbs_lib_dir, &config.upstream_lib_dir}) {
    if (!dir->empty()) path.push_back(*dir);
  }
  const char* inherited = std::getenv("LD_LIBRARY_PATH");
  const bool had_inherited = inherited != nullptr && *inherited != '\0';
  if (had_inherited) {
    for (absl::string_view dir : absl::StrSplit(inherited, ':')) {
      // An upstream run must not find softrpma's librpma.so.0 by an inherited entry either.
      if (config.upstream_librpma && !dir.empty() &&
          CheckLibrary(std::string(dir)) == LibraryCheck::kOurs) {
        continue;
      }
      path.emplace_back(dir);
    }
  }
  if (!path.empty() || had_inherited) {
    command.env_set.emplace_back("LD_LIBRARY_PATH", absl::StrJoin(path, ":"));
  }
  return command;
}

namespace {

// The directories to look for a library in, in order, each once: for the executable with its
// symlinks resolved, then as it was called, the program's directory with each of `beside`
// appended ("" for the directory itself) and its runfiles tree's `in_runfiles`; then
// `in_runfiles` of the runfiles directory Bazel named.
std::vector<std::string> CandidateDirs(absl::string_view exe, absl::string_view argv0,
                                       absl::string_view runfiles_dir,
                                       std::initializer_list<absl::string_view> beside,
                                       absl::string_view in_runfiles) {
  std::vector<std::string> candidates;
  auto add = [&candidates](std::string dir) {
    if (std::find(candidates.begin(), candidates.end(), dir) == candidates.end()) {
      candidates.push_back(std::move(dir));
    }
  };
  auto add_layouts = [&](absl::string_view program) {
    const std::string dir = DirName(program);
    for (absl::string_view suffix : beside) add(absl::StrCat(dir, suffix));
    add(absl::StrCat(program, ".runfiles/", in_runfiles));  // bazel run, bazel test
  };
  add_layouts(exe);
  if (!argv0.empty()) add_layouts(argv0);
  if (!runfiles_dir.empty()) add(absl::StrCat(runfiles_dir, "/", in_runfiles));
  return candidates;
}

}  // namespace

std::vector<std::string> LibDirCandidates(absl::string_view exe, absl::string_view argv0,
                                          absl::string_view runfiles_dir) {
  return CandidateDirs(exe, argv0, runfiles_dir,
                       {
                           "",                      // one directory
                           "/../lib/softrpma",      // <prefix>/bin, <prefix>/lib/softrpma
                           "/../lib",               // <prefix>/bin, <prefix>/lib
                           "/../../api",            // bazel-bin/tools/rpma_sim, bazel-bin/api
                           "/../../api/librpma/lib/softrpma",  // //api:librpma_pc's tree
                       },
                       "softrpma/api");
}

namespace {

// How rpma-sim was called, absolute ("" when argv0 has no slash: found on $PATH).
std::string InvokedPath(absl::string_view argv0) {
  if (argv0.find('/') == absl::string_view::npos) return "";
  return absl::StrCat(Canonical(DirName(argv0)), "/", argv0.substr(argv0.rfind('/') + 1));
}

std::string RunfilesDir() {
  const char* runfiles = std::getenv("RUNFILES_DIR");
  return runfiles != nullptr ? runfiles : "";
}

// A search of candidate directories (canonical, each once, as the loader would see them) for
// the first where the check gives `wanted`; `others` are those where it found the other kind.
struct Search {
  std::optional<std::string> found;
  std::vector<std::string> looked;
  std::vector<std::string> others;
};
Search FirstWith(const std::vector<std::string>& candidates,
                 LibraryCheck (*check)(const std::string&), LibraryCheck wanted) {
  Search search;
  for (const std::string& candidate : candidates) {
    const std::string dir = Canonical(candidate);
    if (std::find(search.looked.begin(), search.looked.end(), dir) != search.looked.end()) {
      continue;
    }
    search.looked.push_back(dir);
    const LibraryCheck got = check(dir);
    if (got == wanted) {
      search.found = dir;
      return search;
    }
    if (got != LibraryCheck::kMissing) search.others.push_back(dir);
  }
  return search;
}

// The first of `candidates` that `check` finds ours in (canonical), else NotFound:
// "cannot find <what> (looked in ...)[; the one in ... is <other>]; <hint>".
absl::StatusOr<std::string> FirstOurs(const std::vector<std::string>& candidates,
                                      LibraryCheck (*check)(const std::string&),
                                      absl::string_view what, absl::string_view other,
                                      absl::string_view hint) {
  const Search search = FirstWith(candidates, check, LibraryCheck::kOurs);
  if (search.found.has_value()) return *search.found;
  std::string message =
      absl::StrCat("cannot find ", what, " (looked in ", absl::StrJoin(search.looked, ", "), ")");
  if (!search.others.empty()) {
    absl::StrAppend(&message, "; the one in ", absl::StrJoin(search.others, " and "), " is ",
                    other);
  }
  absl::StrAppend(&message, "; ", hint);
  return absl::NotFoundError(message);
}

}  // namespace

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
  return FirstOurs(LibDirCandidates(Canonical("/proc/self/exe"), InvokedPath(argv0), RunfilesDir()),
                   &CheckLibrary, absl::StrCat("softrpma's ", kLibraryName), "another librpma",
                   "build //api:librpma.so.0, or pass --lib=DIR");
}

std::vector<std::string> VerbsLibDirCandidates(absl::string_view exe, absl::string_view argv0,
                                               absl::string_view runfiles_dir) {
  return CandidateDirs(exe, argv0, runfiles_dir,
                       {
                           "",                           // one directory
                           "/../lib/softrpma/verbs-shim",  // <prefix>, //api:librpma_pc's tree
                           "/../../simverbs/shim/lib",   // bazel-bin
                       },
                       "softrpma/simverbs/shim/lib");
}

absl::StatusOr<std::string> FindVerbsLibDir(absl::string_view verbs_lib_flag,
                                            absl::string_view argv0) {
  if (!verbs_lib_flag.empty()) {
    std::string dir = Canonical(std::string(verbs_lib_flag));
    switch (CheckVerbsDir(dir)) {
      case LibraryCheck::kOurs:
        return dir;
      case LibraryCheck::kNotOurs:
        return absl::NotFoundError(absl::StrCat("--verbs-lib=", verbs_lib_flag, ": ", dir,
                                                " does not hold the verbs shim's ",
                                                kVerbsLibraryName, " and ", kRdmacmLibraryName,
                                                " (another build of them is there)"));
      case LibraryCheck::kMissing:
        break;
    }
    return absl::NotFoundError(absl::StrCat("--verbs-lib=", verbs_lib_flag, ": there is no ",
                                            kVerbsLibraryName, " and ", kRdmacmLibraryName,
                                            " in ", dir));
  }
  return FirstOurs(
      VerbsLibDirCandidates(Canonical("/proc/self/exe"), InvokedPath(argv0), RunfilesDir()),
      &CheckVerbsDir,
      absl::StrCat("the verbs shim's ", kVerbsLibraryName, " and ", kRdmacmLibraryName),
      "rdma-core's (or another build)",
      "build //simverbs/shim:verbs_lib_dir, or pass --verbs-lib=DIR");
}

bool HoldsOurLibrpma(const std::string& dir) { return CheckLibrary(dir) == LibraryCheck::kOurs; }

std::vector<std::string> SystemLibDirs() {
#if defined(__x86_64__)
  constexpr absl::string_view kMultiarch = "x86_64-linux-gnu";
#elif defined(__aarch64__)
  constexpr absl::string_view kMultiarch = "aarch64-linux-gnu";
#else
  constexpr absl::string_view kMultiarch = "";
#endif
  std::vector<std::string> dirs;
  if (!kMultiarch.empty()) {
    dirs.push_back(absl::StrCat("/lib/", kMultiarch));
    dirs.push_back(absl::StrCat("/usr/lib/", kMultiarch));
  }
  for (const char* dir : {"/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"}) {
    dirs.emplace_back(dir);
  }
  return dirs;
}

absl::StatusOr<std::string> FindUpstreamLibDir(absl::string_view upstream_lib_flag,
                                               const std::vector<std::string>& system_dirs) {
  const Search search =
      FirstWith(upstream_lib_flag.empty()
                    ? system_dirs
                    : std::vector<std::string>{std::string(upstream_lib_flag)},
                &CheckLibrary, LibraryCheck::kNotOurs);
  if (search.found.has_value()) return *search.found;
  const std::vector<std::string>& looked = search.looked;
  const std::vector<std::string>& ours = search.others;
  const std::string where =
      upstream_lib_flag.empty() ? "" : absl::StrCat("--upstream-lib=", upstream_lib_flag, ": ");
  if (!ours.empty()) {
    return absl::NotFoundError(absl::StrCat(where, "the ", kLibraryName, " in ",
                                            absl::StrJoin(ours, " and "),
                                            " is softrpma's, not upstream librpma"));
  }
  if (!upstream_lib_flag.empty()) {
    return absl::NotFoundError(
        absl::StrCat(where, "there is no ", kLibraryName, " in ", absl::StrJoin(looked, ", ")));
  }
  return absl::NotFoundError(absl::StrCat(
      "upstream librpma is not installed: no ", kLibraryName, " in ", absl::StrJoin(looked, ", "),
      "; install the distro's (Debian, Ubuntu: apt-get install librpma0), or pass "
      "--upstream-lib=DIR"));
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
                          const LibraryFlags& libraries, const std::vector<std::string>& program) {
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
  if (!libraries.lib.empty()) absl::StrAppend(&out, " --lib=", ShellQuote(libraries.lib));
  if (!libraries.verbs_lib.empty()) {
    absl::StrAppend(&out, " --verbs-lib=", ShellQuote(libraries.verbs_lib));
  }
  if (libraries.upstream_librpma) absl::StrAppend(&out, " --upstream-librpma");
  if (!libraries.upstream_lib.empty()) {
    absl::StrAppend(&out, " --upstream-lib=", ShellQuote(libraries.upstream_lib));
  }
  absl::StrAppend(&out, " -- ", ShellJoin(program));
  return out;
}

}  // namespace softrpma::rpma_sim
