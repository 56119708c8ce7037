// Tests of rpma_log_set_threshold(3), rpma_log_get_threshold(3), rpma_log_set_function(3) and the
// default logging function.

#include <string>

#include "api/internal/log.h"
#include "api/testing/log_capture.h"
#include "gtest/gtest.h"
#include "librpma.h"

namespace {

using softrpma::testing::ScopedLogCapture;

// Restores both thresholds to their defaults after each test.
class LogTest : public ::testing::Test {
 protected:
  void TearDown() override {
    rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_WARNING);
    rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_DISABLED);
    rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION);
  }
};

TEST_F(LogTest, Defaults_WarningAndDisabled) {
  rpma_log_level level = RPMA_LOG_LEVEL_DEBUG;
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &level), 0);
  EXPECT_EQ(level, RPMA_LOG_LEVEL_WARNING);
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &level), 0);
  EXPECT_EQ(level, RPMA_LOG_DISABLED);
}

TEST_F(LogTest, SetThreshold_EveryLevel_RoundTrips) {
  for (rpma_log_threshold threshold : {RPMA_LOG_THRESHOLD, RPMA_LOG_THRESHOLD_AUX}) {
    for (int l = RPMA_LOG_DISABLED; l <= RPMA_LOG_LEVEL_DEBUG; ++l) {
      const auto set = static_cast<rpma_log_level>(l);
      ASSERT_EQ(rpma_log_set_threshold(threshold, set), 0);
      rpma_log_level got = static_cast<rpma_log_level>(-7);
      ASSERT_EQ(rpma_log_get_threshold(threshold, &got), 0);
      EXPECT_EQ(got, set);
    }
  }
}

TEST_F(LogTest, SetThreshold_UnknownThreshold_ReturnsInval) {
  EXPECT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_MAX, RPMA_LOG_LEVEL_ERROR), RPMA_E_INVAL);
  EXPECT_EQ(rpma_log_set_threshold(static_cast<rpma_log_threshold>(-1), RPMA_LOG_LEVEL_ERROR),
            RPMA_E_INVAL);
}

TEST_F(LogTest, SetThreshold_UnknownLevel_ReturnsInval) {
  EXPECT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, static_cast<rpma_log_level>(6)),
            RPMA_E_INVAL);
  EXPECT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, static_cast<rpma_log_level>(-2)),
            RPMA_E_INVAL);
  rpma_log_level level;
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &level), 0);
  EXPECT_EQ(level, RPMA_LOG_LEVEL_WARNING);  // unchanged
}

TEST_F(LogTest, GetThreshold_UnknownThreshold_ReturnsInval) {
  rpma_log_level level;
  EXPECT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_MAX, &level), RPMA_E_INVAL);
}

TEST_F(LogTest, GetThreshold_NullLevel_ReturnsInval) {
  EXPECT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, nullptr), RPMA_E_INVAL);
}

TEST_F(LogTest, SetFunction_UserFunctionGetsMessagesAtOrBelowThreshold) {
  ScopedLogCapture capture;
  RPMA_LOG_ERROR("error %d", 1);
  RPMA_LOG_WARNING("warning %s", "two");
  RPMA_LOG_NOTICE("notice");  // above WARNING: filtered out
  ASSERT_EQ(capture.logs().size(), 2u) << capture.Dump();
  EXPECT_EQ(capture.logs()[0].level, RPMA_LOG_LEVEL_ERROR);
  EXPECT_EQ(capture.logs()[0].message, "error 1");
  EXPECT_EQ(capture.logs()[0].function, "TestBody");
  EXPECT_NE(capture.logs()[0].file.find("log_test.cc"), std::string::npos);
  EXPECT_GT(capture.logs()[0].line, 0);
  EXPECT_EQ(capture.logs()[1].message, "warning two");
}

TEST_F(LogTest, SetThreshold_Disabled_SuppressesEverything) {
  ScopedLogCapture capture;
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_DISABLED), 0);
  RPMA_LOG_FATAL("fatal");
  EXPECT_TRUE(capture.logs().empty()) << capture.Dump();
}

TEST_F(LogTest, SetThreshold_Debug_PassesDebug) {
  ScopedLogCapture capture;
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG), 0);
  RPMA_LOG_DEBUG("debug");
  ASSERT_EQ(capture.logs().size(), 1u);
  EXPECT_EQ(capture.logs()[0].level, RPMA_LOG_LEVEL_DEBUG);
}

TEST_F(LogTest, SetFunction_Default_WritesStderrOnlyAtOrBelowAux) {
  ASSERT_EQ(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
  ::testing::internal::CaptureStderr();
  RPMA_LOG_ERROR("hidden while AUX is disabled");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");

  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_ERROR), 0);
  ::testing::internal::CaptureStderr();
  RPMA_LOG_ERROR("shown %d", 42);
  RPMA_LOG_WARNING("above AUX");
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("log_test.cc:"), std::string::npos) << out;
  EXPECT_NE(out.find(" TestBody(): shown 42\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("above AUX"), std::string::npos) << out;
}

TEST_F(LogTest, SetFunction_DefaultAgain_StopsUserFunction) {
  {
    ScopedLogCapture capture;
  }  // restores the default function
  ScopedLogCapture capture;
  ASSERT_EQ(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
  ::testing::internal::CaptureStderr();
  RPMA_LOG_ERROR("to the default function");
  ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(capture.logs().empty());
}

}  // namespace
