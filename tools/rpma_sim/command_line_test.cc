#include "tools/rpma_sim/command_line.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// Flags of the kinds rpma-sim has, under the names ParseArgs looks up.
ABSL_FLAG(uint64_t, seed, 0, "test");
ABSL_FLAG(std::string, faults, "", "test");
ABSL_FLAG(int32_t, j, 2, "test");
ABSL_FLAG(uint64_t, max_runs, 0, "test");
ABSL_FLAG(bool, leaks, false, "test");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(10), "test");

namespace softrpma::rpma_sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::vector<SubcommandSpec> kSubcommands = {
    {"points", {}, false, 0, 0},
    {"run", {"seed", "faults"}, true, 0, 0},
    {"sweep", {"seed", "j", "max_runs", "leaks", "timeout"}, true, 0, 0},
    {"trace", {}, false, 1, 1},
};

class ParseArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::SetFlag(&FLAGS_seed, 0);
    absl::SetFlag(&FLAGS_faults, "");
    absl::SetFlag(&FLAGS_j, 2);
    absl::SetFlag(&FLAGS_max_runs, 0);
    absl::SetFlag(&FLAGS_leaks, false);
    absl::SetFlag(&FLAGS_timeout, absl::Seconds(10));
  }

  // The error message of a command line that must fail.
  std::string Error(const std::vector<std::string>& args) {
    absl::StatusOr<CommandLine> line = ParseArgs(kSubcommands, args);
    EXPECT_FALSE(line.ok());
    if (line.ok()) return "";
    EXPECT_EQ(line.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(line.status().message());
  }
};

