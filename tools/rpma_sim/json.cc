#include "tools/rpma_sim/json.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace softrpma::rpma_sim {

size_t Utf8SequenceLength(absl::string_view text) {
  if (text.empty()) return 0;
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  size_t more = 0;
  uint32_t code = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    more = 1, code = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    more = 2, code = lead & 0x0f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    more = 3, code = lead & 0x07;
  } else {
    return 0;  // a continuation byte, or a lead byte of an overlong or too large form
  }
  if (text.size() <= more) return 0;
  for (size_t i = 1; i <= more; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3f);
  }
  static constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[more] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return 1 + more;
}

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      // JSON text is UTF-8: a viewer refuses a whole file for one stray byte (a trace value
      // is whatever a program wrote), so a byte that starts no well-formed sequence is U+FFFD.
      const size_t length = Utf8SequenceLength(text.substr(i));
      if (length == 0) {
        out += "\\ufffd";
      } else {
        out.append(text.data() + i, length);
        i += length - 1;
      }
      continue;
    }
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

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const auto& [name, value] : members) {
    if (name == key) return &value;
  }
  return nullptr;
}

namespace {

constexpr int kMaxJsonDepth = 64;

// A recursive-descent reader over one text; errors name the byte offset.
class JsonReader final {
 public:
  explicit JsonReader(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ReadDocument() {
    JsonValue value;
    if (absl::Status s = ReadValue(0, &value); !s.ok()) return s;
    SkipSpace();
    if (at_ != text_.size()) return Error("the end of the text (one value only)");
    return value;
  }

 private:
  absl::Status Error(absl::string_view expected) const {
    return absl::InvalidArgumentError(absl::StrCat("JSON, byte ", at_, ": expected ", expected));
  }
  void SkipSpace() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' ||
                                  text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }
  bool Consume(absl::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  absl::Status ReadValue(int depth, JsonValue* out) {
    if (depth > kMaxJsonDepth) return Error("at most 64 nested arrays and objects");
    SkipSpace();
    if (at_ >= text_.size()) return Error("a value");
    const char c = text_[at_];
    if (c == '{') return ReadObject(depth, out);
    if (c == '[') return ReadArray(depth, out);
    if (c == '"') {
      out->kind = JsonValue::Kind::kString;
      return ReadString(&out->text);
    }
    if (Consume("null")) {
      out->kind = JsonValue::Kind::kNull;
      return absl::OkStatus();
    }
    if (Consume("true") || Consume("false")) {
      out->kind = JsonValue::Kind::kBool;
      out->boolean = text_[at_ - 2] == 'u';  // tr(u)e, fal(s)e
      return absl::OkStatus();
    }
    return ReadNumber(out);
  }

  absl::Status ReadObject(int depth, JsonValue* out) {
    out->kind = JsonValue::Kind::kObject;
    ++at_;  // '{'
    SkipSpace();
    if (Consume("}")) return absl::OkStatus();
    while (true) {
      SkipSpace();
      if (at_ >= text_.size() || text_[at_] != '"') return Error("a member name (a string)");
      std::string key;
      if (absl::Status s = ReadString(&key); !s.ok()) return s;
      SkipSpace();
      if (!Consume(":")) return Error("':' after a member name");
      JsonValue value;
      if (absl::Status s = ReadValue(depth + 1, &value); !s.ok()) return s;
      out->members.emplace_back(std::move(key), std::move(value));
      SkipSpace();
      if (Consume("}")) return absl::OkStatus();
      if (!Consume(",")) return Error("',' or '}' in an object");
    }
  }

  absl::Status ReadArray(int depth, JsonValue* out) {
    out->kind = JsonValue::Kind::kArray;
    ++at_;  // '['
    SkipSpace();
    if (Consume("]")) return absl::OkStatus();
    while (true) {
      JsonValue value;
      if (absl::Status s = ReadValue(depth + 1, &value); !s.ok()) return s;
      out->elements.push_back(std::move(value));
      SkipSpace();
      if (Consume("]")) return absl::OkStatus();
      if (!Consume(",")) return Error("',' or ']' in an array");
    }
  }

  absl::Status ReadNumber(JsonValue* out) {
    const size_t begin = at_;
    auto digits = [&] {
      const size_t first = at_;
      while (at_ < text_.size() && absl::ascii_isdigit(static_cast<unsigned char>(text_[at_]))) {
        ++at_;
      }
      return at_ > first;
    };
    Consume("-");
    if (Consume("0")) {
    } else if (!digits()) {
      at_ = begin;
      return Error("a value");
    }
    if (Consume(".") && !digits()) return Error("digits after '.'");
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      ++at_;
      if (!Consume("+")) Consume("-");
      if (!digits()) return Error("digits of an exponent");
    }
    out->kind = JsonValue::Kind::kNumber;
    out->text = std::string(text_.substr(begin, at_ - begin));
    if (!absl::SimpleAtod(out->text, &out->number)) return Error("a number in range");
    return absl::OkStatus();
  }

