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
                                   "RPMA_SIM_EXECUTION", "RPMA_SIM_RUN_DIR"));
}

TEST(SimCommand, DeviceGiven_RpmaSimDeviceSet) {
  SimConfig config;
  config.device = "siw";
  ChildCommand command = SimCommand(config, {"./app"});
  EXPECT_THAT(command.env_set, Contains(Pair("RPMA_SIM_DEVICE", "siw")));
  EXPECT_THAT(command.env_unset, Not(Contains("RPMA_SIM_DEVICE")));
}

TEST(SimCommand, NothingGiven_EverySimVariableRemoved) {
  unsetenv("LD_LIBRARY_PATH");
  ChildCommand command = SimCommand(SimConfig{}, {"./app"});
  EXPECT_THAT(command.env_set,
              ElementsAre(Pair("RPMA_BACKEND", "sim"), Pair("RPMA_SIM_RACE_DETECTOR", "1")));
  EXPECT_THAT(command.env_unset,
              UnorderedElementsAre("RPMA_SIM_SEED", "RPMA_SIM_FAULTS", "RPMA_SIM_SCENARIO",
                                   "RPMA_SIM_TRACE", "RPMA_SIM_STATS", "RPMA_SIM_DEVICE",
                                   "RPMA_SIM_EXECUTION", "RPMA_SIM_RUN_DIR"));
}

TEST(SimCommand, RunDirGiven_RpmaSimRunDirSet) {
  SimConfig config;
  config.run_dir = "/tmp/sweep/run-3.d";
  ChildCommand command = SimCommand(config, {"./app"});
  EXPECT_THAT(command.env_set, Contains(Pair("RPMA_SIM_RUN_DIR", "/tmp/sweep/run-3.d")));
  EXPECT_THAT(command.env_unset, Not(Contains("RPMA_SIM_RUN_DIR")));
}

