#include "tools/rpma_sim/json.h"

#include <limits>

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

}  // namespace
}  // namespace softrpma::rpma_sim
