// RPMA_SIM_FAULTS, RPMA_SIM_SCENARIO, RPMA_SIM_SEED: read once, when GetSimBackend() first
// succeeds; a malformed value is an error of GetSimBackend() (nothing cached, so a fixed value
// is read by the next call). Its own binary: the backend must not have started before this test
// runs. (RPMA_SIM_TRACE / RPMA_SIM_STATS: determinism_test.sh, which runs whole programs.)

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/sim_backend.h"
#include "simverbs/sim/sim_control.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

TEST(EnvTest, MalformedSpecFailsStart_ValidSpecInstalledOnce) {
  // Upstream librpma's fault injection is refused, never silently ignored.
  ASSERT_EQ(setenv("RPMA_FAULT_INJECTION", "3", 1), 0);
  absl::StatusOr<Backend*> upstream = GetSimBackend();
  ASSERT_FALSE(upstream.ok());
  EXPECT_EQ(upstream.status().message(),
            "RPMA_FAULT_INJECTION: \"3\" asks for upstream librpma's debug-build fault "
            "injection, which softrpma does not have; unset it and name the fault in "
            "RPMA_SIM_FAULTS instead (docs/FAULTS.md), e.g. "
            "RPMA_SIM_FAULTS='malloc:fail=ENOMEM:nth=3', or sweep every fault point with "
            "`rpma-sim sweep`");
  ASSERT_EQ(unsetenv("RPMA_FAULT_INJECTION"), 0);
  ASSERT_EQ(setenv("RPMA_SIM_SEED", "0x1g", 1), 0);
  absl::StatusOr<Backend*> bad_seed = GetSimBackend();
  ASSERT_FALSE(bad_seed.ok());
  EXPECT_EQ(bad_seed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_seed.status().message(),
            "RPMA_SIM_SEED: bad seed \"0x1g\": expected a decimal or 0x-hex 64-bit number");
  ASSERT_EQ(setenv("RPMA_SIM_SEED", "0x10", 1), 0);
  const std::string scenario = std::string(std::getenv("TEST_TMPDIR")) + "/env.scenario";
  std::ofstream(scenario) << "seed 99  # RPMA_SIM_SEED wins\nrdma_listen:fail=EIO:nth=7\n";
  ASSERT_EQ(setenv("RPMA_SIM_SCENARIO", scenario.c_str(), 1), 0);
  ASSERT_EQ(setenv("RPMA_SIM_FAULTS", "ibv_alloc_pd:fail=EBADNAME", 1), 0);

  absl::StatusOr<Backend*> failed = GetSimBackend();

  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(failed.status().message(),
            "RPMA_SIM_FAULTS: fault spec rule 1, column 19: unknown errno name \"EBADNAME\" in "
            "\"fail=EBADNAME\"");

  ASSERT_EQ(setenv("RPMA_SIM_FAULTS", " ibv_alloc_pd : fail=EIO : nth=1 ", 1), 0);
  absl::StatusOr<Backend*> started = GetSimBackend();
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(CurrentFaultPlan(), "ibv_alloc_pd:fail=EIO:nth=1; rdma_listen:fail=EIO:nth=7");
  EXPECT_EQ(SimSeed(), 16u);
  ibv_context* ctx = SimContext();
  ibv_pd* pd = nullptr;
  EXPECT_EQ((*started)->IbvAllocPd(ctx, &pd), EIO);
  ASSERT_EQ((*started)->IbvAllocPd(ctx, &pd), 0);
  EXPECT_EQ((*started)->IbvDeallocPd(pd), 0);

  // Read once: a later value is not looked at.
  ASSERT_EQ(setenv("RPMA_SIM_FAULTS", "nonsense", 1), 0);
  absl::StatusOr<Backend*> again = GetSimBackend();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *started);
  EXPECT_EQ(CurrentFaultPlan(), "ibv_alloc_pd:fail=EIO:nth=1; rdma_listen:fail=EIO:nth=7");
  ClearFaultPlan();
}

}  // namespace
}  // namespace softrpma::sim::testing
