#include "tools/rpma_sim/process.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

// Whether `pid` no longer runs: no such process, or one that exited and waits to be reaped.
// Its /proc/PID/stat is read with read(2): a process reaped between the open and the read
// makes the read fail with ESRCH, which a std::ifstream read through istreambuf_iterator
// turns into an exception.
bool IsDeadOrZombie(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  const int fd = open(absl::StrCat("/proc/", pid, "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buffer[512];
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  close(fd);
  if (n <= 0) return true;
  const std::string stat(buffer, static_cast<size_t>(n));
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || (paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

ChildCommand Shell(const std::string& script, const std::string& output = "") {
  ChildCommand command;
  command.argv = {"/bin/sh", "-c", script};
  command.output_path = output;
  return command;
}

// Generous: only runs that are meant to hang ever reach it.
const absl::Duration kLongTimeout = absl::Seconds(120);

TEST(ChildEnvironment, SetsReplacesAndRemoves) {
  char a[] = "KEEP=1";
  char b[] = "REPLACE=old";
  char c[] = "DROP=x";
  char* base[] = {a, b, c, nullptr};
  ChildCommand command;
  command.env_set = {{"REPLACE", "new"}, {"ADD", "2"}};
  command.env_unset = {"DROP", "NOT_THERE"};
  EXPECT_THAT(ChildEnvironment(base, command),
              UnorderedElementsAre("KEEP=1", "REPLACE=new", "ADD=2"));
}

TEST(ChildEnvironment, SetWinsOverUnset) {
  char a[] = "X=1";
  char* base[] = {a, nullptr};
  ChildCommand command;
  command.env_set = {{"X", "2"}};
  command.env_unset = {"X"};
  EXPECT_THAT(ChildEnvironment(base, command), ElementsAre("X=2"));
}

TEST(FindProgram, SearchesPathAndTakesPathsAsTheyAre) {
  absl::StatusOr<std::string> sh = FindProgram("sh", "/nonexistent:/bin:/usr/bin");
  ASSERT_TRUE(sh.ok()) << sh.status();
  EXPECT_EQ(*sh, "/bin/sh");
  EXPECT_EQ(*FindProgram("/bin/sh", ""), "/bin/sh");
  EXPECT_EQ(FindProgram("no-such-program-xyz", "/bin:/usr/bin").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(FindProgram("/nonexistent/prog", "/bin").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindProgram("", "/bin").status().code(), absl::StatusCode::kNotFound);
}

TEST(RunChildren, ExitStatusSignalAndOutput) {
  std::string out0 = TempPath("out0");
  std::string out1 = TempPath("out1");
  ChildCommand env_child = Shell("echo \"FOO=$FOO BAR=${BAR-unset}\"; echo err >&2; exit 3", out0);
  env_child.env_set = {{"FOO", "foo value"}};
  env_child.env_unset = {"BAR"};
  setenv("BAR", "inherited", 1);
  std::vector<ChildCommand> commands = {env_child, Shell("kill -SEGV $$", out1)};
  std::vector<size_t> done;
  absl::StatusOr<std::vector<ChildExit>> exits =
      RunChildren(commands, 2, kLongTimeout,
                  [&done](size_t index, const ChildExit&) { done.push_back(index); });
  unsetenv("BAR");
  ASSERT_TRUE(exits.ok()) << exits.status();
  ASSERT_EQ(exits->size(), 2u);
  EXPECT_EQ((*exits)[0].exit_code, 3);
  EXPECT_EQ((*exits)[0].signal, 0);
  EXPECT_FALSE((*exits)[0].timed_out);
  EXPECT_EQ((*exits)[1].exit_code, -1);
  EXPECT_EQ((*exits)[1].signal, SIGSEGV);
  EXPECT_THAT(done, UnorderedElementsAre(0, 1));
  EXPECT_EQ(ReadFile(out0), "FOO=foo value BAR=unset\nerr\n");
}

TEST(RunChildren, OneJobRunsInOrder) {
  std::vector<ChildCommand> commands = {Shell("exit 0"), Shell("exit 1"), Shell("exit 2")};
  std::vector<size_t> done;
  absl::StatusOr<std::vector<ChildExit>> exits =
      RunChildren(commands, 1, kLongTimeout,
                  [&done](size_t index, const ChildExit&) { done.push_back(index); });
  ASSERT_TRUE(exits.ok()) << exits.status();
  EXPECT_THAT(done, ElementsAre(0, 1, 2));
  EXPECT_EQ((*exits)[2].exit_code, 2);
}

TEST(RunChildren, TimeoutKillsTheWholeProcessGroup) {
  // The child starts a grandchild that would outlive it and records its pid.
  std::string pid_file = TempPath("grandchild.pid");
  std::vector<ChildCommand> commands = {
      Shell(absl::StrCat("sleep 300 & echo $! > ", pid_file, "; wait"))};
  absl::StatusOr<std::vector<ChildExit>> exits =
      RunChildren(commands, 1, absl::Milliseconds(500), nullptr);
  ASSERT_TRUE(exits.ok()) << exits.status();
  EXPECT_TRUE((*exits)[0].timed_out);
  EXPECT_EQ((*exits)[0].signal, SIGKILL);
  pid_t grandchild = std::atoi(ReadFile(pid_file).c_str());
  ASSERT_GT(grandchild, 0);
  // The grandchild got SIGKILL with its group: it is gone, or a zombie nobody reaped yet.
  // Bounded wait.
  bool gone = false;
  for (int i = 0; i < 1000 && !gone; ++i) {
    gone = IsDeadOrZombie(grandchild);
    if (!gone) usleep(10000);
  }
  EXPECT_TRUE(gone) << "grandchild " << grandchild << " survived its group's kill";
}

TEST(RunChildren, ProgramThatCannotStart_Exit127WithAMessage) {
  std::string out = TempPath("missing.out");
  ChildCommand command;
  command.argv = {"no-such-program-xyz"};
  command.output_path = out;
  absl::StatusOr<std::vector<ChildExit>> exits = RunChildren({command}, 1, kLongTimeout, nullptr);
  ASSERT_TRUE(exits.ok()) << exits.status();
  EXPECT_EQ((*exits)[0].exit_code, 127);
  EXPECT_THAT(ReadFile(out), HasSubstr("rpma-sim: cannot run no-such-program-xyz"));
}

TEST(RunChildren, UnwritableOutput_Internal) {
  absl::StatusOr<std::vector<ChildExit>> exits =
      RunChildren({Shell("exit 0", "/nonexistent/dir/out")}, 1, kLongTimeout, nullptr);
  EXPECT_EQ(exits.status().code(), absl::StatusCode::kInternal);
}

TEST(RunChildren, NoCommands_NoResults) {
  absl::StatusOr<std::vector<ChildExit>> exits = RunChildren({}, 2, kLongTimeout, nullptr);
  ASSERT_TRUE(exits.ok());
  EXPECT_TRUE(exits->empty());
}

TEST(RunChildren, AddressSpaceRandomizationOffByDefault) {
  std::string out = TempPath("personality.out");
  ChildCommand command;
  command.argv = {"/bin/cat", "/proc/self/personality"};
  command.output_path = out;
  absl::StatusOr<std::vector<ChildExit>> exits = RunChildren({command}, 1, kLongTimeout, nullptr);
  ASSERT_TRUE(exits.ok()) << exits.status();
  unsigned long personality = std::strtoul(ReadFile(out).c_str(), nullptr, 16);
  constexpr unsigned long kAddrNoRandomize = 0x0040000;
  EXPECT_NE(personality & kAddrNoRandomize, 0u) << ReadFile(out);
}

TEST(SignalName, NamesAndNumbers) {
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGABRT), "SIGABRT");
}

}  // namespace
}  // namespace softrpma::rpma_sim
