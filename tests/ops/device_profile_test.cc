// The device profiles (docs/DEVICES.md) as a librpma program sees them, end to end through the
// public API on the simulated NIC: built twice, with RPMA_SIM_DEVICE=siw (iWARP) and with the
// default (mlx5, InfiniBand/RoCE). On iWARP, librpma registers READ_DST regions with remote
// write access (the RDMA READ response is placed like a write), so the other side can write
// there, and an rpma_read lands in it; immediate data does not exist on siw, so
// rpma_write_with_imm and rpma_send_with_imm fail as siw fails the post (RPMA_E_PROVIDER); a
// disconnect flushes the other side's receives. On mlx5 both work as before, a READ_DST region
// refuses remote writes and the other side's receives stay posted.
// Only the simulated NIC's profiles are tested here (a real device is what it is): with
// RPMA_BACKEND=sim, or with RPMA_BACKEND=ibverbs on the verbs shim (device_profile_*_on_shim).

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "librpma.h"
#include "tests/ops/ops_pair.h"

namespace softrpma::ops_testing {
namespace {

constexpr int kAlways = RPMA_F_COMPLETION_ALWAYS;
// The verbs shim's device (simverbs/shim/shim.h): the simulated NIC behind libibverbs.
constexpr char kShimDevice[] = "softrpma_sim0";

class DeviceProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ibv_context* context = nullptr;
    ASSERT_EQ(rpma_utils_get_ibv_context(TestAddress(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &context),
              0);
    // The simulated NIC is also the device the ibverbs backend finds on the verbs shim
    // (RPMA_SIM_DEVICE picks its profile there too); a real device is what it is.
    if (!SimulatedNicSelected() && std::strcmp(context->device->name, kShimDevice) != 0) {
      GTEST_SKIP() << "tests the simulated NIC's device profiles, not " << context->device->name;
    }
    iwarp_ = context->device->transport_type == IBV_TRANSPORT_IWARP;
    OpsPairOptions options;
    options.server_usage |= RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_SEND;
    absl::StatusOr<std::unique_ptr<OpsPair>> pair = OpsPair::Create(options);
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = std::move(*pair);
  }
  void TearDown() override {
    if (pair_ != nullptr) {
      EXPECT_TRUE(pair_->Close().ok());
    }
  }

  // The client's region (usage WRITE_SRC | READ_DST | SEND | RECV) as the server would see it.
  rpma_mr_remote* ClientRegionForTheServer() {
    size_t size = 0;
    EXPECT_EQ(rpma_mr_get_descriptor_size(pair_->client_mr(), &size), 0);
    descriptor_.assign(size, 0);
    EXPECT_EQ(rpma_mr_get_descriptor(pair_->client_mr(), descriptor_.data()), 0);
    rpma_mr_remote* remote = nullptr;
    EXPECT_EQ(rpma_mr_remote_from_descriptor(descriptor_.data(), size, &remote), 0);
    return remote;
  }

  bool iwarp_ = false;
  std::unique_ptr<OpsPair> pair_;
  std::vector<char> descriptor_;
};

TEST_F(DeviceProfileTest, Transport_IsTheProfilesAsBuilt) {
  EXPECT_EQ(iwarp_, std::string(DEVICE_PROFILE) == "siw");
}

TEST_F(DeviceProfileTest, Read_IntoAReadDstRegion_Lands) {
  std::memcpy(pair_->server_region(), "read me", 7);
  int context = 0;

  ASSERT_EQ(rpma_read(pair_->client(), pair_->client_mr(), 100, pair_->server_remote(), 0, 7,
                      kAlways, &context),
            0);
  absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair_->client()));

  ASSERT_TRUE(wc.ok()) << wc.status();
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(std::string(pair_->client_buf() + 100, 7), "read me");
}

// librpma's iWARP rule (READ_DST -> IBV_ACCESS_REMOTE_WRITE) seen from the other side.
TEST_F(DeviceProfileTest, RemoteWrite_IntoAReadDstRegion_OnlyOnIwarp) {
  rpma_mr_remote* client_region = ClientRegionForTheServer();
  ASSERT_NE(client_region, nullptr);
  std::memcpy(pair_->server_region(), "written", 7);

  ASSERT_EQ(rpma_write(pair_->server(), client_region, 200, pair_->server_mr(), 0, 7, kAlways,
                       nullptr),
            0);
  absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair_->server()));

  ASSERT_TRUE(wc.ok()) << wc.status();
  if (iwarp_) {
    EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
    EXPECT_EQ(std::string(pair_->client_buf() + 200, 7), "written");
  } else {
    EXPECT_EQ(wc->status, IBV_WC_REM_ACCESS_ERR);
  }
  EXPECT_EQ(rpma_mr_remote_delete(&client_region), 0);
}

TEST_F(DeviceProfileTest, WriteWithImm_NoImmediateDataOnSiw_Provider) {
  std::memcpy(pair_->client_buf(), "imm", 3);

  const int ret = rpma_write_with_imm(pair_->client(), pair_->server_remote(), 0,
                                      pair_->client_mr(), 0, 3, kAlways, 0x1234, nullptr);

  if (iwarp_) {
    EXPECT_EQ(ret, RPMA_E_PROVIDER);
  } else {
    EXPECT_EQ(ret, 0);
  }
}

TEST_F(DeviceProfileTest, SendWithImm_NoImmediateDataOnSiw_Provider) {
  const int ret =
      rpma_send_with_imm(pair_->client(), pair_->client_mr(), 0, 4, kAlways, 0x1234, nullptr);

  if (iwarp_) {
    EXPECT_EQ(ret, RPMA_E_PROVIDER);
  } else {
    EXPECT_EQ(ret, 0);
  }
}

// The client's rpma_conn_disconnect: on iWARP it closes the connection's stream, and the
// server's QP goes to ERROR, flushing the receive it posted (siw_qp_llp_close); on IB / RoCE
// the server's QP stays RTS after the DREQ and its receive stays posted (docs/DEVICES.md).
// Either way the server's next event is RPMA_CONN_CLOSED.
TEST_F(DeviceProfileTest, ClientDisconnect_ServerReceiveFlushesOnlyOnIwarp) {
  ASSERT_EQ(rpma_recv(pair_->server(), pair_->server_inbox(), 0, 8, nullptr), 0);

  ASSERT_EQ(rpma_conn_disconnect(pair_->client()), 0);

  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(pair_->server(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_CLOSED);
  if (iwarp_) {
    absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair_->server()));
    ASSERT_TRUE(wc.ok()) << wc.status();
    EXPECT_EQ(wc->status, IBV_WC_WR_FLUSH_ERR);  // (a flushed WC's opcode is undefined)
  } else {
    ibv_wc wc;
    int got = 0;
    EXPECT_EQ(rpma_cq_get_wc(CqOf(pair_->server()), 1, &wc, &got), RPMA_E_NO_COMPLETION);
  }
}

}  // namespace
}  // namespace softrpma::ops_testing
