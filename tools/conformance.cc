// conformance: runs the conformance suite (tests/conformance/, linked in) and reports, for
// every row of rpma-errors.tsv (every ERRORS line of every librpma man page), the tests that
// produce it and whether they pass.
//
//   bazel run //tools:conformance                  the report on stdout; last line
//                                                  "N passed, N failed"
//   bazel run //tools:conformance -- --markdown    also writes docs/CONFORMANCE.md (in the
//                                                  workspace; --markdown=PATH elsewhere)
//   bazel run //tools:conformance -- --coverage_only
//                                                  checks the claims only, runs nothing
//   --tsv=PATH                                     another copy of the spec
//   --verbose                                      the output of every test, not only failures
//
// Exit status 0 only when every claim names a spec row, every row has a test and (unless
// --coverage_only) every covering test passes.
//
// Each test runs in a child process of its own (fork), with a time limit, so that one test's
// crash or hang is that row's failure and the process-wide state of one test (fault plan,
// backend override, log function) never reaches another.

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "tests/conformance/coverage.h"
#include "tools/conformance_report.h"

namespace softrpma::conformance {
namespace {

constexpr char kSpecInRunfiles[] = "tests/conformance/rpma-errors.tsv";
constexpr char kMarkdownInWorkspace[] = "docs/CONFORMANCE.md";
constexpr unsigned kTestTimeoutSeconds = 120;

struct Options {
  std::string tsv;       // empty: the runfiles copy
  std::string markdown;  // empty: none
  bool coverage_only = false;
  bool verbose = false;
};

bool ParseOptions(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--markdown") {
      options->markdown = kMarkdownInWorkspace;
    } else if (absl::StartsWith(arg, "--markdown=")) {
      options->markdown = std::string(arg.substr(std::strlen("--markdown=")));
    } else if (absl::StartsWith(arg, "--tsv=")) {
      options->tsv = std::string(arg.substr(std::strlen("--tsv=")));
    } else if (arg == "--coverage_only") {
      options->coverage_only = true;
    } else if (arg == "--verbose") {
      options->verbose = true;
    } else {
      std::cerr << "conformance: unknown argument " << arg
                << " (expected --markdown[=PATH], --tsv=PATH, --coverage_only, --verbose)\n";
      return false;
    }
  }
  return true;
}

// A path given by the user is relative to the directory `bazel run` was started from.
std::string UserPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  return dir != nullptr ? absl::StrCat(dir, "/", path) : path;
}

// docs/CONFORMANCE.md is in the workspace, wherever `bazel run` was started.
std::string WorkspacePath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* dir = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  return dir != nullptr ? absl::StrCat(dir, "/", path) : path;
}

bool ReadFile(const std::string& path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream out;
  out << in.rdbuf();
  *contents = out.str();
  return true;
}

// The spec: --tsv, else the copy in this binary's runfiles (the working directory under
// `bazel run` and `bazel test`).
bool LoadSpec(const Options& options, std::string* path, std::string* tsv) {
  std::vector<std::string> candidates;
  if (!options.tsv.empty()) {
    candidates.push_back(UserPath(options.tsv));
  } else {
    candidates.push_back(kSpecInRunfiles);
    if (const char* runfiles = std::getenv("RUNFILES_DIR")) {
      candidates.push_back(absl::StrCat(runfiles, "/softrpma/", kSpecInRunfiles));
    }
  }
  for (const std::string& candidate : candidates) {
    if (ReadFile(candidate, tsv)) {
      *path = candidate;
      return true;
    }
  }
  std::cerr << "conformance: cannot read the spec (" << candidates.front() << ")\n";
  return false;
}

std::vector<Claim> Claims() {
  std::vector<Claim> claims;
  for (const Coverage& coverage : AllCoverage()) {
    Claim claim;
    claim.test = coverage.test;
    claim.function = coverage.row.function;
    claim.error = coverage.row.error;
    claim.trigger = coverage.row.trigger;
    claim.not_in_design = coverage.row.not_in_design != nullptr ? coverage.row.not_in_design : "";
    claim.note = coverage.row.note != nullptr ? coverage.row.note : "";
    claim.not_enforced = coverage.row.not_enforced != nullptr ? coverage.row.not_enforced : "";
    claim.file = coverage.file;
    claim.line = coverage.line;
    claims.push_back(std::move(claim));
  }
  return claims;
}

// Every test gtest knows in this binary, "Suite.Name".
absl::flat_hash_set<std::string> RegisteredTests() {
  absl::flat_hash_set<std::string> tests;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j) {
      tests.insert(absl::StrCat(suite.name(), ".", suite.GetTestInfo(j)->name()));
    }
  }
  return tests;
}

struct Outcome {
  TestResult result = TestResult::kFailed;
  std::string why;     // for a failure: "failed", "crashed (signal 11)", "timed out", ...
  std::string output;  // everything the test printed
};

