#include "tools/rpma_sim/process_ends.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::HasSubstr;

TEST(ParseProcessEnd, Signal_WithAbortMessage) {
  absl::StatusOr<ProcessEnd> end = ParseProcessEnd(
      "softrpma-sim-end=1\npid=42\nprog=server\ntime_ns=7\nsignal=SIGABRT\n"
      "message=free(): double free detected in tcache 2\n");
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->pid, 42);
  EXPECT_EQ(end->prog, "server");
  EXPECT_EQ(end->time_ns, 7u);
  EXPECT_EQ(end->signal, "SIGABRT");
  EXPECT_EQ(end->message, "free(): double free detected in tcache 2");
  EXPECT_FALSE(end->exit_code.has_value());
  EXPECT_TRUE(end->Crashed());
}

TEST(ParseProcessEnd, Exit_NotCrashed_UnknownKeyIgnored) {
  absl::StatusOr<ProcessEnd> end =
      ParseProcessEnd("softrpma-sim-end=1\npid=3\nprog=client\nexit=1\nfuture=yes\n");
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->exit_code, 1);
  EXPECT_FALSE(end->Crashed());
}

TEST(ParseProcessEnd, Asan_OnlyTheValueOne) {
  // A record is another process's bytes: only "asan=1" says the process has ASan.
  absl::StatusOr<ProcessEnd> with =
      ParseProcessEnd("softrpma-sim-end=1\npid=3\nasan=1\nexit=0\n");
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_TRUE(with->asan);
  for (const char* value : {"0", "yes", "", "11"}) {
    absl::StatusOr<ProcessEnd> end = ParseProcessEnd(
        absl::StrCat("softrpma-sim-end=1\npid=3\nasan=", value, "\nexit=0\n"));
    ASSERT_TRUE(end.ok()) << end.status();
    EXPECT_FALSE(end->asan) << value;
  }
  absl::StatusOr<ProcessEnd> without = ParseProcessEnd("softrpma-sim-end=1\npid=3\nexit=0\n");
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(without->asan);
}

TEST(ParseProcessEnd, Malformed_SaysWhy) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"", "empty"},
      {"pid=1\nexit=0\n", "line 1"},
      {"softrpma-sim-end=2\npid=1\nexit=0\n", "line 1"},
      {"softrpma-sim-end=1\nexit=0\n", "no pid"},
      {"softrpma-sim-end=1\npid=x\nexit=0\n", "line 2: pid=x is not a number"},
      {"softrpma-sim-end=1\npid=1\n", "no end"},
      {"softrpma-sim-end=1\npid=1\ngarbage\n", "line 3: \"garbage\" is not key=value"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ProcessEnd> end = ParseProcessEnd(c.text);
    ASSERT_FALSE(end.ok()) << c.text;
    EXPECT_THAT(std::string(end.status().message()), HasSubstr(c.error)) << c.text;
  }
}

ProcessEnd Crash(int pid, const char* prog, const char* signal, const char* message = "") {
  ProcessEnd end;
  end.pid = pid;
  end.prog = prog;
  end.signal = signal;
  end.message = message;
  return end;
}

TEST(WithProcessEnds, ChildAborted_RunCrashedNamingIt) {
  ProcessEnd ok;
  ok.pid = 10;
  ok.prog = "client";
  ok.exit_code = 1;
  RunVerdict v = WithProcessEnds({RunClass::kNonzero, "exit 1"},
                                 {ok, Crash(11, "server", "SIGABRT", "free(): double free")}, 9,
                                 "");
  EXPECT_EQ(v.run_class, RunClass::kCrashed);
  EXPECT_EQ(v.detail, "server: SIGABRT: free(): double free");
}

TEST(WithProcessEnds, TopProcess_NotNamed) {
  RunVerdict v =
      WithProcessEnds({RunClass::kCrashed, "SIGSEGV"}, {Crash(9, "app", "SIGSEGV")}, 9, "");
  EXPECT_EQ(v.run_class, RunClass::kCrashed);
  EXPECT_EQ(v.detail, "SIGSEGV");
}

TEST(WithProcessEnds, SanitizerReport_Headline) {
  ProcessEnd end;
  end.pid = 5;
  end.prog = "client";
  end.signal = "SIGABRT";
  end.sanitizer = "==5==ERROR: AddressSanitizer: heap-use-after-free on address 0x1 at pc 0x2";
  RunVerdict v = WithProcessEnds({RunClass::kNonzero, "exit 1"}, {end}, 1, "");
  EXPECT_EQ(v.detail, "client: AddressSanitizer: heap-use-after-free");
}

TEST(WithProcessEnds, CrashThenHang_Crashed) {
  RunVerdict v = WithProcessEnds({RunClass::kHung, "timed out after 10s"},
                                 {Crash(4, "server", "SIGSEGV")}, 1, "");
  EXPECT_EQ(v.run_class, RunClass::kCrashed);
  EXPECT_EQ(v.detail, "server: SIGSEGV; then the run hung (timed out after 10s)");
}

TEST(WithProcessEnds, NoCrash_VerdictUnchanged) {
  ProcessEnd ok;
  ok.pid = 4;
  ok.exit_code = 0;
  RunVerdict v = WithProcessEnds({RunClass::kNonzero, "exit 1"}, {ok}, 1, "");
  EXPECT_EQ(v.run_class, RunClass::kNonzero);
  EXPECT_EQ(v.detail, "exit 1");
}

TEST(WithProcessEnds, LeakSanitizersAbort_IsALeakNotACrash) {
  // ASAN_OPTIONS=abort_on_error=1: LeakSanitizer aborts the process it found leaking.
  const std::string output = "==7==ERROR: LeakSanitizer: detected memory leaks\n...\n";
  RunVerdict v = WithProcessEnds({RunClass::kLeaked, "LeakSanitizer: detected memory leaks"},
                                 {Crash(7, "client", "SIGABRT")}, 1, output);
  EXPECT_EQ(v.run_class, RunClass::kLeaked);
  EXPECT_EQ(v.detail, "LeakSanitizer: detected memory leaks");
}

TEST(WithProcessEnds, OneLeakReport_ExcusesOneBareAbortOnly) {
  const std::string output = "==7==ERROR: LeakSanitizer: detected memory leaks\n";
  RunVerdict v = WithProcessEnds({RunClass::kLeaked, "LeakSanitizer: detected memory leaks"},
                                 {Crash(7, "client", "SIGABRT"), Crash(8, "server", "SIGABRT"),
                                  Crash(9, "peer", "SIGABRT", "free(): invalid pointer")},
                                 1, output);
  EXPECT_EQ(v.run_class, RunClass::kCrashed);
  EXPECT_EQ(v.detail, "server: SIGABRT; peer: SIGABRT: free(): invalid pointer");
}

TEST(TakeProcessEnds, ReadsInTimeOrder_ReportsBadOnes_RemovesDir) {
  const std::string dir = ::testing::TempDir() + "/ends." + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/end.2.txt") << "softrpma-sim-end=1\npid=2\nprog=b\ntime_ns=20\nexit=0\n";
  std::ofstream(dir + "/end.1.txt")
      << "softrpma-sim-end=1\npid=1\nprog=a\ntime_ns=30\nsignal=SIGSEGV\n";
  std::ofstream(dir + "/end.3.txt") << "nonsense\n";
  std::ofstream(dir + "/other.txt") << "not a record\n";
  std::vector<std::string> errors;
  std::vector<ProcessEnd> ends = TakeProcessEnds(dir, &errors);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0].prog, "b");
  EXPECT_EQ(ends[1].prog, "a");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("end.3.txt: line 1"));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace softrpma::rpma_sim
