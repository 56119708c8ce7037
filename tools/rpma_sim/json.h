// json.h: the little JSON that rpma-sim writes (sweep reports, Chrome traces): string escaping
// and a writer that places the commas; and a reader for the reports it wrote (`report merge`).
//
// Thread-safety: JsonWriter is not thread-safe; the free functions are.

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_JSON_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_JSON_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
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

// One parsed JSON value. Objects keep their members in file order (a key given twice: the first
// is found).
struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;  // a string's value (UTF-8); a number's spelling (for exact integers)
  std::vector<JsonValue> elements;
  std::vector<std::pair<std::string, JsonValue>> members;

  bool is_null() const { return kind == Kind::kNull; }
  // The member called `key` of an object, or nullptr (also when this is not an object).
  const JsonValue* Find(absl::string_view key) const;
};

// Parses one JSON text (RFC 8259; surrounding white space allowed, nothing else after it).
// Nesting deeper than 64 is refused. Errors: InvalidArgument naming the byte offset and what
// was expected there.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_JSON_H_
