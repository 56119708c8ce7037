// rpma_mr_advise(3) end to end on the simulated NIC, with on-demand paging switched off (the
// default: "not supported by the system") and on (sim::SetOdpSupported), and
// rpma_utils_ibv_context_is_odp_capable(3) agreeing with the switch. Simulator-only: the switch
// is the simulator's.

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/ops/ops_pair.h"

namespace softrpma::ops_testing {
namespace {

constexpr size_t kSize = 4096;

// A peer on the device of TestAddress() with two regions: one the NIC may write (READ_DST) and
// one it may only read (READ_SRC | SEND). ODP is off again when the test ends.
class AdviseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!SimulatedNicSelected()) GTEST_SKIP() << "needs the simulated NIC's ODP switch";
    sim::SetOdpSupported(false);
    ASSERT_EQ(rpma_utils_get_ibv_context(TestAddress(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev_), 0);
    ASSERT_EQ(rpma_peer_new(dev_, &peer_), 0);
    ASSERT_EQ(rpma_mr_reg(peer_, writable_buf_.data(), kSize, RPMA_MR_USAGE_READ_DST, &writable_),
              0);
    ASSERT_EQ(rpma_mr_reg(peer_, read_only_buf_.data(), kSize,
                          RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_SEND, &read_only_),
              0);
  }
  void TearDown() override {
    sim::SetOdpSupported(false);
    if (writable_ != nullptr) {
      EXPECT_EQ(rpma_mr_dereg(&writable_), 0);
    }
    if (read_only_ != nullptr) {
      EXPECT_EQ(rpma_mr_dereg(&read_only_), 0);
    }
    if (peer_ != nullptr) {
      EXPECT_EQ(rpma_peer_delete(&peer_), 0);
    }
  }

  int IsOdpCapable() {
    int capable = -1;
    EXPECT_EQ(rpma_utils_ibv_context_is_odp_capable(dev_, &capable), 0);
    return capable;
  }

  ibv_context* dev_ = nullptr;
  rpma_peer* peer_ = nullptr;
  std::vector<char> writable_buf_ = std::vector<char>(kSize);
  std::vector<char> read_only_buf_ = std::vector<char>(kSize);
  rpma_mr_local* writable_ = nullptr;
  rpma_mr_local* read_only_ = nullptr;
};

TEST_F(AdviseTest, WithoutOdp_ValidAdviceReturnsNosupp_AndTheDeviceIsNotOdpCapable) {
  EXPECT_EQ(IsOdpCapable(), 0);
  EXPECT_EQ(rpma_mr_advise(writable_, 0, kSize, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), RPMA_E_NOSUPP);
  EXPECT_EQ(rpma_mr_advise(writable_, 64, 128, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                           IBV_ADVISE_MR_FLAG_FLUSH),
            RPMA_E_NOSUPP);
  EXPECT_EQ(rpma_mr_advise(read_only_, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0),
            RPMA_E_NOSUPP);
}

TEST_F(AdviseTest, WithOdp_ValidAdviceSucceeds_AndTheDeviceIsOdpCapable) {
  sim::SetOdpSupported(true);
  EXPECT_EQ(IsOdpCapable(), 1);
  EXPECT_EQ(rpma_mr_advise(writable_, 0, kSize, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), 0);
  EXPECT_EQ(rpma_mr_advise(writable_, 64, 128, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                           IBV_ADVISE_MR_FLAG_FLUSH),
            0);
  EXPECT_EQ(rpma_mr_advise(read_only_, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0), 0);
  EXPECT_EQ(rpma_mr_advise(read_only_, kSize, 0, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), 0);

  sim::SetOdpSupported(false);  // and back
  EXPECT_EQ(IsOdpCapable(), 0);
  EXPECT_EQ(rpma_mr_advise(writable_, 0, kSize, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), RPMA_E_NOSUPP);
}

// The argument errors are the caller's whatever the system supports.
TEST_F(AdviseTest, InvalidArguments_ReturnInval_WithAndWithoutOdp) {
  for (bool odp : {false, true}) {
    sim::SetOdpSupported(odp);
    EXPECT_EQ(rpma_mr_advise(writable_, kSize - 8, 16, IBV_ADVISE_MR_ADVICE_PREFETCH, 0),
              RPMA_E_INVAL)
        << "out of bounds, odp " << odp;
    EXPECT_EQ(rpma_mr_advise(read_only_, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0),
              RPMA_E_INVAL)
        << "read-only usage, odp " << odp;
    EXPECT_EQ(rpma_mr_advise(writable_, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80), RPMA_E_INVAL)
        << "flags, odp " << odp;
  }
}

}  // namespace
}  // namespace softrpma::ops_testing
