// json.h: the little JSON that rpma-sim writes (sweep reports, Chrome traces): string escaping
// and a writer that places the commas.
//
// Thread-safety: JsonWriter is not thread-safe; the free functions are.

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_JSON_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_JSON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace softrpma::rpma_sim {

// `text` as a JSON string literal, quotes included: ", \ and control characters escaped;
// well-formed UTF-8 is copied as it is, and each byte of anything else is \ufffd (U+FFFD), so
// the result is valid JSON whatever `text` holds.
std::string JsonQuote(absl::string_view text);

// The bytes of the well-formed UTF-8 sequence `text` starts with (1 to 4: no overlong form, no
// surrogate, at most U+10FFFF), or 0 when it starts with none (or is empty).
size_t Utf8SequenceLength(absl::string_view text);

// Appends JSON text to a string, writing the commas between members and elements itself.
// Usage: w.BeginObject(); w.Key("a"); w.Int(1); w.EndObject();  ->  {"a":1}
// REQUIRES: calls nest properly (a Key before each value inside an object, none in an array);
// a violation is a programming error and is not diagnosed.
class JsonWriter final {
 public:
  JsonWriter() = default;
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(absl::string_view key);
  void String(absl::string_view value);
  void Int(int64_t value);
  void Uint(uint64_t value);
  // A finite number with up to 3 decimals (durations in ms, timestamps in us).
  void Double(double value);
  void Bool(bool value);
  void Null();
  // Starts a new line before the next element of the innermost array (readable reports).
  void NewlineBeforeNext() { newline_ = true; }

  const std::string& text() const { return out_; }

 private:
  void BeforeValue();

  std::string out_;
  // Per open container: whether it already has an element.
  std::vector<bool> has_element_;
  bool after_key_ = false;
  bool newline_ = false;
};

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_JSON_H_
