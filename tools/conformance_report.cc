#include "tools/conformance_report.h"

#include <algorithm>
#include <cstddef>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace softrpma::conformance {
namespace {

constexpr char kHeader[] = "function\terror\ttrigger";

std::string RowKey(absl::string_view function, absl::string_view error, absl::string_view trigger) {
  return absl::StrCat(function, "\t", error, "\t", trigger);
}

const char* StatusWord(RowReport::Status status) {
  switch (status) {
    case RowReport::Status::kPassed: return "PASS";
    case RowReport::Status::kFailed: return "FAIL";
    case RowReport::Status::kNotRun: return "COVERED";
    case RowReport::Status::kNoTest: return "NO TEST";
  }
  return "?";
}

// A table cell: pipes escaped, so that "conn == NULL || flags == 0" stays one cell.
std::string Cell(absl::string_view text) { return absl::StrReplaceAll(text, {{"|", "\\|"}}); }

}  // namespace

absl::StatusOr<std::vector<SpecRow>> ParseSpec(absl::string_view tsv) {
  std::vector<absl::string_view> lines = absl::StrSplit(tsv, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.empty() || lines[0] != kHeader) {
    return absl::InvalidArgumentError(
        absl::StrCat("line 1: expected the header \"function<TAB>error<TAB>trigger\""));
  }
  std::vector<SpecRow> rows;
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> fields = absl::StrSplit(lines[i], '\t');
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrFormat("line %d: %d tab-separated fields, expected 3", i + 1, fields.size()));
    }
    for (const std::string& field : fields) {
      if (field.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat("line %d: empty field", i + 1));
      }
    }
    if (!seen.insert(RowKey(fields[0], fields[1], fields[2])).second) {
      return absl::InvalidArgumentError(absl::StrFormat("line %d: duplicate row", i + 1));
    }
    SpecRow row;
    row.number = static_cast<int>(i);
    row.function = fields[0];
    row.error = fields[1];
    row.trigger = fields[2];
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<std::string> UnknownClaims(const std::vector<SpecRow>& spec,
                                       const std::vector<Claim>& claims) {
  absl::flat_hash_set<std::string> keys;
  for (const SpecRow& row : spec) keys.insert(RowKey(row.function, row.error, row.trigger));
  std::vector<std::string> messages;
  for (const Claim& claim : claims) {
    if (keys.contains(RowKey(claim.function, claim.error, claim.trigger))) continue;
    std::string message =
        absl::StrFormat("%s (%s:%d) claims a row that is not in the spec: %s | %s | %s", claim.test,
                        claim.file, claim.line, claim.function, claim.error, claim.trigger);
    std::vector<std::string> candidates;
    for (const SpecRow& row : spec) {
      if (row.function == claim.function && row.error == claim.error) {
        candidates.push_back(absl::StrCat("\"", row.trigger, "\""));
      }
    }
    if (candidates.empty()) {
      absl::StrAppend(&message, "\n  the spec has no row for ", claim.function, " ", claim.error);
    } else {
      absl::StrAppend(&message, "\n  the spec's triggers for ", claim.function, " ", claim.error,
                      ": ", absl::StrJoin(candidates, ", "));
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

std::vector<RowReport> BuildReport(const std::vector<SpecRow>& spec,
                                   const std::vector<Claim>& claims,
                                   const absl::flat_hash_map<std::string, TestResult>& results) {
  std::vector<RowReport> report;
  report.reserve(spec.size());
  for (const SpecRow& row : spec) {
    RowReport entry;
    entry.row = row;
    for (const Claim& claim : claims) {
      if (claim.function != row.function || claim.error != row.error ||
          claim.trigger != row.trigger) {
        continue;
      }
      if (std::find(entry.tests.begin(), entry.tests.end(), claim.test) == entry.tests.end()) {
        entry.tests.push_back(claim.test);
        entry.files.push_back(claim.file);
      }
      if (!claim.not_in_design.empty()) entry.not_in_design.push_back(claim.not_in_design);
      if (!claim.note.empty()) entry.notes.push_back(claim.note);
      if (!claim.not_enforced.empty()) entry.not_enforced.push_back(claim.not_enforced);
    }
    if (entry.tests.empty()) {
      entry.status = RowReport::Status::kNoTest;
    } else {
      bool any_failed = false;
      bool any_not_run = false;
      for (const std::string& test : entry.tests) {
        auto it = results.find(test);
        const TestResult result = it == results.end() ? TestResult::kNotRun : it->second;
        any_failed |= result == TestResult::kFailed;
        any_not_run |= result == TestResult::kNotRun;
      }
      entry.status = any_failed    ? RowReport::Status::kFailed
                     : any_not_run ? RowReport::Status::kNotRun
                                   : RowReport::Status::kPassed;
    }
    report.push_back(std::move(entry));
  }
  return report;
}

int CountRows(const std::vector<RowReport>& report, RowReport::Status status) {
  return static_cast<int>(std::count_if(report.begin(), report.end(),
                                        [&](const RowReport& r) { return r.status == status; }));
}

std::string RenderText(const std::vector<RowReport>& report, bool ran_tests) {
  size_t function_width = 0;
  size_t error_width = 0;
  for (const RowReport& entry : report) {
    function_width = std::max(function_width, entry.row.function.size());
    error_width = std::max(error_width, entry.row.error.size());
  }
  std::string out;
  for (const RowReport& entry : report) {
    absl::StrAppendFormat(&out, "%-7s %3d  %-*s  %-*s  %s", StatusWord(entry.status),
                          entry.row.number, static_cast<int>(function_width), entry.row.function,
                          static_cast<int>(error_width), entry.row.error,
                          entry.tests.empty() ? "-" : absl::StrJoin(entry.tests, ", "));
    for (const std::string& why : entry.not_in_design) {
      absl::StrAppend(&out, "  [cannot happen in softrpma: ", why, "]");
    }
    for (const std::string& upstream : entry.not_enforced) {
      absl::StrAppend(&out, "  [documented, not enforced: ", upstream, "]");
    }
    absl::StrAppend(&out, "\n");
  }
  const int no_test = CountRows(report, RowReport::Status::kNoTest);
  if (ran_tests) {
    const int passed = CountRows(report, RowReport::Status::kPassed);
    absl::StrAppendFormat(&out, "%d passed, %d failed\n", passed,
                          static_cast<int>(report.size()) - passed);
  } else {
    absl::StrAppendFormat(&out, "%d covered, %d not covered\n",
                          static_cast<int>(report.size()) - no_test, no_test);
  }
  return out;
}

std::string RenderMarkdown(const std::vector<RowReport>& report) {
  const int total = static_cast<int>(report.size());
  const int passed = CountRows(report, RowReport::Status::kPassed);
  const int failed = CountRows(report, RowReport::Status::kFailed);
  const int no_test = CountRows(report, RowReport::Status::kNoTest);
  const int not_run = CountRows(report, RowReport::Status::kNotRun);
  std::string out;
  absl::StrAppend(
      &out,
      "# Conformance: every documented error of librpma, tested\n"
      "\n"
      "<!-- Generated by `bazel run //tools:conformance -- --markdown`; do not edit. -->\n"
      "\n"
      "Each row of `tests/conformance/rpma-errors.tsv` (the team's copy of every ERRORS line "
      "of the librpma 1.3 man pages: function, error, trigger) has at least one test in "
      "`tests/conformance/` that produces exactly that error through the public API "
      "(`librpma.h`) on the simulated NIC: argument errors directly, provider failures by "
      "failing the named verbs / rdma_cm call with a fault (docs/FAULTS.md), `RPMA_E_NOMEM` "
      "through the `malloc` fault point, the rest as their triggers say. Each test also checks "
      "that nothing leaked and that the object is still usable or deletable where that "
      "applies. A test names the rows it covers (`RPMA_TEST_F`, "
      "`tests/conformance/coverage.h`); the tool matches them to the spec byte for byte.\n"
      "\n"
      "Run `bazel run //tools:conformance` for this report on the terminal (exit status 0 "
      "only when every row has a test and all pass); the same tests run in `bazel test "
      "//tests/conformance/...` (and so in `./run test`, plain and under ASan).\n"
      "\n");
  absl::StrAppendFormat(&out, "**%d of %d rows pass**", passed, total);
  std::vector<std::string> rest;
  if (failed > 0) rest.push_back(absl::StrCat(failed, " fail"));
  if (no_test > 0) rest.push_back(absl::StrCat(no_test, " have no test"));
  if (not_run > 0) rest.push_back(absl::StrCat(not_run, " were not run"));
  if (!rest.empty()) absl::StrAppend(&out, " (", absl::StrJoin(rest, ", "), ")");
  absl::StrAppend(&out, ".\n\n");

  std::vector<const RowReport*> not_in_design;
  for (const RowReport& entry : report) {
    if (!entry.not_in_design.empty()) not_in_design.push_back(&entry);
  }
  if (!not_in_design.empty()) {
    absl::StrAppend(&out,
                    "## Causes that cannot happen in softrpma\n\n"
                    "For these rows the documented cause does not exist in softrpma's design; "
                    "the test marked so demonstrates it (and any other cause the row names is "
                    "produced by its other tests).\n\n");
    for (const RowReport* entry : not_in_design) {
      absl::StrAppendFormat(&out, "* #%d `%s` `%s` (%s): %s.\n", entry->row.number,
                            entry->row.function, entry->row.error, Cell(entry->row.trigger),
                            absl::StrJoin(entry->not_in_design, "; "));
    }
    absl::StrAppend(&out, "\n");
  }

  std::vector<const RowReport*> not_enforced;
  for (const RowReport& entry : report) {
    if (!entry.not_enforced.empty()) not_enforced.push_back(&entry);
  }
  if (!not_enforced.empty()) {
    absl::StrAppend(&out,
                    "## Documented, not enforced (as upstream)\n\n"
                    "For these rows (or the part of a row its test names) upstream librpma "
                    "does not do what the man page says, real programs rely on what it does, "
                    "and softrpma does the same (docs/STATUS.md); the marked test shows it. Any "
                    "other cause the row names is produced by its other tests.\n\n");
    for (const RowReport* entry : not_enforced) {
      absl::StrAppendFormat(&out, "* #%d `%s` `%s` (%s): documented, not enforced: %s.\n",
                            entry->row.number, entry->row.function, entry->row.error,
                            Cell(entry->row.trigger), absl::StrJoin(entry->not_enforced, "; "));
    }
    absl::StrAppend(&out, "\n");
  }

  std::vector<const RowReport*> noted;
  for (const RowReport& entry : report) {
    if (!entry.notes.empty()) noted.push_back(&entry);
  }
  if (!noted.empty()) {
    absl::StrAppend(&out, "## How some rows are reached\n\n");
    for (const RowReport* entry : noted) {
      absl::StrAppendFormat(&out, "* #%d `%s` `%s` (%s): %s.\n", entry->row.number,
                            entry->row.function, entry->row.error, Cell(entry->row.trigger),
                            absl::StrJoin(entry->notes, "; "));
    }
    absl::StrAppend(&out, "\n");
  }

  absl::StrAppend(&out,
                  "## Rows\n\n"
                  "| # | function | error | trigger | test(s) | result |\n"
                  "|---|---|---|---|---|---|\n");
  for (const RowReport& entry : report) {
    std::vector<std::string> tests;
    for (size_t i = 0; i < entry.tests.size(); ++i) {
      tests.push_back(absl::StrCat("[`", entry.tests[i], "`](../", entry.files[i], ")"));
    }
    std::string result;
    switch (entry.status) {
      case RowReport::Status::kPassed: result = "pass"; break;
      case RowReport::Status::kFailed: result = "**FAIL**"; break;
      case RowReport::Status::kNotRun: result = "not run"; break;
      case RowReport::Status::kNoTest: result = "**no test**"; break;
    }
    if (!entry.not_in_design.empty()) absl::StrAppend(&result, " (cannot happen, see above)");
    for (const std::string& upstream : entry.not_enforced) {
      absl::StrAppend(&result, " (documented, not enforced: ", upstream, ")");
    }
    absl::StrAppendFormat(&out, "| %d | `%s` | `%s` | %s | %s | %s |\n", entry.row.number,
                          entry.row.function, entry.row.error, Cell(entry.row.trigger),
                          tests.empty() ? "-" : absl::StrJoin(tests, "<br>"), result);
  }
  return out;
}

}  // namespace softrpma::conformance
