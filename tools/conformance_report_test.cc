#include "tools/conformance_report.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::conformance {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr char kSpec[] =
    "function\terror\ttrigger\n"
    "rpma_a\tRPMA_E_INVAL\tx is NULL\n"
    "rpma_a\tRPMA_E_PROVIDER\tibv_foo(3) failed\n"
    "rpma_b\tRPMA_E_INVAL\tconn == NULL || flags == 0\n";

Claim MakeClaim(const std::string& test, const std::string& function, const std::string& error,
                const std::string& trigger, const std::string& not_in_design = "") {
  Claim claim;
  claim.test = test;
  claim.function = function;
  claim.error = error;
  claim.trigger = trigger;
  claim.not_in_design = not_in_design;
  claim.file = "tests/conformance/a_test.cc";
  claim.line = 10;
  return claim;
}

TEST(ParseSpecTest, ValidSpec_RowsNumberedFromOne) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_THAT(*spec, SizeIs(3));
  EXPECT_EQ((*spec)[0].number, 1);
  EXPECT_EQ((*spec)[0].function, "rpma_a");
  EXPECT_EQ((*spec)[2].trigger, "conn == NULL || flags == 0");
}

TEST(ParseSpecTest, NoFinalNewline_Accepted) {
  auto spec = ParseSpec("function\terror\ttrigger\nrpma_a\tRPMA_E_INVAL\tx is NULL");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(*spec, SizeIs(1));
}

TEST(ParseSpecTest, WrongHeader_Rejected) {
  auto spec = ParseSpec("fn\terr\ttrigger\n");
  EXPECT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("line 1"));
}

TEST(ParseSpecTest, WrongFieldCount_RejectedWithLine) {
  auto spec = ParseSpec("function\terror\ttrigger\nrpma_a\tRPMA_E_INVAL\n");
  EXPECT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("line 2"));
}

TEST(ParseSpecTest, DuplicateRow_Rejected) {
  auto spec =
      ParseSpec("function\terror\ttrigger\nrpma_a\tRPMA_E_INVAL\tx\nrpma_a\tRPMA_E_INVAL\tx\n");
  EXPECT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("line 3: duplicate"));
}

TEST(UnknownClaimsTest, ExactClaims_NoMessage) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT(UnknownClaims(*spec, {MakeClaim("T.a", "rpma_a", "RPMA_E_INVAL", "x is NULL")}),
              SizeIs(0));
}

TEST(UnknownClaimsTest, TriggerTypo_ReportedWithTheSpecsTriggers) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  std::vector<std::string> messages =
      UnknownClaims(*spec, {MakeClaim("T.a", "rpma_a", "RPMA_E_INVAL", "x is null")});
  ASSERT_THAT(messages, SizeIs(1));
  EXPECT_THAT(messages[0], HasSubstr("T.a (tests/conformance/a_test.cc:10)"));
  EXPECT_THAT(messages[0], HasSubstr("\"x is NULL\""));
}

TEST(UnknownClaimsTest, UnknownFunction_Reported) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  std::vector<std::string> messages =
      UnknownClaims(*spec, {MakeClaim("T.c", "rpma_c", "RPMA_E_INVAL", "x is NULL")});
  ASSERT_THAT(messages, SizeIs(1));
  EXPECT_THAT(messages[0], HasSubstr("no row for rpma_c RPMA_E_INVAL"));
}

TEST(BuildReportTest, Statuses_FromClaimsAndResults) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  std::vector<Claim> claims = {
      MakeClaim("T.a1", "rpma_a", "RPMA_E_INVAL", "x is NULL"),
      MakeClaim("T.a2", "rpma_a", "RPMA_E_PROVIDER", "ibv_foo(3) failed"),
      MakeClaim("T.a3", "rpma_a", "RPMA_E_PROVIDER", "ibv_foo(3) failed", "no foo here"),
  };
  std::vector<RowReport> report = BuildReport(*spec, claims,
                                              {{"T.a1", TestResult::kPassed},
                                               {"T.a2", TestResult::kPassed},
                                               {"T.a3", TestResult::kFailed}});
  ASSERT_THAT(report, SizeIs(3));
  EXPECT_EQ(report[0].status, RowReport::Status::kPassed);
  EXPECT_THAT(report[0].tests, ElementsAre("T.a1"));
  EXPECT_EQ(report[1].status, RowReport::Status::kFailed);
  EXPECT_THAT(report[1].tests, ElementsAre("T.a2", "T.a3"));
  EXPECT_THAT(report[1].not_in_design, ElementsAre("no foo here"));
  EXPECT_EQ(report[2].status, RowReport::Status::kNoTest);
}

