// Conformance of the logging API (rpma_log_set_threshold(3), rpma_log_get_threshold(3),
// rpma_log_set_function(3)): one test per ERRORS line (rows of rpma-errors.tsv).
//
// RPMA_E_AGAIN ("a temporary error occurred, the retry may fix the problem") cannot happen in
// softrpma: the thresholds and the log function are atomics, set without a lock that could be
// busy. Those tests show it under the closest stress: threads setting them concurrently while
// another thread logs; no call returns anything but 0 and no message is lost.

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "librpma.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/conformance_test.h"

namespace softrpma::conformance {
namespace {

constexpr int kSetterThreads = 3;
constexpr int kIterations = 20000;
constexpr int kLoggingCalls = 2000;

std::atomic<int> g_messages_a{0};
std::atomic<int> g_messages_b{0};

// Log functions that count the ERROR messages they get.
void CountingLogA(rpma_log_level level, const char*, const int, const char*, const char*, ...) {
  if (level == RPMA_LOG_LEVEL_ERROR) g_messages_a.fetch_add(1, std::memory_order_relaxed);
}
void CountingLogB(rpma_log_level level, const char*, const int, const char*, const char*, ...) {
  if (level == RPMA_LOG_LEVEL_ERROR) g_messages_b.fetch_add(1, std::memory_order_relaxed);
}

class LogTest : public ConformanceTest {
 protected:
  void SetUp() override {
    ConformanceTest::SetUp();
    ASSERT_RPMA(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &saved_threshold_), 0);
    ASSERT_RPMA(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &saved_aux_), 0);
    g_messages_a = 0;
    g_messages_b = 0;
  }
  void TearDown() override {
    EXPECT_RPMA(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
    EXPECT_RPMA(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, saved_threshold_), 0);
    EXPECT_RPMA(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, saved_aux_), 0);
    ConformanceTest::TearDown();
  }

  // Makes librpma log one ERROR message: rpma_mr_reg with usage 0 (returns RPMA_E_INVAL).
  static int LogOneError(rpma_peer* peer) {
    static char buf[8];
    rpma_mr_local* mr = nullptr;
    return rpma_mr_reg(peer, buf, sizeof(buf), /*usage=*/0, &mr);
  }

  rpma_log_level saved_threshold_ = RPMA_LOG_LEVEL_WARNING;
  rpma_log_level saved_aux_ = RPMA_LOG_DISABLED;
};

RPMA_TEST_F(LogTest, LogSetThreshold_UnknownThreshold_ReturnsInval,
            RPMA_ROW("rpma_log_set_threshold", "RPMA_E_INVAL",
                     "threshold is not RPMA_LOG_THRESHOLD nor RPMA_LOG_THRESHOLD_AUX")) {
  EXPECT_RPMA(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_MAX, RPMA_LOG_LEVEL_ERROR), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_log_set_threshold(static_cast<rpma_log_threshold>(-1), RPMA_LOG_LEVEL_ERROR),
              RPMA_E_INVAL);
  rpma_log_level level = RPMA_LOG_DISABLED;
  ASSERT_RPMA(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &level), 0);
  EXPECT_EQ(level, saved_threshold_);
}

RPMA_TEST_F(LogTest, LogSetThreshold_UnknownLevel_ReturnsInval,
            RPMA_ROW("rpma_log_set_threshold", "RPMA_E_INVAL",
                     "level is not a value defined by enum rpma_log_level type")) {
  EXPECT_RPMA(rpma_log_set_threshold(RPMA_LOG_THRESHOLD,
                                     static_cast<rpma_log_level>(RPMA_LOG_LEVEL_DEBUG + 1)),
              RPMA_E_INVAL);
  EXPECT_RPMA(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX,
                                     static_cast<rpma_log_level>(RPMA_LOG_DISABLED - 1)),
              RPMA_E_INVAL);
  rpma_log_level level = RPMA_LOG_DISABLED;
  ASSERT_RPMA(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &level), 0);
  EXPECT_EQ(level, saved_threshold_);
  ASSERT_RPMA(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &level), 0);
  EXPECT_EQ(level, saved_aux_);
}

