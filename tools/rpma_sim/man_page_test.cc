#include "tools/rpma_sim/man_page.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RoffText, EscapesBackslashesMinusesAndALeadingControlCharacter) {
  EXPECT_EQ(RoffText("a\\b"), "a\\eb");
  EXPECT_EQ(RoffText("--seed=S"), "\\-\\-seed=S");
  EXPECT_EQ(RoffText(".so /etc/passwd"), "\\&.so /etc/passwd");
  EXPECT_EQ(RoffText("'br"), "\\&'br");
  EXPECT_EQ(RoffText("plain words"), "plain words");
}

ManSource Sample() {
  ManSource source;
  source.version = "softrpma 9.9.9";
  source.summary = "run things";
  source.synopsis = "rpma-sim run -- PROGRAM\nrpma-sim --man\n";
  source.description = "First paragraph,\nits second line.\n\nA list:\n  one\n  two\n";
  ManCommand run;
  run.name = "run";
  run.synopsis = "rpma-sim run [--seed=S] -- PROGRAM";
  run.description = ".leading dot stays text";
  run.flags = {ManFlag{"--seed", "S", "", "the seed"}, ManFlag{"-j", "N", "2", "runs at once"},
               ManFlag{"--leaks", "", "false", "look for leaks"}};
  run.examples = "rpma-sim run -- ./app\n";
  source.commands = {run};
  source.exit_status = "0 or 1.";
  source.see_also = "docs/RPMA_SIM.md";
  return source;
}

TEST(ManPage, HasTheSectionsOfAManPage) {
  const std::string page = ManPage(Sample());
  EXPECT_THAT(page, HasSubstr(".TH RPMA\\-SIM 1 \"\" \"softrpma 9.9.9\" \"softrpma\"\n"));
  EXPECT_THAT(page, HasSubstr(".SH NAME\nrpma\\-sim \\- run things\n"));
  EXPECT_THAT(page, HasSubstr(".SH SYNOPSIS\n.RS 4\n.nf\nrpma\\-sim run \\-\\- PROGRAM\n"));
  EXPECT_THAT(page, HasSubstr(".SH DESCRIPTION\n"));
  EXPECT_THAT(page, HasSubstr(".SS \"rpma\\-sim run\"\n"));
  EXPECT_THAT(page, HasSubstr(".SH \"EXIT STATUS\"\n.PP\n0 or 1.\n"));
  EXPECT_THAT(page, HasSubstr(".SH \"SEE ALSO\"\n"));
}

TEST(ManPage, FilledParagraphsAndIndentedOnesKeptAsLaidOut) {
  const std::string page = ManPage(Sample());
  EXPECT_THAT(page, HasSubstr(".PP\nFirst paragraph,\nits second line.\n"));
  EXPECT_THAT(page, HasSubstr(".PP\n.nf\nA list:\n  one\n  two\n.fi\n"));
  EXPECT_THAT(page, HasSubstr("\\&.leading dot stays text\n"));
  EXPECT_THAT(page, Not(HasSubstr("\n.leading")));
}

TEST(ManPage, FlagsAsTheirHelpShowsThem) {
  const std::string page = ManPage(Sample());
  EXPECT_THAT(page, HasSubstr(".TP\n\\fB\\-\\-seed\\fR=\\fIS\\fR\nthe seed\n"));
  EXPECT_THAT(page, HasSubstr(".TP\n\\fB\\-j\\fR \\fIN\\fR (default: 2)\nruns at once\n"));
  EXPECT_THAT(page, HasSubstr(".TP\n\\fB\\-\\-leaks\\fR (default: false)\nlook for leaks\n"));
}

}  // namespace
}  // namespace softrpma::rpma_sim