TEST(BuildReportTest, TestNotRun_RowNotRun) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  std::vector<RowReport> report =
      BuildReport(*spec, {MakeClaim("T.a1", "rpma_a", "RPMA_E_INVAL", "x is NULL")}, {});
  EXPECT_EQ(report[0].status, RowReport::Status::kNotRun);
}

TEST(RenderTextTest, RanTests_LastLineCountsRowsAndUncoveredRowsFail) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  std::vector<RowReport> report =
      BuildReport(*spec, {MakeClaim("T.a1", "rpma_a", "RPMA_E_INVAL", "x is NULL")},
                  {{"T.a1", TestResult::kPassed}});
  const std::string text = RenderText(report, /*ran_tests=*/true);
  EXPECT_TRUE(absl::EndsWith(text, "\n1 passed, 2 failed\n")) << text;
  EXPECT_THAT(text, HasSubstr("PASS      1  rpma_a  RPMA_E_INVAL     T.a1\n"));
  EXPECT_THAT(text, HasSubstr("NO TEST   3  rpma_b  RPMA_E_INVAL     -\n"));
}

TEST(RenderTextTest, CoverageOnly_CountsCoveredRows) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  std::vector<RowReport> report =
      BuildReport(*spec, {MakeClaim("T.a1", "rpma_a", "RPMA_E_INVAL", "x is NULL")}, {});
  EXPECT_TRUE(
      absl::EndsWith(RenderText(report, /*ran_tests=*/false), "\n1 covered, 2 not covered\n"));
}

TEST(RenderMarkdownTest, PipesInTriggersAreEscaped_AndNotInDesignListed) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  std::vector<RowReport> report = BuildReport(
      *spec, {MakeClaim("T.b", "rpma_b", "RPMA_E_INVAL", "conn == NULL || flags == 0", "because")},
      {{"T.b", TestResult::kPassed}});
  const std::string markdown = RenderMarkdown(report);
  EXPECT_THAT(markdown, HasSubstr("conn == NULL \\|\\| flags == 0"));
  EXPECT_THAT(markdown, HasSubstr("**1 of 3 rows pass** (2 have no test)."));
  EXPECT_THAT(markdown, HasSubstr("* #3 `rpma_b` `RPMA_E_INVAL`"));
  EXPECT_THAT(markdown, HasSubstr("[`T.b`](../tests/conformance/a_test.cc)"));
}

TEST(RenderMarkdownTest, Notes_ListedUnderHowRowsAreReached) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  Claim claim = MakeClaim("T.a", "rpma_a", "RPMA_E_INVAL", "x is NULL");
  claim.note = "through a test backend";
  std::vector<RowReport> report = BuildReport(*spec, {claim}, {{"T.a", TestResult::kPassed}});
  EXPECT_THAT(report[0].notes, ElementsAre("through a test backend"));
  EXPECT_THAT(RenderMarkdown(report),
              HasSubstr("## How some rows are reached\n\n* #1 `rpma_a` `RPMA_E_INVAL` (x is "
                        "NULL): through a test backend.\n"));
}

TEST(RenderMarkdownTest, NotEnforced_ListedAndShownInTheResult) {
  auto spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  Claim enforced = MakeClaim("T.a1", "rpma_a", "RPMA_E_INVAL", "x is NULL");
  Claim accepted = MakeClaim("T.a2", "rpma_a", "RPMA_E_INVAL", "x is NULL");
  accepted.not_enforced = "upstream accepts it";
  std::vector<RowReport> report = BuildReport(
      *spec, {enforced, accepted}, {{"T.a1", TestResult::kPassed}, {"T.a2", TestResult::kPassed}});
  EXPECT_EQ(report[0].status, RowReport::Status::kPassed);
  EXPECT_THAT(report[0].not_enforced, ElementsAre("upstream accepts it"));
  const std::string markdown = RenderMarkdown(report);
  EXPECT_THAT(markdown, HasSubstr("## Documented, not enforced (as upstream)\n"));
  EXPECT_THAT(markdown, HasSubstr("* #1 `rpma_a` `RPMA_E_INVAL` (x is NULL): documented, not "
                                  "enforced: upstream accepts it.\n"));
  EXPECT_THAT(markdown, HasSubstr("| pass (documented, not enforced: upstream accepts it) |"));
  EXPECT_THAT(RenderText(report, /*ran_tests=*/true),
              HasSubstr("[documented, not enforced: upstream accepts it]"));
}

}  // namespace
}  // namespace softrpma::conformance
