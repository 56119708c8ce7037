#include "tools/rpma_sim/sim_env.h"

#include <stdlib.h>

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

TEST(SimCommand, SetsWhatIsGivenAndRemovesTheRest) {
  unsetenv("LD_LIBRARY_PATH");
  SimConfig config;
  config.seed = 42;
  config.faults = "ibv_post_send:fail=EIO:nth=3";
  config.trace = "/tmp/t.trace";
  config.lib_dir = "/opt/softrpma/lib";
  ChildCommand command = SimCommand(config, {"./app", "x"});
  EXPECT_THAT(command.argv, ElementsAre("./app", "x"));
  EXPECT_THAT(command.env_set,
              UnorderedElementsAre(Pair("RPMA_BACKEND", "sim"), Pair("RPMA_SIM_SEED", "42"),
                                   Pair("RPMA_SIM_FAULTS", "ibv_post_send:fail=EIO:nth=3"),
                                   Pair("RPMA_SIM_TRACE", "/tmp/t.trace"),
                                   Pair("LD_LIBRARY_PATH", "/opt/softrpma/lib")));
  EXPECT_THAT(command.env_unset, UnorderedElementsAre("RPMA_SIM_SCENARIO", "RPMA_SIM_STATS"));
}

TEST(SimCommand, NothingGiven_EverySimVariableRemoved) {
  ChildCommand command = SimCommand(SimConfig{}, {"./app"});
  EXPECT_THAT(command.env_set, ElementsAre(Pair("RPMA_BACKEND", "sim")));
  EXPECT_THAT(command.env_unset,
              UnorderedElementsAre("RPMA_SIM_SEED", "RPMA_SIM_FAULTS", "RPMA_SIM_SCENARIO",
                                   "RPMA_SIM_TRACE", "RPMA_SIM_STATS"));
}

TEST(SimCommand, EmptyFaultSpecIsSet) {
  SimConfig config;
  config.faults = "";
  ChildCommand command = SimCommand(config, {"./app"});
  EXPECT_THAT(command.env_set, Contains(Pair("RPMA_SIM_FAULTS", "")));
  EXPECT_THAT(command.env_unset, Not(Contains("RPMA_SIM_FAULTS")));
}

TEST(SimCommand, LibraryDirectoryGoesFirstInLdLibraryPath) {
  setenv("LD_LIBRARY_PATH", "/a:/b", 1);
  SimConfig config;
  config.lib_dir = "/ours";
  ChildCommand command = SimCommand(config, {"./app"});
  unsetenv("LD_LIBRARY_PATH");
  EXPECT_THAT(command.env_set, Contains(Pair("LD_LIBRARY_PATH", "/ours:/a:/b")));
}

TEST(ShellQuote, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(ShellQuote("demo"), "demo");
  EXPECT_EQ(ShellQuote("--once"), "--once");
  EXPECT_EQ(ShellQuote("bazel-bin/tools/demo"), "bazel-bin/tools/demo");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("two words"), "'two words'");
  EXPECT_EQ(ShellQuote("a;b"), "'a;b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$HOME"), "'$HOME'");
}

TEST(ReplayCommand, OneLineThatRunsTheSameRun) {
  SimConfig config;
  config.seed = 7;
  config.faults = "ibv_post_send:fail=EIO:nth=3";
  config.stats = "/tmp/stats";  // not part of a replay
  EXPECT_EQ(ReplayCommand("rpma-sim", config, "", {"./my app", "--once"}),
            "rpma-sim run --seed=7 --faults='ibv_post_send:fail=EIO:nth=3' -- './my app' --once");
}

TEST(ReplayCommand, LibOnlyWhenGiven) {
  SimConfig config;
  config.faults = "malloc:fail=ENOMEM:nth=1";
  config.lib_dir = "/resolved/api";
  EXPECT_EQ(ReplayCommand("bazel-bin/tools/rpma_sim/rpma-sim", config, "", {"demo"}),
            "bazel-bin/tools/rpma_sim/rpma-sim run --faults='malloc:fail=ENOMEM:nth=1' -- demo");
  EXPECT_EQ(ReplayCommand("rpma-sim", config, "my lib", {"demo"}),
            "rpma-sim run --faults='malloc:fail=ENOMEM:nth=1' --lib='my lib' -- demo");
}

TEST(ReplayCommand, NoFaults_NoFaultsFlag) {
  EXPECT_EQ(ReplayCommand("rpma-sim", SimConfig{}, "", {"demo", "--once"}),
            "rpma-sim run -- demo --once");
}

TEST(FindLibDir, GivenDirectoryWithoutTheLibrary_NotFound) {
  absl::StatusOr<std::string> dir = FindLibDir("/nonexistent", "rpma-sim");
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(dir.status().message(), HasSubstr("--lib=/nonexistent: there is no librpma.so.0"));
}

}  // namespace
}  // namespace softrpma::rpma_sim
