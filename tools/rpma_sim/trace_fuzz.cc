// trace_fuzz: the trace reader (ParseTrace, FormatTrace) and the Chrome Trace Event view
// (ChromeTraceJson) on any text: `rpma-sim trace` reads files a crashed or hostile program may
// have written. Parsing fails with an InvalidArgument "line N: ..." or gives a trace whose
// Chrome view, alone and merged with itself, is valid JSON (RFC 8259, UTF-8 included: a viewer
// rejects the whole file otherwise).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "tools/fuzz/check.h"
#include "tools/rpma_sim/chrome_trace.h"
#include "tools/rpma_sim/json.h"
#include "tools/rpma_sim/trace.h"

namespace softrpma::rpma_sim {
namespace {

// A strict JSON checker: Value() consumes one value and says whether it was well formed.
class JsonChecker {
 public:
  explicit JsonChecker(absl::string_view text) : text_(text) {}

  bool Document() {
    if (!Value(0)) return false;
    SkipBlanks();
    return pos_ == text_.size();
  }

 private:
  static constexpr int kMaxDepth = 64;

  void SkipBlanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    SkipBlanks();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Literal(absl::string_view word) {
    if (!absl::StartsWith(text_.substr(pos_), word)) return false;
    pos_ += word.size();
    return true;
  }
  bool Digits() {
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ > start;
  }
  bool Number() {
    if (text_[pos_] == '-') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '0') {
      ++pos_;
    } else if (!Digits()) {
      return false;
    }
    if (pos_ < text_.size() && text_[pos_] == '.' && (++pos_, !Digits())) return false;
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!Digits()) return false;
    }
    return true;
  }
  bool String() {
    if (!Eat('"')) return false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<uint8_t>(c) < 0x20) return false;
      if (c == '\\') {
        if (++pos_ >= text_.size()) return false;
        const char escaped = text_[pos_++];
        if (escaped == 'u') {
          for (int i = 0; i < 4; ++i, ++pos_) {
            if (pos_ >= text_.size() || !absl::ascii_isxdigit(text_[pos_])) return false;
          }
        } else if (!absl::StrContains("\"\\/bfnrt", escaped)) {
          return false;
        }
        continue;
      }
      const size_t length = Utf8SequenceLength(text_.substr(pos_));
      if (length == 0) return false;
      pos_ += length;
    }
    return false;
  }
  bool Value(int depth) {
    if (depth > kMaxDepth) return false;
    SkipBlanks();
    if (pos_ >= text_.size()) return false;
    switch (text_[pos_]) {
      case '{':
        ++pos_;
        if (Eat('}')) return true;
        do {
          if (!String() || !Eat(':') || !Value(depth + 1)) return false;
        } while (Eat(','));
        return Eat('}');
      case '[':
        ++pos_;
        if (Eat(']')) return true;
        do {
          if (!Value(depth + 1)) return false;
        } while (Eat(','));
        return Eat(']');
      case '"':
        return String();
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number();
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

bool IsJson(const std::string& text) { return JsonChecker(text).Document(); }

}  // namespace
}  // namespace softrpma::rpma_sim

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace softrpma::rpma_sim;  // NOLINT: the target's one function
  absl::StatusOr<Trace> trace =
      ParseTrace(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!trace.ok()) {
    FUZZ_CHECK(trace.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(trace.status().message(), "line "));
    return 0;
  }
  FUZZ_CHECK(!FormatTrace(*trace).empty());
  FUZZ_CHECK(IsJson(ChromeTraceJson(*trace)));
  FUZZ_CHECK(IsJson(ChromeTraceJson({{"server.trace", &*trace}, {"client.trace", &*trace}})));
  return 0;
}