TEST(SimCommand, ExecutionAndRaceDetectorAsGiven) {
  SimConfig config;
  config.execution = "eager";
  config.race_detector = false;
  ChildCommand command = SimCommand(config, {"./app"});
  EXPECT_THAT(command.env_set, Contains(Pair("RPMA_SIM_EXECUTION", "eager")));
  EXPECT_THAT(command.env_set, Contains(Pair("RPMA_SIM_RACE_DETECTOR", "0")));
  EXPECT_EQ(ReplayCommand("rpma-sim", config, {}, {"./app"}),
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

TEST(SimCommand, VerbsShimAfterOurLibrary) {
  setenv("LD_LIBRARY_PATH", "/a", 1);
  SimConfig config;
  config.lib_dir = "/ours";
  config.verbs_lib_dir = "/shim";
  ChildCommand command = SimCommand(config, {"./app"});
  unsetenv("LD_LIBRARY_PATH");
  EXPECT_THAT(command.env_set, Contains(Pair("LD_LIBRARY_PATH", "/ours:/shim:/a")));
  EXPECT_THAT(command.env_set, Contains(Pair("RPMA_BACKEND", "sim")));
}

// A directory with a file named librpma.so.0 holding `text`; returns its path.
std::string LibrpmaDir(const std::string& name, const std::string& text) {
  std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/librpma.so.0") << text;
  return dir;
}

TEST(SimCommand, Upstream_IbverbsBackendAndOurLibraryDroppedFromTheInheritedPath) {
  const std::string ours = LibrpmaDir("inherited-ours", "\x7f" "ELF softrpma-sim: ours");
  const std::string theirs = LibrpmaDir("inherited-theirs", "\x7f" "ELF upstream");
  setenv("LD_LIBRARY_PATH", absl::StrCat("/a:", ours, ":", theirs).c_str(), 1);
  SimConfig config;
  config.verbs_lib_dir = "/shim";
  config.upstream_librpma = true;
  config.upstream_lib_dir = "/upstream";
  ChildCommand command = SimCommand(config, {"./app"});
  unsetenv("LD_LIBRARY_PATH");
  EXPECT_THAT(command.env_set, Contains(Pair("RPMA_BACKEND", "ibverbs")));
  EXPECT_THAT(command.env_set,
              Contains(Pair("LD_LIBRARY_PATH", absl::StrCat("/shim:/upstream:/a:", theirs))));
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
  EXPECT_EQ(ReplayCommand("rpma-sim", config, {}, {"./my app", "--once"}),
            "rpma-sim run --seed=7 --faults='ibv_post_send:fail=EIO:nth=3' -- './my app' --once");
}

TEST(ReplayCommand, LibOnlyWhenGiven) {
  SimConfig config;
  config.faults = "malloc:fail=ENOMEM:nth=1";
  config.lib_dir = "/resolved/api";
  config.verbs_lib_dir = "/resolved/shim";
  EXPECT_EQ(ReplayCommand("bazel-bin/tools/rpma_sim/rpma-sim", config, {}, {"demo"}),
            "bazel-bin/tools/rpma_sim/rpma-sim run --faults='malloc:fail=ENOMEM:nth=1' -- demo");
  LibraryFlags flags;
  flags.lib = "my lib";
  flags.verbs_lib = "shim";
  EXPECT_EQ(ReplayCommand("rpma-sim", config, flags, {"demo"}),
            "rpma-sim run --faults='malloc:fail=ENOMEM:nth=1' --lib='my lib' --verbs-lib=shim "
            "-- demo");
}

TEST(ReplayCommand, UpstreamLibrpmaWhenGiven) {
  LibraryFlags flags;
  flags.upstream_librpma = true;
  EXPECT_EQ(ReplayCommand("rpma-sim", SimConfig{}, flags, {"demo"}),
            "rpma-sim run --upstream-librpma -- demo");
  flags.upstream_librpma = false;
  flags.upstream_lib = "/opt/rpma/lib";
  EXPECT_EQ(ReplayCommand("rpma-sim", SimConfig{}, flags, {"demo"}),
            "rpma-sim run --upstream-lib=/opt/rpma/lib -- demo");
}

TEST(ReplayCommand, DeviceFirstWhenGiven) {
  SimConfig config;
  config.device = "siw";
  config.seed = 3;
  EXPECT_EQ(ReplayCommand("rpma-sim", config, {}, {"demo"}),
            "rpma-sim run --device=siw --seed=3 -- demo");
}

TEST(ReplayCommand, NoFaults_NoFaultsFlag) {
  EXPECT_EQ(ReplayCommand("rpma-sim", SimConfig{}, {}, {"demo", "--once"}),
            "rpma-sim run -- demo --once");
}

TEST(LibDirCandidates, EveryLayoutOnce_InOrder) {
  EXPECT_THAT(
      LibDirCandidates("/b/tools/rpma_sim/rpma-sim", "/b/tools/rpma_sim/rpma-sim", "/r"),
      ElementsAre("/b/tools/rpma_sim", "/b/tools/rpma_sim/../lib/softrpma",
                  "/b/tools/rpma_sim/../lib", "/b/tools/rpma_sim/../../api",
                  "/b/tools/rpma_sim/../../api/librpma/lib/softrpma",
                  "/b/tools/rpma_sim/rpma-sim.runfiles/softrpma/api", "/r/softrpma/api"));
  EXPECT_THAT(LibDirCandidates("/x/rpma-sim", "/opt/s/bin/rpma-sim", ""),
              ElementsAre("/x", "/x/../lib/softrpma", "/x/../lib", "/x/../../api",
                          "/x/../../api/librpma/lib/softrpma",
                          "/x/rpma-sim.runfiles/softrpma/api", "/opt/s/bin",
                          "/opt/s/bin/../lib/softrpma", "/opt/s/bin/../lib",
                          "/opt/s/bin/../../api", "/opt/s/bin/../../api/librpma/lib/softrpma",
                          "/opt/s/bin/rpma-sim.runfiles/softrpma/api"));
}

TEST(VerbsLibDirCandidates, EveryLayoutOnce_InOrder) {
  EXPECT_THAT(VerbsLibDirCandidates("/b/tools/rpma_sim/rpma-sim", "/b/tools/rpma_sim/rpma-sim",
                                    "/r"),
              ElementsAre("/b/tools/rpma_sim", "/b/tools/rpma_sim/../lib/softrpma/verbs-shim",
                          "/b/tools/rpma_sim/../../simverbs/shim/lib",
                          "/b/tools/rpma_sim/rpma-sim.runfiles/softrpma/simverbs/shim/lib",
                          "/r/softrpma/simverbs/shim/lib"));
}

TEST(FindVerbsLibDir, GivenDirectory_MustHoldTheShimsTwoLibraries) {
  std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/verbs");
  mkdir(dir.c_str(), 0755);
  absl::StatusOr<std::string> found = FindVerbsLibDir(dir, "rpma-sim");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(),
              HasSubstr("there is no libibverbs.so.1 and librdmacm.so.1 in "));
  // rdma-core's libibverbs is not the shim's.
  std::ofstream(dir + "/libibverbs.so.1") << "\x7f" "ELF rdma-core";
  std::ofstream(dir + "/librdmacm.so.1") << "\x7f" "ELF softrpma_shim_backend";
  found = FindVerbsLibDir(dir, "rpma-sim");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(), HasSubstr("does not hold the verbs shim's"));
  std::ofstream(dir + "/libibverbs.so.1") << "\x7f" "ELF softrpma-sim: the simulator";
  found = FindVerbsLibDir(dir, "rpma-sim");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, ::testing::EndsWith("/verbs"));
  // A librdmacm.so.1 that is rdma-core's is not the shim's either.
  std::ofstream(dir + "/librdmacm.so.1") << "\x7f" "ELF rdma-core's librdmacm";
  EXPECT_FALSE(FindVerbsLibDir(dir, "rpma-sim").ok());
}

TEST(FindUpstreamLibDir, TheFirstSystemDirectoryWithALibrpmaThatIsNotOurs) {
  const std::string ours = LibrpmaDir("sys-ours", "\x7f" "ELF softrpma-sim: ours");
  const std::string theirs = LibrpmaDir("sys-theirs", "\x7f" "ELF upstream");
  absl::StatusOr<std::string> found = FindUpstreamLibDir("", {"/nonexistent", ours, theirs});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(*found, ::testing::EndsWith("/sys-theirs"));
  found = FindUpstreamLibDir(theirs, {});
  ASSERT_TRUE(found.ok()) << found.status();
}

TEST(FindUpstreamLibDir, NotInstalled_SaysWhereItLookedAndWhatToInstall) {
  absl::StatusOr<std::string> found = FindUpstreamLibDir("", {"/nonexistent", "/nowhere"});
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(),
              HasSubstr("upstream librpma is not installed: no librpma.so.0 in /nonexistent, "
                        "/nowhere; install the distro's (Debian, Ubuntu: apt-get install "
                        "librpma0)"));
  const std::string ours = LibrpmaDir("only-ours", "\x7f" "ELF softrpma-sim: ours");
  found = FindUpstreamLibDir(ours, {});
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(), HasSubstr("is softrpma's, not upstream librpma"));
  EXPECT_THAT(found.status().message(), HasSubstr("--upstream-lib="));
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
