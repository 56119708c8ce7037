#include "tools/rpma_sim/sim_env.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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
                                   Pair("RPMA_SIM_RACE_DETECTOR", "1"),
                                   Pair("LD_LIBRARY_PATH", "/opt/softrpma/lib")));
  EXPECT_THAT(command.env_unset,
              UnorderedElementsAre("RPMA_SIM_SCENARIO", "RPMA_SIM_STATS", "RPMA_SIM_DEVICE",
                                   "RPMA_SIM_EXECUTION"));
}

TEST(SimCommand, DeviceGiven_RpmaSimDeviceSet) {
  SimConfig config;
  config.device = "siw";
  ChildCommand command = SimCommand(config, {"./app"});
  EXPECT_THAT(command.env_set, Contains(Pair("RPMA_SIM_DEVICE", "siw")));
  EXPECT_THAT(command.env_unset, Not(Contains("RPMA_SIM_DEVICE")));
}

TEST(SimCommand, NothingGiven_EverySimVariableRemoved) {
  ChildCommand command = SimCommand(SimConfig{}, {"./app"});
  EXPECT_THAT(command.env_set,
              ElementsAre(Pair("RPMA_BACKEND", "sim"), Pair("RPMA_SIM_RACE_DETECTOR", "1")));
  EXPECT_THAT(command.env_unset,
              UnorderedElementsAre("RPMA_SIM_SEED", "RPMA_SIM_FAULTS", "RPMA_SIM_SCENARIO",
                                   "RPMA_SIM_TRACE", "RPMA_SIM_STATS", "RPMA_SIM_DEVICE",
                                   "RPMA_SIM_EXECUTION"));
}

TEST(SimCommand, ExecutionAndRaceDetectorAsGiven) {
  SimConfig config;
  config.execution = "eager";
  config.race_detector = false;
  ChildCommand command = SimCommand(config, {"./app"});
  EXPECT_THAT(command.env_set, Contains(Pair("RPMA_SIM_EXECUTION", "eager")));
  EXPECT_THAT(command.env_set, Contains(Pair("RPMA_SIM_RACE_DETECTOR", "0")));
  EXPECT_EQ(ReplayCommand("rpma-sim", config, "", {"./app"}),
            "rpma-sim run --execution=eager --races=false -- ./app");
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

TEST(ReplayCommand, DeviceFirstWhenGiven) {
  SimConfig config;
  config.device = "siw";
  config.seed = 3;
  EXPECT_EQ(ReplayCommand("rpma-sim", config, "", {"demo"}),
            "rpma-sim run --device=siw --seed=3 -- demo");
}

TEST(ReplayCommand, NoFaults_NoFaultsFlag) {
  EXPECT_EQ(ReplayCommand("rpma-sim", SimConfig{}, "", {"demo", "--once"}),
            "rpma-sim run -- demo --once");
}

TEST(LibDirCandidates, EveryLayoutOnce_InOrder) {
  EXPECT_THAT(
      LibDirCandidates("/b/tools/rpma_sim/rpma-sim", "/b/tools/rpma_sim/rpma-sim", "/r"),
      ElementsAre("/b/tools/rpma_sim", "/b/tools/rpma_sim/../lib", "/b/tools/rpma_sim/../../api",
                  "/b/tools/rpma_sim/../../api/librpma/lib",
                  "/b/tools/rpma_sim/rpma-sim.runfiles/softrpma/api", "/r/softrpma/api"));
  EXPECT_THAT(LibDirCandidates("/x/rpma-sim", "/opt/s/bin/rpma-sim", ""),
              ElementsAre("/x", "/x/../lib", "/x/../../api", "/x/../../api/librpma/lib",
                          "/x/rpma-sim.runfiles/softrpma/api", "/opt/s/bin", "/opt/s/bin/../lib",
                          "/opt/s/bin/../../api", "/opt/s/bin/../../api/librpma/lib",
                          "/opt/s/bin/rpma-sim.runfiles/softrpma/api"));
}

TEST(FindLibDir, GivenDirectoryWithAnotherLibrpma_NotFound) {
  std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/other");
  mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/librpma.so.0") << "\x7f" "ELF the distro's librpma, say";
  absl::StatusOr<std::string> found = FindLibDir(dir, "rpma-sim");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(), HasSubstr("librpma.so.0 in "));
  EXPECT_THAT(found.status().message(), HasSubstr("/other is not softrpma's"));
  // The marker may straddle the reader's blocks.
  std::ofstream(dir + "/librpma.so.0")
      << std::string((1 << 16) - 5, 'x') << "softrpma-sim: fault injected";
  EXPECT_TRUE(FindLibDir(dir, "rpma-sim").ok());
}

TEST(FindLibDir, GivenDirectoryWithoutTheLibrary_NotFound) {
  absl::StatusOr<std::string> dir = FindLibDir("/nonexistent", "rpma-sim");
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(dir.status().message(), HasSubstr("--lib=/nonexistent: there is no librpma.so.0"));
}

}  // namespace
}  // namespace softrpma::rpma_sim
