#include "tools/rpma_sim/json.h"

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

TEST(JsonQuote, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("l1\nl2\tx\r"), "\"l1\\nl2\\tx\\r\"");
  EXPECT_EQ(JsonQuote(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonQuote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
}

// Found by //tools/rpma_sim:trace_fuzzer (testdata/fuzz/trace/quotes_and_controls): a trace
// value with a stray byte made the Chrome view invalid JSON.
TEST(JsonQuote, ReplacesEachByteOfMalformedUtf8) {
  EXPECT_EQ(JsonQuote("\xff"), "\"\\ufffd\"");
  EXPECT_EQ(JsonQuote("a\xc3"), "\"a\\ufffd\"");                     // cut sequence
  EXPECT_EQ(JsonQuote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");            // overlong '/'
  EXPECT_EQ(JsonQuote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
  EXPECT_EQ(JsonQuote("\xf0\x9f\x98\x80!"), "\"\xf0\x9f\x98\x80!\"");   // U+1F600
}

TEST(Utf8SequenceLength, CountsOneWellFormedSequence) {
  EXPECT_EQ(Utf8SequenceLength(""), 0u);
  EXPECT_EQ(Utf8SequenceLength("a"), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xc3\xa9x"), 2u);
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82\xac"), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xf4\x8f\xbf\xbf"), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(Utf8SequenceLength("\x80"), 0u);
}

TEST(JsonWriter, NestsAndPlacesCommas) {
  JsonWriter w;
  w.BeginObject();
  w.Key("a");
  w.Int(-1);
  w.Key("b");
  w.BeginArray();
  w.Uint(1);
  w.String("x");
  w.Bool(true);
  w.Null();
  w.BeginObject();
  w.EndObject();
  w.EndArray();
  w.Key("c");
  w.Double(2.5);
  w.EndObject();
  EXPECT_EQ(w.text(), "{\"a\":-1,\"b\":[1,\"x\",true,null,{}],\"c\":2.5}");
}

TEST(JsonWriter, DoublesHaveAtMostThreeDecimals) {
  JsonWriter w;
  w.BeginArray();
  w.Double(2.731);
  w.Double(3.0);
  w.Double(0.0004);
  w.Double(1234567.125);
  w.Double(std::numeric_limits<double>::infinity());
  w.EndArray();
  EXPECT_EQ(w.text(), "[2.731,3,0,1234567.125,null]");
}

TEST(JsonWriter, NewlineBeforeNextElement) {
  JsonWriter w;
  w.BeginArray();
  w.NewlineBeforeNext();
  w.Int(1);
  w.NewlineBeforeNext();
  w.Int(2);
  w.EndArray();
  EXPECT_EQ(w.text(), "[\n  1,\n  2]");
}

TEST(ParseJson, ReadsWhatTheWriterWrites) {
  JsonWriter w;
  w.BeginObject();
  w.Key("s");
  w.String("a\"b\\c\nd\x01 caf\xc3\xa9");
  w.Key("n");
  w.Uint(18446744073709551615u);
  w.Key("d");
  w.Double(-2.5);
  w.Key("list");
  w.BeginArray();
  w.Bool(true);
  w.Bool(false);
  w.Null();
  w.EndArray();
  w.EndObject();
  absl::StatusOr<JsonValue> v = ParseJson(w.text());
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->kind, JsonValue::Kind::kObject);
  ASSERT_NE(v->Find("s"), nullptr);
  EXPECT_EQ(v->Find("s")->text, "a\"b\\c\nd\x01 caf\xc3\xa9");
  EXPECT_EQ(v->Find("n")->text, "18446744073709551615");  // exact, whatever a double holds
  EXPECT_EQ(v->Find("d")->number, -2.5);
  const JsonValue* list = v->Find("list");
  ASSERT_EQ(list->elements.size(), 3u);
  EXPECT_TRUE(list->elements[0].boolean);
  EXPECT_EQ(list->elements[1].kind, JsonValue::Kind::kBool);
  EXPECT_FALSE(list->elements[1].boolean);
  EXPECT_TRUE(list->elements[2].is_null());
  EXPECT_EQ(v->Find("missing"), nullptr);
}

TEST(ParseJson, DecodesEscapesAndSurrogatePairs) {
  absl::StatusOr<JsonValue> v = ParseJson(R"( ["\u00e9\ud83d\ude00\/\t"] )");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->elements[0].text, "\xc3\xa9\xf0\x9f\x98\x80/\t");
}

TEST(ParseJson, MalformedTextNamesTheOffset) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"", "byte 0: expected a value"},
      {"{\"a\" 1}", "byte 5: expected ':' after a member name"},
      {"[1,]", "byte 3: expected a value"},
      {"[1 2]", "byte 3: expected ',' or ']' in an array"},
      {"{\"a\":1,}", "byte 7: expected a member name"},
      {"\"abc", "expected the '\"' that ends a string"},
      {"\"\\x\"", "byte 2: expected one of"},
      {"\"\\ud800\"", "expected a low surrogate"},
      {"\"\xff\"", "byte 1: expected well-formed UTF-8"},
      {"01", "byte 1: expected the end of the text"},
      {"1.", "expected digits after '.'"},
      {"nul", "byte 0: expected a value"},
      {"{} x", "byte 3: expected the end of the text"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<JsonValue> v = ParseJson(c.text);
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(v.status().message()), ::testing::HasSubstr(c.message)) << c.text;
  }
}

TEST(ParseJson, RefusesDeepNesting) {
  EXPECT_TRUE(ParseJson(std::string(64, '[') + std::string(64, ']')).ok());
  absl::StatusOr<JsonValue> v = ParseJson(std::string(100000, '['));
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()), ::testing::HasSubstr("at most 64 nested"));
}

}  // namespace
}  // namespace softrpma::rpma_sim
