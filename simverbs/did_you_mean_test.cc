#include "simverbs/did_you_mean.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace softrpma {
namespace {

const std::vector<std::string> kSubcommands = {"points", "devices", "run",
                                               "sweep",  "trace",   "report"};

TEST(DidYouMean, OneTypo_TheWordMeant) {
  EXPECT_EQ(DidYouMean("swep", kSubcommands), "sweep");     // a letter missing
  EXPECT_EQ(DidYouMean("sweeep", kSubcommands), "sweep");   // one too many
  EXPECT_EQ(DidYouMean("trcae", kSubcommands), "trace");    // two swapped
  EXPECT_EQ(DidYouMean("Devices", kSubcommands), "devices"); // case
  EXPECT_EQ(DidYouMean("ibv_post_sned", {"ibv_post_send", "ibv_post_recv"}), "ibv_post_send");
}

TEST(DidYouMean, NothingClose_NoGuess) {
  EXPECT_EQ(DidYouMean("frobnicate", kSubcommands), "");
  EXPECT_EQ(DidYouMean("xy", kSubcommands), "");
  EXPECT_EQ(DidYouMean("", kSubcommands), "");
  EXPECT_EQ(DidYouMean("sweep", kSubcommands), "");  // not a typo
  EXPECT_EQ(DidYouMean(std::string(1000, 'a'), kSubcommands), "");
}

TEST(DidYouMean, TwoEquallyClose_NoGuess) {
  EXPECT_EQ(DidYouMean("rua", {"run", "rub"}), "");
}

TEST(DidYouMeanSuffix, ForAMessage) {
  EXPECT_EQ(DidYouMeanSuffix("swep", kSubcommands), " (did you mean \"sweep\"?)");
  EXPECT_EQ(DidYouMeanSuffix("zzz", kSubcommands), "");
}

}  // namespace
}  // namespace softrpma