  // Four hex digits at at_, as a number.
  absl::Status ReadHex4(uint32_t* code) {
    if (at_ + 4 > text_.size()) return Error("4 hex digits after \\u");
    *code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[at_++];
      int v = absl::ascii_isdigit(static_cast<unsigned char>(h)) ? h - '0'
              : (h >= 'a' && h <= 'f')                           ? h - 'a' + 10
              : (h >= 'A' && h <= 'F')                           ? h - 'A' + 10
                                                                 : -1;
      if (v < 0) return Error("4 hex digits after \\u");
      *code = *code * 16 + static_cast<uint32_t>(v);
    }
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t code, std::string* out) {
    if (code < 0x80) {
      *out += static_cast<char>(code);
    } else if (code < 0x800) {
      *out += static_cast<char>(0xc0 | (code >> 6));
      *out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      *out += static_cast<char>(0xe0 | (code >> 12));
      *out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      *out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      *out += static_cast<char>(0xf0 | (code >> 18));
      *out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      *out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      *out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  absl::Status ReadString(std::string* out) {
    ++at_;  // '"'
    while (true) {
      if (at_ >= text_.size()) return Error("the '\"' that ends a string");
      const unsigned char c = static_cast<unsigned char>(text_[at_]);
      if (c == '"') {
        ++at_;
        return absl::OkStatus();
      }
      if (c < 0x20) return Error("no control character inside a string (\\n, \\u00XX)");
      if (c >= 0x80) {
        const size_t length = Utf8SequenceLength(text_.substr(at_));
        if (length == 0) return Error("well-formed UTF-8");
        out->append(text_.data() + at_, length);
        at_ += length;
        continue;
      }
      ++at_;
      if (c != '\\') {
        *out += static_cast<char>(c);
        continue;
      }
      if (at_ >= text_.size()) return Error("an escape after '\\'");
      const char e = text_[at_++];
      switch (e) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          uint32_t code = 0;
          if (absl::Status s = ReadHex4(&code); !s.ok()) return s;
          if (code >= 0xd800 && code <= 0xdbff) {
            uint32_t low = 0;
            if (!Consume("\\u")) return Error("a low surrogate (\\udc00-\\udfff) after a high one");
            if (absl::Status s = ReadHex4(&low); !s.ok()) return s;
            if (low < 0xdc00 || low > 0xdfff) return Error("a low surrogate (\\udc00-\\udfff)");
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          } else if (code >= 0xdc00 && code <= 0xdfff) {
            return Error("a high surrogate before a low one");
          }
          AppendUtf8(code, out);
          break;
        }
        default:
          --at_;
          return Error("one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX");
      }
    }
  }

  absl::string_view text_;
  size_t at_ = 0;
};

}  // namespace

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) {
  return JsonReader(text).ReadDocument();
}

}  // namespace softrpma::rpma_sim
