#include "tools/rpma_sim/classify.h"

#include <signal.h>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

const absl::Duration kTimeout = absl::Seconds(10);

// What the leak checkers print.
constexpr char kLeakSanitizerReport[] =
    "\n=================================================================\n"
    "==99==ERROR: LeakSanitizer: detected memory leaks\n\nDirect leak of 64 byte(s)\n";
constexpr char kValgrindDefinitelyLost[] =
    "==5== 64 bytes in 1 blocks are definitely lost in loss record 1 of 1\n";
constexpr char kValgrindInvalidRead[] =
    "==5== Invalid read of size 4\n==5==    at 0x1: main (x.c:3)\n";

ChildExit Exited(int code) {
  ChildExit exit;
  exit.exit_code = code;
  return exit;
}

ChildExit Signaled(int signal) {
  ChildExit exit;
  exit.signal = signal;
  return exit;
}

TEST(Classify, ExitZero_Clean) {
  RunVerdict v = Classify(Exited(0), "all fine\n", LeakChecker::kNone, kTimeout);
  EXPECT_EQ(v.run_class, RunClass::kClean);
  EXPECT_EQ(v.detail, "exit 0");
}

TEST(Classify, ExitNonzero_Nonzero) {
  RunVerdict v = Classify(Exited(3), "rpma_peer_new: RPMA_E_NOMEM\n", LeakChecker::kNone, kTimeout);
  EXPECT_EQ(v.run_class, RunClass::kNonzero);
  EXPECT_EQ(v.detail, "exit 3");
}

TEST(Classify, Signal_CrashedWithItsName) {
  RunVerdict v = Classify(Signaled(SIGSEGV), "", LeakChecker::kNone, kTimeout);
  EXPECT_EQ(v.run_class, RunClass::kCrashed);
  EXPECT_EQ(v.detail, "SIGSEGV");
}

TEST(Classify, TimedOut_HungWhateverElse) {
  ChildExit exit = Signaled(SIGKILL);
  exit.timed_out = true;
  RunVerdict v =
      Classify(exit, "==1==ERROR: AddressSanitizer: SEGV", LeakChecker::kNone, absl::Seconds(2));
  EXPECT_EQ(v.run_class, RunClass::kHung);
  EXPECT_EQ(v.detail, "timed out after 2s");
}

TEST(Classify, AsanReportWithExitOne_Crashed) {
  RunVerdict v = Classify(Exited(1),
                          "hello\n==4242==ERROR: AddressSanitizer: heap-use-after-free on "
                          "address 0x602000000010 at pc 0x1\nREAD of size 4\n",
                          LeakChecker::kNone, kTimeout);
  EXPECT_EQ(v.run_class, RunClass::kCrashed);
  EXPECT_EQ(v.detail, "AddressSanitizer: heap-use-after-free");
}

TEST(Classify, AsanSegvAborted_CrashedNamingAsan) {
  RunVerdict v = Classify(Signaled(SIGABRT),
                          "==7==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000 "
                          "(pc 0x1 bp 0x2 sp 0x3 T0)\n",
                          LeakChecker::kNone, kTimeout);
  EXPECT_EQ(v.run_class, RunClass::kCrashed);
  EXPECT_EQ(v.detail, "AddressSanitizer: SEGV");
}

TEST(Classify, ThreadSanitizerReports_Crashed) {
  RunVerdict segv = Classify(Exited(66),
                             "==1==ERROR: ThreadSanitizer: SEGV on unknown address 0x000000000000 "
                             "(pc 0x1 bp 0x2 sp 0x3 T1)\n",
                             LeakChecker::kNone, kTimeout);
  EXPECT_EQ(segv.run_class, RunClass::kCrashed);
  EXPECT_EQ(segv.detail, "ThreadSanitizer: SEGV");
  RunVerdict race = Classify(Exited(66),
                             "==================\nWARNING: ThreadSanitizer: data race "
                             "(pid=7)\n  Write of size 4\n",
                             LeakChecker::kNone, kTimeout);
  EXPECT_EQ(race.run_class, RunClass::kCrashed);
  EXPECT_EQ(race.detail, "ThreadSanitizer: data race");
}

TEST(Classify, UbsanRuntimeError_Crashed) {
  RunVerdict v = Classify(Exited(1), "x.cc:12:3: runtime error: signed integer overflow\n",
                          LeakChecker::kNone, kTimeout);
  EXPECT_EQ(v.run_class, RunClass::kCrashed);
  EXPECT_EQ(v.detail, "UndefinedBehaviorSanitizer: runtime error: signed integer overflow");
}

TEST(Classify, LeakSanitizerReport_LeakedEvenWhenItAborted) {
  RunVerdict exited = Classify(Exited(23), kLeakSanitizerReport, LeakChecker::kAsan, kTimeout);
  EXPECT_EQ(exited.run_class, RunClass::kLeaked);
  EXPECT_EQ(exited.detail, "LeakSanitizer: detected memory leaks");
  RunVerdict aborted =
      Classify(Signaled(SIGABRT), kLeakSanitizerReport, LeakChecker::kAsan, kTimeout);
  EXPECT_EQ(aborted.run_class, RunClass::kLeaked);
}