TEST_F(ParseArgsTest, RunWithFlagsAndProgram) {
  absl::StatusOr<CommandLine> line = ParseArgs(
      kSubcommands,
      {"run", "--seed=42", "--faults", "ibv_post_send:fail=EIO", "--", "./app", "--port", "7"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->subcommand, "run");
  EXPECT_FALSE(line->help);
  EXPECT_THAT(line->program, ElementsAre("./app", "--port", "7"));
  EXPECT_THAT(line->args, IsEmpty());
  EXPECT_TRUE(line->given.contains("seed"));
  EXPECT_TRUE(line->given.contains("faults"));
  EXPECT_EQ(absl::GetFlag(FLAGS_seed), 42u);
  EXPECT_EQ(absl::GetFlag(FLAGS_faults), "ibv_post_send:fail=EIO");
  EXPECT_THAT(line->flag_words, ElementsAre("--seed=42", "--faults=ibv_post_send:fail=EIO"));
}

TEST_F(ParseArgsTest, EmptyFaultsIsGiven) {
  absl::StatusOr<CommandLine> line = ParseArgs(kSubcommands, {"run", "--faults=", "--", "a"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_TRUE(line->given.contains("faults"));
  EXPECT_EQ(absl::GetFlag(FLAGS_faults), "");
}

TEST_F(ParseArgsTest, SweepSpellings) {
  absl::StatusOr<CommandLine> line =
      ParseArgs(kSubcommands, {"sweep", "-j", "4", "--max-runs=40", "--leaks", "--timeout=500ms",
                               "--seed=0x10", "--", "demo", "--once"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_j), 4);
  EXPECT_EQ(absl::GetFlag(FLAGS_max_runs), 40u);
  EXPECT_TRUE(absl::GetFlag(FLAGS_leaks));
  EXPECT_EQ(absl::GetFlag(FLAGS_timeout), absl::Milliseconds(500));
  EXPECT_EQ(absl::GetFlag(FLAGS_seed), 16u);
  EXPECT_TRUE(line->given.contains("max_runs"));
  EXPECT_THAT(line->program, ElementsAre("demo", "--once"));
}

TEST_F(ParseArgsTest, JWithTheNumberAttachedAndNoBool) {
  absl::SetFlag(&FLAGS_leaks, true);
  absl::StatusOr<CommandLine> line =
      ParseArgs(kSubcommands, {"sweep", "-j3", "--noleaks", "--", "demo"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_j), 3);
  EXPECT_FALSE(absl::GetFlag(FLAGS_leaks));
}

TEST_F(ParseArgsTest, TraceTakesOneArgument) {
  absl::StatusOr<CommandLine> line = ParseArgs(kSubcommands, {"trace", "run.trace"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_THAT(line->args, ElementsAre("run.trace"));
  EXPECT_THAT(Error({"trace"}), HasSubstr("`rpma-sim trace` needs 1 argument"));
  EXPECT_THAT(Error({"trace", "a", "b"}), HasSubstr("unexpected argument \"b\""));
}

TEST_F(ParseArgsTest, Help) {
  for (std::vector<std::string> args :
       std::vector<std::vector<std::string>>{{"--help"},
                                             {"-h"},
                                             {"help"},
                                             {"sweep", "--help"},
                                             {"help", "sweep"},
                                             {"--helpfull"},
                                             {"sweep", "--bogus", "--help"}}) {
    absl::StatusOr<CommandLine> line = ParseArgs(kSubcommands, args);
    ASSERT_TRUE(line.ok()) << args[0] << ": " << line.status();
    EXPECT_TRUE(line->help) << args[0];
  }
  EXPECT_EQ(ParseArgs(kSubcommands, {"help", "sweep"})->subcommand, "sweep");
  EXPECT_EQ(ParseArgs(kSubcommands, {"sweep", "-h"})->subcommand, "sweep");
  EXPECT_EQ(ParseArgs(kSubcommands, {"--help"})->subcommand, "");
  EXPECT_THAT(Error({"help", "bogus"}), HasSubstr("unknown subcommand \"bogus\""));
}

TEST_F(ParseArgsTest, NoSubcommand) {
  EXPECT_THAT(Error({}), HasSubstr("no subcommand given; the subcommands are points, run, sweep, "
                                   "trace"));
  EXPECT_THAT(Error({"--", "demo"}), HasSubstr("no subcommand given"));
}

TEST_F(ParseArgsTest, UnknownSubcommand) {
  EXPECT_THAT(Error({"swep", "--", "demo"}), HasSubstr("unknown subcommand \"swep\""));
}

TEST_F(ParseArgsTest, FlagBeforeTheSubcommand) {
  EXPECT_THAT(Error({"--seed=1", "run", "--", "a"}), HasSubstr("the subcommand comes first"));
}

TEST_F(ParseArgsTest, UnknownFlag) {
  std::string error = Error({"sweep", "--jobs=3", "--", "demo"});
  EXPECT_THAT(error, HasSubstr("unknown flag --jobs=3"));
  EXPECT_THAT(error, HasSubstr("`rpma-sim sweep` takes --seed, -j, --max-runs, --leaks"));
}

TEST_F(ParseArgsTest, FlagOfAnotherSubcommand) {
  EXPECT_THAT(Error({"run", "--max-runs=3", "--", "demo"}),
              HasSubstr("flag --max-runs=3 is not a flag of `rpma-sim run`"));
  EXPECT_THAT(Error({"points", "--seed=1"}), HasSubstr("`rpma-sim points` takes no flags"));
}

TEST_F(ParseArgsTest, BadOrMissingValue) {
  EXPECT_THAT(Error({"sweep", "-j", "many", "--", "demo"}),
              HasSubstr("bad value for -j: \"many\""));
  EXPECT_THAT(Error({"sweep", "--timeout=10", "--", "demo"}), HasSubstr("bad value for --timeout"));
  EXPECT_THAT(Error({"sweep", "--max-runs", "--", "demo"}),
              HasSubstr("flag --max-runs needs a value"));
  EXPECT_THAT(Error({"run", "--seed=-1", "--", "a"}), HasSubstr("bad value for --seed"));
}

TEST_F(ParseArgsTest, ProgramMissingOrNotTaken) {
  EXPECT_THAT(Error({"run", "./app"}), HasSubstr("unexpected argument \"./app\"; the program to "
                                                 "run comes after \"--\""));
  EXPECT_THAT(Error({"sweep"}), HasSubstr("needs the program to run after \"--\""));
  EXPECT_THAT(Error({"sweep", "--"}), HasSubstr("needs the program to run after \"--\""));
  EXPECT_THAT(Error({"points", "--", "x"}), HasSubstr("runs no program"));
}

TEST_F(ParseArgsTest, WordsAfterTheSeparatorAreNeverFlags) {
  absl::StatusOr<CommandLine> line =
      ParseArgs(kSubcommands, {"run", "--", "prog", "--seed=99", "--", "--help"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_FALSE(line->help);
  EXPECT_THAT(line->program, ElementsAre("prog", "--seed=99", "--", "--help"));
  EXPECT_EQ(absl::GetFlag(FLAGS_seed), 0u);
}

TEST(FlagSpelling, DashesAndOneLetterFlags) {
  EXPECT_EQ(FlagSpelling("max_runs"), "--max-runs");
  EXPECT_EQ(FlagSpelling("j"), "-j");
  EXPECT_EQ(FlagSpelling("seed"), "--seed");
}

}  // namespace
}  // namespace softrpma::rpma_sim