RPMA_TEST_F(LogTest, LogSetThreshold_ConcurrentSettersAndLogging_NeverReturnsAgain,
            RPMA_ROW_NOT_IN_DESIGN(
                "rpma_log_set_threshold", "RPMA_E_AGAIN",
                "a temporary error occurred, the retry may fix the problem",
                "the thresholds are atomics, set without a lock: no temporary failure exists; "
                "concurrent setters, getters and logging never see one")) {
  ibv_context* dev = nullptr;
  ASSERT_RPMA(GetLocalDevice(&dev), 0);
  rpma_peer* peer = nullptr;
  ASSERT_RPMA(rpma_peer_new(dev, &peer), 0);
  ASSERT_RPMA(rpma_log_set_function(&CountingLogA), 0);

  std::atomic<int> not_zero{0};
  std::atomic<int> again{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kSetterThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        const auto threshold = (i + t) % 2 == 0 ? RPMA_LOG_THRESHOLD : RPMA_LOG_THRESHOLD_AUX;
        // WARNING..DEBUG for the main threshold, so that ERROR messages always pass it.
        const auto level = static_cast<rpma_log_level>(threshold == RPMA_LOG_THRESHOLD
                                                           ? RPMA_LOG_LEVEL_WARNING + i % 4
                                                           : RPMA_LOG_DISABLED + i % 3);
        const int ret = rpma_log_set_threshold(threshold, level);
        rpma_log_level got = RPMA_LOG_DISABLED;
        const int get_ret = rpma_log_get_threshold(threshold, &got);
        if (ret != 0 || get_ret != 0) not_zero.fetch_add(1);
        if (ret == RPMA_E_AGAIN || get_ret == RPMA_E_AGAIN) again.fetch_add(1);
      }
    });
  }
  int logging_inval = 0;
  for (int i = 0; i < kLoggingCalls; ++i) logging_inval += LogOneError(peer) == RPMA_E_INVAL;
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(again.load(), 0);
  EXPECT_EQ(not_zero.load(), 0);
  EXPECT_EQ(logging_inval, kLoggingCalls);
  // Every message got through: the logging path never saw a half-set threshold.
  EXPECT_EQ(g_messages_a.load(), kLoggingCalls);
  EXPECT_RPMA(rpma_peer_delete(&peer), 0);
}

RPMA_TEST_F(LogTest, LogGetThreshold_UnknownThreshold_ReturnsInval,
            RPMA_ROW("rpma_log_get_threshold", "RPMA_E_INVAL",
                     "threshold is not RPMA_LOG_THRESHOLD nor RPMA_LOG_THRESHOLD_AUX")) {
  rpma_log_level level = RPMA_LOG_LEVEL_INFO;
  EXPECT_RPMA(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_MAX, &level), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_log_get_threshold(static_cast<rpma_log_threshold>(-1), &level), RPMA_E_INVAL);
  EXPECT_EQ(level, RPMA_LOG_LEVEL_INFO);
}

RPMA_TEST_F(LogTest, LogGetThreshold_LevelNull_ReturnsInval,
            RPMA_ROW("rpma_log_get_threshold", "RPMA_E_INVAL", "*level is NULL")) {
  EXPECT_RPMA(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(LogTest, LogSetFunction_ConcurrentSettersAndLogging_NeverReturnsAgain,
            RPMA_ROW_NOT_IN_DESIGN(
                "rpma_log_set_function", "RPMA_E_AGAIN",
                "a temporary error occurred, the retry may fix the problem",
                "the log function is an atomic pointer, set without a lock: no temporary "
                "failure exists; concurrent setters and logging never see one")) {
  ibv_context* dev = nullptr;
  ASSERT_RPMA(GetLocalDevice(&dev), 0);
  rpma_peer* peer = nullptr;
  ASSERT_RPMA(rpma_peer_new(dev, &peer), 0);
  ASSERT_RPMA(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_WARNING), 0);
  ASSERT_RPMA(rpma_log_set_function(&CountingLogA), 0);

  std::atomic<int> not_zero{0};
  std::atomic<int> again{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kSetterThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        const int ret = rpma_log_set_function((i + t) % 2 == 0 ? &CountingLogA : &CountingLogB);
        if (ret != 0) not_zero.fetch_add(1);
        if (ret == RPMA_E_AGAIN) again.fetch_add(1);
      }
    });
  }
  int logging_inval = 0;
  for (int i = 0; i < kLoggingCalls; ++i) logging_inval += LogOneError(peer) == RPMA_E_INVAL;
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(again.load(), 0);
  EXPECT_EQ(not_zero.load(), 0);
  EXPECT_EQ(logging_inval, kLoggingCalls);
  // Each message went to exactly one of the two functions being swapped in.
  EXPECT_EQ(g_messages_a.load() + g_messages_b.load(), kLoggingCalls);
  EXPECT_RPMA(rpma_peer_delete(&peer), 0);
}

}  // namespace
}  // namespace softrpma::conformance
