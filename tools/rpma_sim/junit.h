// junit.h: JUnit XML, the test report every CI system displays (GitHub Actions test reporters,
// GitLab's `artifacts:reports:junit`, Jenkins, Bazel's test.xml): <testsuites> holding
// <testsuite>s of <testcase>s, a failing case with a <failure>. rpma-sim writes one test case per
// run (`run --junit`, `sweep --junit`, `report merge --junit`).
//
// Thread-safety: every function is thread-safe (none keeps state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_JUNIT_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_JUNIT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace softrpma::rpma_sim {

struct JunitCase {
  std::string name;       // e.g. "ibv_post_send hit 3"
  std::string classname;  // dotted, grouped by CI systems: "rpma-sim.sweep.mlx5.my_app"
  double time_s = 0;
  bool failed = false;
  std::string failure_message;  // one line: the outcome ("crashed (SIGSEGV)")
  std::string failure_type;     // the outcome class ("crashed")
  std::string failure_text;     // the outcome and the replay line
  std::string system_out;       // e.g. the end of the run's output; "" for none
};

struct JunitSuite {
  std::string name;
  std::vector<JunitCase> cases;
};

// `text` as XML 1.0 character data or attribute value: & < > " ' escaped, \t \n \r kept (as
// &#9; &#10; &#13; in attributes, where a parser would otherwise normalize them to blanks),
// every other control character and every byte of malformed UTF-8 replaced by U+FFFD (XML
// cannot carry them, escaped or not), so that the result is well-formed whatever `text` holds.
std::string XmlEscape(absl::string_view text, bool attribute);

// The XML document: <testsuites name tests failures errors time> with one <testsuite name
// tests failures errors skipped time> per suite, each <testcase name classname time>, a failing
// one with <failure message type>failure_text</failure>, and <system-out> when there is any.
std::string JunitXml(absl::string_view name, const std::vector<JunitSuite>& suites);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_JUNIT_H_
