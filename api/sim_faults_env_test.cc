// sim_faults_env_test: a malformed RPMA_SIM_FAULTS makes the first rpma_utils_get_ibv_context()
// fail with RPMA_E_INVAL and an ERROR log line that names the variable; once it is fixed, the
// next call succeeds (the failure is not cached). Its own binary: the sim reads the variable
// only until it has started.

#include <cstdlib>
#include <string>

#include "api/testing/log_capture.h"
#include "gtest/gtest.h"
#include "librpma.h"

namespace {

using softrpma::testing::ScopedLogCapture;

TEST(SimFaultsEnvTest, MalformedSpec_ReturnsInvalThenRecovers) {
  ASSERT_EQ(setenv("RPMA_BACKEND", "sim", 1), 0);
  ASSERT_EQ(setenv("RPMA_SIM_FAULTS", "no_such_call:fail=EIO:!!", 1), 0);
  ibv_context* ctx = nullptr;
  {
    ScopedLogCapture capture;
    EXPECT_EQ(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
              RPMA_E_INVAL);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "RPMA_SIM_FAULTS")) << capture.Dump();
  }
  ASSERT_EQ(unsetenv("RPMA_SIM_FAULTS"), 0);
  ASSERT_EQ(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx), 0);
  EXPECT_NE(ctx, nullptr);
}

}  // namespace
