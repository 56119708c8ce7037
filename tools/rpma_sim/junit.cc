#include "tools/rpma_sim/junit.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/rpma_sim/json.h"

namespace softrpma::rpma_sim {
namespace {

constexpr char kReplacement[] = "\xef\xbf\xbd";  // U+FFFD

std::string Seconds(double s) { return absl::StrFormat("%.3f", s < 0 ? 0.0 : s); }

}  // namespace

std::string XmlEscape(absl::string_view text, bool attribute) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(text.substr(i));
      if (length == 0) {
        out += kReplacement;
        continue;
      }
      // U+FFFE and U+FFFF are not XML characters either.
      absl::string_view sequence = text.substr(i, length);
      out += (sequence == "\xef\xbf\xbe" || sequence == "\xef\xbf\xbf") ? kReplacement
                                                                         : std::string(sequence);
      i += length - 1;
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += "&#13;"; break;  // a raw CR would be read as a newline
      default:
        if (c < 0x20 || c == 0x7f) {
          out += kReplacement;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string JunitXml(absl::string_view name, const std::vector<JunitSuite>& suites) {
  size_t tests = 0, failures = 0;
  double time_s = 0;
  std::string body;
  for (const JunitSuite& suite : suites) {
    size_t suite_failures = 0;
    double suite_time_s = 0;
    std::string cases;
    for (const JunitCase& c : suite.cases) {
      suite_time_s += c.time_s;
      absl::StrAppend(&cases, "    <testcase name=\"", XmlEscape(c.name, true),
                      "\" classname=\"", XmlEscape(c.classname, true), "\" time=\"",
                      Seconds(c.time_s), "\"");
      if (!c.failed && c.system_out.empty()) {
        absl::StrAppend(&cases, "/>\n");
        continue;
      }
      absl::StrAppend(&cases, ">\n");
      if (c.failed) {
        ++suite_failures;
        absl::StrAppend(&cases, "      <failure message=\"", XmlEscape(c.failure_message, true),
                        "\" type=\"", XmlEscape(c.failure_type, true), "\">",
                        XmlEscape(c.failure_text, false), "</failure>\n");
      }
      if (!c.system_out.empty()) {
        absl::StrAppend(&cases, "      <system-out>", XmlEscape(c.system_out, false),
                        "</system-out>\n");
      }
      absl::StrAppend(&cases, "    </testcase>\n");
    }
    absl::StrAppend(&body, "  <testsuite name=\"", XmlEscape(suite.name, true), "\" tests=\"",
                    suite.cases.size(), "\" failures=\"", suite_failures,
                    "\" errors=\"0\" skipped=\"0\" time=\"", Seconds(suite_time_s), "\">\n", cases,
                    "  </testsuite>\n");
    tests += suite.cases.size();
    failures += suite_failures;
    time_s += suite_time_s;
  }
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"",
                      XmlEscape(name, true), "\" tests=\"", tests, "\" failures=\"", failures,
                      "\" errors=\"0\" time=\"", Seconds(time_s), "\">\n", body,
                      "</testsuites>\n");
}

}  // namespace softrpma::rpma_sim