TEST(Classify, ValgrindDefinitelyLost_Leaked) {
  RunVerdict v = Classify(Exited(kValgrindErrorExitCode), kValgrindDefinitelyLost,
                          LeakChecker::kValgrind, kTimeout);
  EXPECT_EQ(v.run_class, RunClass::kLeaked);
}

TEST(Classify, ValgrindErrorExit_CrashedWithTheFirstError) {
  RunVerdict v = Classify(Exited(kValgrindErrorExitCode), kValgrindInvalidRead,
                          LeakChecker::kValgrind, kTimeout);
  EXPECT_EQ(v.run_class, RunClass::kCrashed);
  EXPECT_EQ(v.detail, "valgrind: Invalid read of size 4");
}

TEST(Classify, ValgrindExitCodeWithoutValgrind_JustNonzero) {
  RunVerdict v = Classify(Exited(kValgrindErrorExitCode), "", LeakChecker::kNone, kTimeout);
  EXPECT_EQ(v.run_class, RunClass::kNonzero);
}

TEST(Classify, KeptObjects_KeptWhateverTheExitStatus) {
  RunVerdict reported = Classify(Exited(1), "rpma_mr_dereg: RPMA_E_PROVIDER\n",
                                 LeakChecker::kAsan, kTimeout, /*kept_objects=*/2);
  EXPECT_EQ(reported.run_class, RunClass::kKept);
  EXPECT_EQ(reported.detail, "exit 1; 2 objects kept by the NIC after a failed destroy");
  RunVerdict ignored = Classify(Exited(0), "", LeakChecker::kNone, kTimeout, 1);
  EXPECT_EQ(ignored.run_class, RunClass::kKept);
  EXPECT_EQ(ignored.detail, "exit 0; 1 object kept by the NIC after a failed destroy");
}

TEST(Classify, KeptObjectsAndALeakReport_Leaked) {
  EXPECT_EQ(Classify(Exited(1), kLeakSanitizerReport, LeakChecker::kAsan, kTimeout, 1).run_class,
            RunClass::kLeaked);
  EXPECT_EQ(Classify(Exited(kValgrindErrorExitCode), kValgrindDefinitelyLost,
                     LeakChecker::kValgrind, kTimeout, 1)
                .run_class,
            RunClass::kLeaked);
}

TEST(Classify, KeptObjectsAndACrashOrHang_CrashedOrHung) {
  EXPECT_EQ(Classify(Signaled(SIGSEGV), "", LeakChecker::kNone, kTimeout, 1).run_class,
            RunClass::kCrashed);
  ChildExit timed_out = Signaled(SIGKILL);
  timed_out.timed_out = true;
  EXPECT_EQ(Classify(timed_out, "", LeakChecker::kNone, kTimeout, 1).run_class, RunClass::kHung);
  EXPECT_EQ(Classify(Exited(kValgrindErrorExitCode), kValgrindInvalidRead,
                     LeakChecker::kValgrind, kTimeout, 1)
                .run_class,
            RunClass::kCrashed);
}

TEST(RunClass, NamesAndFailures) {
  EXPECT_STREQ(RunClassName(RunClass::kClean), "clean");
  EXPECT_STREQ(RunClassName(RunClass::kNonzero), "nonzero");
  EXPECT_STREQ(RunClassName(RunClass::kCrashed), "crashed");
  EXPECT_STREQ(RunClassName(RunClass::kHung), "hung");
  EXPECT_STREQ(RunClassName(RunClass::kLeaked), "leaked");
  EXPECT_STREQ(RunClassName(RunClass::kKept), "kept");
  EXPECT_FALSE(IsFailure(RunClass::kClean));
  EXPECT_FALSE(IsFailure(RunClass::kNonzero));
  EXPECT_TRUE(IsFailure(RunClass::kCrashed));
  EXPECT_TRUE(IsFailure(RunClass::kHung));
  EXPECT_TRUE(IsFailure(RunClass::kLeaked));
  EXPECT_FALSE(IsFailure(RunClass::kKept));
}

TEST(DetectLeakChecker, UnreadableProgram_NotFound) {
  absl::StatusOr<LeakChecker> checker = DetectLeakChecker("/nonexistent/program", "");
  EXPECT_EQ(checker.status().code(), absl::StatusCode::kNotFound);
}

TEST(DetectLeakChecker, EndlessFile_NotFoundAtOnce) {
  // (It was read whole: /dev/zero for ever.)
  absl::StatusOr<LeakChecker> checker = DetectLeakChecker("/dev/zero", "/usr/bin/valgrind");
  EXPECT_EQ(checker.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(checker.status().message(), "cannot read /dev/zero as a program file");
}

TEST(DetectLeakChecker, PlainProgramWithoutValgrind_FailedPrecondition) {
  // /bin/sh is not built with ASan.
  absl::StatusOr<LeakChecker> checker = DetectLeakChecker("/bin/sh", "");
  EXPECT_EQ(checker.status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<LeakChecker> with_valgrind = DetectLeakChecker("/bin/sh", "/usr/bin/valgrind");
  ASSERT_TRUE(with_valgrind.ok());
  EXPECT_EQ(*with_valgrind, LeakChecker::kValgrind);
}

}  // namespace
}  // namespace softrpma::rpma_sim
