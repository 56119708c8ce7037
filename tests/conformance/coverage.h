// coverage.h: how a conformance test declares which documented errors it produces.
//
// Every line of tests/conformance/rpma-errors.tsv (function, error, trigger: one ERRORS line of
// a librpma man page) is covered by at least one test written with RPMA_TEST_F:
//
//   RPMA_TEST_F(ConnTest, ConnWait_GetCqEventReturnsUnknownCq_ReturnsUnknown,
//               RPMA_ROW("rpma_conn_wait", "RPMA_E_UNKNOWN",
//                        "ibv_get_cq_event(3) returned unknown CQ")) {
//     ... arrange / call / verify ...
//   }
//
// RPMA_TEST_F is TEST_F plus a static registration of (full test name, rows) that
// tools/conformance.cc reads without running anything: it checks that each claimed row is
// exactly (byte for byte) a row of the TSV and that each TSV row has a test, then runs the
// tests and reports each row. A test may claim several rows; a row may have several tests.
//
// RPMA_ROW_NOT_IN_DESIGN marks a row whose cause cannot happen in softrpma (e.g. "munmap()
// failed" where no munmap is involved); its test demonstrates why, and the report and
// docs/CONFORMANCE.md show the reason. RPMA_ROW_NOTE adds a note for docs/CONFORMANCE.md on
// how the test reaches a row (e.g. through a test backend). RPMA_ROW_NOT_ENFORCED marks a row
// (or a part of one) that softrpma deliberately does not enforce because upstream librpma does
// not (e.g. it accepts a NULL op_context that the man page calls invalid, and real programs
// rely on that): its test shows what softrpma does instead, as upstream does, and the report
// shows "documented, not enforced" with the reason.
//
// Thread-safety: registration happens during static initialization; AllCoverage() may be
// called from any thread after main() starts.

#ifndef SOFTRPMA_TESTS_CONFORMANCE_COVERAGE_H_
#define SOFTRPMA_TESTS_CONFORMANCE_COVERAGE_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace softrpma::conformance {

// One row of rpma-errors.tsv as a test claims it.
struct CoveredRow {
  const char* function;  // e.g. "rpma_conn_wait"
  const char* error;     // e.g. "RPMA_E_UNKNOWN"
  const char* trigger;   // the TSV's trigger text, exactly
  // nullptr when the test produces the error; otherwise why the cause cannot happen in
  // softrpma (the test then demonstrates that).
  const char* not_in_design;
  // nullptr, or how the test reaches the row when that is not plain (shown in the report).
  const char* note;
  // nullptr when softrpma enforces the row; otherwise what upstream librpma does instead
  // ("upstream accepts it"), which softrpma does too and the test shows.
  const char* not_enforced;
};

// One (test, row) claim.
struct Coverage {
  std::string test;  // the full gtest name, "Fixture.Name"
  CoveredRow row;
  std::string file;  // where the test is, for error messages
  int line;
};

// Every claim registered in this binary, in registration order.
const std::vector<Coverage>& AllCoverage();

// Registers the claims of one test; used by RPMA_TEST_F only.
class CoverageRegistrar final {
 public:
  CoverageRegistrar(const char* test, std::initializer_list<CoveredRow> rows, const char* file,
                    int line);
};

}  // namespace softrpma::conformance

// A row the test produces.
#define RPMA_ROW(function, error, trigger) \
  ::softrpma::conformance::CoveredRow { function, error, trigger, nullptr, nullptr, nullptr }

// A row the test produces in a way the report should explain (`note`).
#define RPMA_ROW_NOTE(function, error, trigger, note) \
  ::softrpma::conformance::CoveredRow { function, error, trigger, nullptr, note, nullptr }

// A row whose cause cannot happen in softrpma; `why` says why, the test shows it.
#define RPMA_ROW_NOT_IN_DESIGN(function, error, trigger, why) \
  ::softrpma::conformance::CoveredRow { function, error, trigger, why, nullptr, nullptr }

// A row (or the part of it the test names) that softrpma does not enforce, as upstream librpma
// does not; `upstream` says what upstream does instead ("upstream accepts it"), the test shows
// softrpma doing the same.
#define RPMA_ROW_NOT_ENFORCED(function, error, trigger, upstream) \
  ::softrpma::conformance::CoveredRow { function, error, trigger, nullptr, nullptr, upstream }

// TEST_F(fixture, name) that covers the RPMA_ROW(...)s given after the name.
#define RPMA_TEST_F(fixture, name, ...)                                                     \
  static const ::softrpma::conformance::CoverageRegistrar rpma_coverage_##fixture##_##name( \
      #fixture "." #name, {__VA_ARGS__}, __FILE__, __LINE__);                               \
  TEST_F(fixture, name)

#endif  // SOFTRPMA_TESTS_CONFORMANCE_COVERAGE_H_
