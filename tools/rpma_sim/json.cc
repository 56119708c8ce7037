#include "tools/rpma_sim/json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace softrpma::rpma_sim {

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ += ',';
    has_element_.back() = true;
    if (newline_) out_ += "\n  ";
  }
  newline_ = false;
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  has_element_.push_back(false);
}

void JsonWriter::EndObject() {
  has_element_.pop_back();
  out_ += '}';
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  has_element_.push_back(false);
}

void JsonWriter::EndArray() {
  has_element_.pop_back();
  if (newline_) out_ += '\n';
  newline_ = false;
  out_ += ']';
}

void JsonWriter::Key(absl::string_view key) {
  BeforeValue();
  out_ += JsonQuote(key);
  out_ += ':';
  after_key_ = true;
}

void JsonWriter::String(absl::string_view value) {
  BeforeValue();
  out_ += JsonQuote(value);
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  absl::StrAppend(&out_, value);
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  absl::StrAppend(&out_, value);
}

void JsonWriter::Double(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_ += "null";
    return;
  }
  std::string text = absl::StrFormat("%.3f", value);
  // Trim trailing zeros (and a trailing point): 12.500 -> 12.5, 3.000 -> 3.
  while (!text.empty() && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  if (text == "-0") text = "0";
  out_ += text;
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
}

void JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
}

}  // namespace softrpma::rpma_sim