// Runs exactly `test` in a child process (gtest filter), within kTestTimeoutSeconds.
Outcome RunTest(const std::string& test) {
  Outcome outcome;
  FILE* capture = std::tmpfile();
  if (capture == nullptr) {
    outcome.why = absl::StrCat("tmpfile: ", std::strerror(errno));
    return outcome;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    outcome.why = absl::StrCat("fork: ", std::strerror(errno));
    std::fclose(capture);
    return outcome;
  }
  if (pid == 0) {
    dup2(fileno(capture), STDOUT_FILENO);
    dup2(fileno(capture), STDERR_FILENO);
    alarm(kTestTimeoutSeconds);  // SIGALRM ends a hung test
    GTEST_FLAG_SET(filter, test);
    GTEST_FLAG_SET(color, "no");
    const bool run_ok = RUN_ALL_TESTS() == 0;
    const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
    const bool passed = run_ok && unit.test_to_run_count() == 1 &&
                        unit.successful_test_count() == 1 && unit.failed_test_count() == 0 &&
                        unit.skipped_test_count() == 0;
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(passed ? 0 : 1);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::rewind(capture);
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), capture)) > 0) outcome.output.append(buffer, n);
  std::fclose(capture);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    outcome.result = TestResult::kPassed;
  } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    outcome.why = absl::StrCat("timed out after ", kTestTimeoutSeconds, " s");
  } else if (WIFSIGNALED(status)) {
    outcome.why = absl::StrCat("crashed (signal ", WTERMSIG(status), ")");
  } else {
    outcome.why = "failed";
  }
  return outcome;
}

// What a test printed from its "[ RUN ]" line on, without gtest's summary (all of it when that
// line is missing, e.g. a crash before the test started).
std::string TestLines(const std::string& output) {
  const size_t begin = output.find("[ RUN      ]");
  if (begin == std::string::npos) return output;
  size_t end = output.find("[----------]", begin);
  if (end == std::string::npos) end = output.size();
  return output.substr(begin, end - begin);
}

int Main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Options options;
  if (!ParseOptions(argc, argv, &options)) return 2;

  std::string spec_path;
  std::string tsv;
  if (!LoadSpec(options, &spec_path, &tsv)) return 2;
  absl::StatusOr<std::vector<SpecRow>> spec = ParseSpec(tsv);
  if (!spec.ok()) {
    std::cerr << "conformance: " << spec_path << ": " << spec.status().message() << "\n";
    return 2;
  }

  // Every claim must name a spec row and a test of this binary.
  bool claims_ok = true;
  const std::vector<Claim> claims = Claims();
  for (const std::string& message : UnknownClaims(*spec, claims)) {
    std::cout << "ERROR: " << message << "\n";
    claims_ok = false;
  }
  const absl::flat_hash_set<std::string> registered = RegisteredTests();
  std::vector<std::string> tests;  // the covering tests, in claim order, unique
  absl::flat_hash_set<std::string> seen;
  for (const Claim& claim : claims) {
    if (!registered.contains(claim.test)) {
      std::cout << "ERROR: " << claim.test << " (" << claim.file << ":" << claim.line
                << ") claims rows but is not a test of this binary\n";
      claims_ok = false;
    }
    if (seen.insert(claim.test).second) tests.push_back(claim.test);
  }

  absl::flat_hash_map<std::string, TestResult> results;
  if (!options.coverage_only) {
    std::vector<std::pair<std::string, Outcome>> failures;
    for (const std::string& test : tests) {
      Outcome outcome = RunTest(test);
      results[test] = outcome.result;
      if (options.verbose) std::cout << "=== " << test << "\n" << outcome.output;
      if (outcome.result != TestResult::kPassed) failures.emplace_back(test, std::move(outcome));
    }
    for (const auto& [test, outcome] : failures) {
      std::cout << "--- FAILED: " << test << " (" << outcome.why << ")\n";
      if (!options.verbose) std::cout << TestLines(outcome.output);
    }
    if (!failures.empty()) std::cout << "\n";
  }

  const std::vector<RowReport> report = BuildReport(*spec, claims, results);
  std::cout << "Spec: " << spec_path << " (" << spec->size() << " rows), " << tests.size()
            << " tests\n";
  std::cout << RenderText(report, !options.coverage_only);

  if (!options.markdown.empty()) {
    const std::string path = options.markdown == kMarkdownInWorkspace
                                 ? WorkspacePath(options.markdown)
                                 : UserPath(options.markdown);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << RenderMarkdown(report);
    if (!out) {
      std::cerr << "conformance: cannot write " << path << "\n";
      return 2;
    }
    std::cerr << "conformance: wrote " << path << "\n";
  }

  const bool rows_ok = CountRows(report, RowReport::Status::kNoTest) == 0 &&
                       (options.coverage_only || CountRows(report, RowReport::Status::kPassed) ==
                                                     static_cast<int>(report.size()));
  return claims_ok && rows_ok ? 0 : 1;
}

}  // namespace
}  // namespace softrpma::conformance

int main(int argc, char** argv) { return softrpma::conformance::Main(argc, argv); }
