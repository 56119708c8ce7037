// conformance_report.h: the logic of `bazel run //tools:conformance` that needs no test run:
// reading rpma-errors.tsv, matching the rows the conformance tests claim (RPMA_TEST_F in
// tests/conformance/coverage.h) to the spec's rows, and rendering the per-row report as text or
// as docs/CONFORMANCE.md.
//
// Matching is exact (function, error and trigger byte for byte), so a typo in a claim is an
// error, never a silently uncovered row.

#ifndef SOFTRPMA_TOOLS_CONFORMANCE_REPORT_H_
#define SOFTRPMA_TOOLS_CONFORMANCE_REPORT_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace softrpma::conformance {

// One row of rpma-errors.tsv: an ERRORS line of a librpma man page.
struct SpecRow {
  int number = 0;  // 1-based, not counting the header (the line number in the file minus 1)
  std::string function;
  std::string error;
  std::string trigger;
};

// Parses the TSV: the header line "function<TAB>error<TAB>trigger", then one row of three
// tab-separated fields per line (a final newline is optional). Errors: InvalidArgument naming
// the line (wrong header, wrong field count, empty field, duplicate row).
absl::StatusOr<std::vector<SpecRow>> ParseSpec(absl::string_view tsv);

// One test's claim of one row.
struct Claim {
  std::string test;  // full gtest name, "Fixture.Name"
  std::string function;
  std::string error;
  std::string trigger;
  std::string not_in_design;  // empty, or why the cause cannot happen in softrpma
  std::string note;           // empty, or how the test reaches the row
  std::string not_enforced;   // empty, or what upstream does instead of enforcing the row
  std::string file;
  int line = 0;
};

// The result of running one test.
enum class TestResult { kNotRun, kPassed, kFailed };

// What the report says about one row.
struct RowReport {
  enum class Status {
    kPassed,  // every covering test passed
    kFailed,  // a covering test failed
    kNotRun,  // covered, but a covering test was not run (e.g. coverage-only mode)
    kNoTest,  // no test claims the row
  };
  SpecRow row;
  std::vector<std::string> tests;          // the covering tests, in claim order, unique
  std::vector<std::string> files;          // tests[i]'s source file
  std::vector<std::string> not_in_design;  // the reasons given by "not in design" claims
  std::vector<std::string> notes;          // the notes of the claims
  std::vector<std::string> not_enforced;   // what upstream does instead, per such claim
  Status status = Status::kNoTest;
};

// Messages for the claims that match no row of `spec` (each names the test, its file:line and
// the claim, and lists the spec's triggers for that function and error, to spot the typo).
std::vector<std::string> UnknownClaims(const std::vector<SpecRow>& spec,
                                       const std::vector<Claim>& claims);

// One report per spec row, in spec order. `results` maps test names to results (absent:
// kNotRun, which does not pass).
std::vector<RowReport> BuildReport(const std::vector<SpecRow>& spec,
                                   const std::vector<Claim>& claims,
                                   const absl::flat_hash_map<std::string, TestResult>& results);

// The number of rows with `status`.
int CountRows(const std::vector<RowReport>& report, RowReport::Status status);

// The text report: one line per row (status, row number, function, error, tests, and why the
// cause cannot happen where a test says so), then the summary line: "N passed, N failed" when
// tests ran (a row without a test counts as failed), else "N covered, N not covered".
std::string RenderText(const std::vector<RowReport>& report, bool ran_tests);

// docs/CONFORMANCE.md: how it is made, the summary and one table row per spec row (function,
// error, trigger, tests, result; "not in design" reasons and rows that are "documented, not
// enforced" as upstream does, each with its reason). Deterministic.
std::string RenderMarkdown(const std::vector<RowReport>& report);

}  // namespace softrpma::conformance

#endif  // SOFTRPMA_TOOLS_CONFORMANCE_REPORT_H_
