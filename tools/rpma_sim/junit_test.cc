#include "tools/rpma_sim/junit.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::HasSubstr;

TEST(XmlEscape, EscapesMarkupAndKeepsUtf8) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'", false), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(XmlEscape("caf\xc3\xa9 \xf0\x9f\x98\x80", false), "caf\xc3\xa9 \xf0\x9f\x98\x80");
}

TEST(XmlEscape, NewlinesSurviveInAttributes) {
  EXPECT_EQ(XmlEscape("a\nb\tc\rd", false), "a\nb\tc&#13;d");
  EXPECT_EQ(XmlEscape("a\nb\tc\rd", true), "a&#10;b&#9;c&#13;d");
}

TEST(XmlEscape, WhatXmlCannotHoldBecomesTheReplacementCharacter) {
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(XmlEscape(std::string("a\0b", 3), false), "a" + fffd + "b");
  EXPECT_EQ(XmlEscape("\x1b[K", false), fffd + "[K");  // a terminal's escape sequence
  EXPECT_EQ(XmlEscape("\xff\xc3", false), fffd + fffd);  // malformed UTF-8
  EXPECT_EQ(XmlEscape("\xef\xbf\xbf", false), fffd);     // U+FFFF
}

TEST(JunitXml, CountsCasesAndFailures) {
  JunitSuite suite{"s<1>", {}};
  suite.cases.push_back({"ok", "cls", 0.5, false, "", "", "", ""});
  suite.cases.push_back({"bad & worse", "cls", 0.25, true, "crashed (SIGSEGV)", "crashed",
                         "crashed (SIGSEGV): p\n  replay: x", "tail"});
  const std::string xml = JunitXml("all", {suite});
  EXPECT_THAT(xml, HasSubstr("<testsuites name=\"all\" tests=\"2\" failures=\"1\" errors=\"0\" "
                             "time=\"0.750\">"));
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"s&lt;1&gt;\" tests=\"2\" failures=\"1\" "
                             "errors=\"0\" skipped=\"0\" time=\"0.750\">"));
  EXPECT_THAT(xml, HasSubstr("<testcase name=\"ok\" classname=\"cls\" time=\"0.500\"/>"));
  EXPECT_THAT(xml, HasSubstr("<failure message=\"crashed (SIGSEGV)\" type=\"crashed\">"
                             "crashed (SIGSEGV): p\n  replay: x</failure>"));
  EXPECT_THAT(xml, HasSubstr("<system-out>tail</system-out>"));
}

}  // namespace
}  // namespace softrpma::rpma_sim
