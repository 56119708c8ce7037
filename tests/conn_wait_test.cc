// rpma_conn_wait(3), through the public API on the simulated NIC: the success cases and one test
// per line of its ERRORS section. After every error the connection is still usable or cleanly
// deletable (the fixture deletes it; ASan checks that nothing leaks).

#include <poll.h>

#include <memory>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/testing/connected_pair.h"

namespace softrpma {
namespace {

using ::softrpma::testing::ConnectedPair;
using ::softrpma::testing::PairOptions;
using ::softrpma::testing::kNeedsSimulatedNic;
using ::softrpma::testing::SimulatedNicSelected;

// True when fd becomes readable within a bounded time: a test never blocks forever.
bool Readable(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  return poll(&pfd, 1, /*timeout_ms=*/5000) == 1 && (pfd.revents & POLLIN) != 0;
}

class ConnWaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (SimulatedNicSelected()) sim::ClearFaultPlan();
    PairOptions options;
    options.shared_channel = true;
    options.rcq_size = 4;
    auto pair = ConnectedPair::Create(options);
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = std::move(*pair);
    ASSERT_EQ(rpma_conn_get_cq(pair_->client(), &client_cq_), 0);
    ASSERT_EQ(rpma_conn_get_rcq(pair_->client(), &client_rcq_), 0);
    ASSERT_EQ(rpma_conn_get_compl_fd(pair_->client(), &compl_fd_), 0);
  }
  void TearDown() override {
    if (SimulatedNicSelected()) sim::ClearFaultPlan();
  }

  // A completion on the client's CQ: a signaled write.
  void CompleteOnCq() {
    ASSERT_EQ(rpma_write(pair_->client(), pair_->server_mr_remote(), 0, pair_->client_mr(), 0, 8,
                         RPMA_F_COMPLETION_ALWAYS, nullptr),
              0);
  }
  // A completion on the client's RCQ: the server sends into a posted receive.
  void CompleteOnRcq() {
    ASSERT_EQ(rpma_recv(pair_->client(), pair_->client_mr(), 0, 8, nullptr), 0);
    ASSERT_EQ(rpma_send(pair_->server(), pair_->server_mr(), 0, 8, RPMA_F_COMPLETION_ON_ERROR,
                        nullptr),
              0);
  }
  // Collects exactly one successful completion from cq.
  void ExpectOneCompletion(rpma_cq* cq, ibv_wc_opcode opcode) {
    ibv_wc wc{};
    int got = 0;
    ASSERT_EQ(rpma_cq_get_wc(cq, 1, &wc, &got), 0);
    EXPECT_EQ(got, 1);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, opcode);
  }

  std::unique_ptr<ConnectedPair> pair_;
  rpma_cq* client_cq_ = nullptr;
  rpma_cq* client_rcq_ = nullptr;
  int compl_fd_ = -1;
};

TEST_F(ConnWaitTest, ConnWait_EventFromCq_ReturnsCqAndIsRcqFalse) {
  CompleteOnCq();
  ASSERT_TRUE(Readable(compl_fd_));
  rpma_cq* cq = nullptr;
  bool is_rcq = true;
  ASSERT_EQ(rpma_conn_wait(pair_->client(), 0, &cq, &is_rcq), 0);
  EXPECT_EQ(cq, client_cq_);
  EXPECT_FALSE(is_rcq);
  ExpectOneCompletion(cq, IBV_WC_RDMA_WRITE);
}

TEST_F(ConnWaitTest, ConnWait_EventFromRcq_ReturnsRcqAndIsRcqTrue) {
  CompleteOnRcq();
  ASSERT_TRUE(Readable(compl_fd_));
  rpma_cq* cq = nullptr;
  bool is_rcq = false;
  ASSERT_EQ(rpma_conn_wait(pair_->client(), 0, &cq, &is_rcq), 0);
  EXPECT_EQ(cq, client_rcq_);
  EXPECT_TRUE(is_rcq);
  ExpectOneCompletion(cq, IBV_WC_RECV);
}

TEST_F(ConnWaitTest, ConnWait_IsRcqNull_Succeeds) {
  CompleteOnRcq();
  ASSERT_TRUE(Readable(compl_fd_));
  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_wait(pair_->client(), 0, &cq, nullptr), 0);
  EXPECT_EQ(cq, client_rcq_);
  ExpectOneCompletion(cq, IBV_WC_RECV);
}

TEST_F(ConnWaitTest, ConnWait_WaitForCompletionFlag_Succeeds) {
  CompleteOnCq();
  ASSERT_TRUE(Readable(compl_fd_));
  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_wait(pair_->client(), RPMA_W_WAIT_FOR_COMPLETION, &cq, nullptr), 0);
  EXPECT_EQ(cq, client_cq_);
  ExpectOneCompletion(cq, IBV_WC_RDMA_WRITE);
}

TEST_F(ConnWaitTest, ConnWait_ReArmsTheCq_SecondCompletionWakesAgain) {
  for (int round = 0; round < 3; ++round) {
    CompleteOnCq();
    ASSERT_TRUE(Readable(compl_fd_)) << "round " << round;
    rpma_cq* cq = nullptr;
    ASSERT_EQ(rpma_conn_wait(pair_->client(), 0, &cq, nullptr), 0);
    ExpectOneCompletion(cq, IBV_WC_RDMA_WRITE);
  }
}

TEST_F(ConnWaitTest, ConnWait_ConnNull_ReturnsInval) {
  rpma_cq* cq = nullptr;
  EXPECT_EQ(rpma_conn_wait(nullptr, 0, &cq, nullptr), RPMA_E_INVAL);
}

TEST_F(ConnWaitTest, ConnWait_CqNull_ReturnsInval) {
  bool is_rcq;
  EXPECT_EQ(rpma_conn_wait(pair_->client(), 0, nullptr, &is_rcq), RPMA_E_INVAL);
}

// The man page names no flags error and upstream ignores flags (reserved for later use), so any
// value waits as 0 does.
TEST_F(ConnWaitTest, ConnWait_OtherFlags_WaitAsUpstream) {
  CompleteOnCq();
  ASSERT_TRUE(Readable(compl_fd_));
  rpma_cq* cq = nullptr;
  EXPECT_EQ(rpma_conn_wait(pair_->client(), 0x100, &cq, nullptr), 0);
  EXPECT_EQ(cq, client_cq_);
  ExpectOneCompletion(cq, IBV_WC_RDMA_WRITE);
}

TEST(ConnWaitNotSharedTest, ConnWait_ChannelNotShared_ReturnsNotSharedChnl) {
  PairOptions options;
  options.shared_channel = false;
  auto pair = ConnectedPair::Create(options);
  ASSERT_TRUE(pair.ok()) << pair.status();
  rpma_cq* cq = nullptr;
  EXPECT_EQ(rpma_conn_wait((*pair)->client(), 0, &cq, nullptr), RPMA_E_NOT_SHARED_CHNL);
  EXPECT_EQ(cq, nullptr);
}

TEST_F(ConnWaitTest, ConnWait_GetCqEventFails_ReturnsNoCompletion) {
  if (!SimulatedNicSelected()) GTEST_SKIP() << kNeedsSimulatedNic;
  CompleteOnCq();
  ASSERT_TRUE(Readable(compl_fd_));
  {
    sim::ScopedFaultPlan faults("ibv_get_cq_event:fail=EIO:nth=1");
    ASSERT_TRUE(faults.status().ok()) << faults.status();
    rpma_cq* cq = nullptr;
    EXPECT_EQ(rpma_conn_wait(pair_->client(), 0, &cq, nullptr), RPMA_E_NO_COMPLETION);
    EXPECT_EQ(*sim::FaultInjectionCount("ibv_get_cq_event"), 1u);
  }
  // The event was not consumed: the connection goes on as if nothing happened.
  ASSERT_TRUE(Readable(compl_fd_));
  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_wait(pair_->client(), 0, &cq, nullptr), 0);
  EXPECT_EQ(cq, client_cq_);
  ExpectOneCompletion(cq, IBV_WC_RDMA_WRITE);
}

TEST_F(ConnWaitTest, ConnWait_GetCqEventReturnsUnknownCq_ReturnsUnknown) {
  if (!SimulatedNicSelected()) GTEST_SKIP() << kNeedsSimulatedNic;
  CompleteOnCq();
  ASSERT_TRUE(Readable(compl_fd_));
  sim::ScopedFaultPlan faults("ibv_get_cq_event:unknown_cq:nth=1");
  ASSERT_TRUE(faults.status().ok()) << faults.status();
  rpma_cq* cq = client_cq_;
  EXPECT_EQ(rpma_conn_wait(pair_->client(), 0, &cq, nullptr), RPMA_E_UNKNOWN);
  EXPECT_EQ(cq, nullptr);
  // The completion itself is still there to collect, and the connection deletes cleanly.
  ExpectOneCompletion(client_cq_, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(pair_->DeleteClient(), 0);
}

TEST_F(ConnWaitTest, ConnWait_ReqNotifyCqFails_ReturnsProviderAndNullCq) {
  if (!SimulatedNicSelected()) GTEST_SKIP() << kNeedsSimulatedNic;
  CompleteOnRcq();
  ASSERT_TRUE(Readable(compl_fd_));
  sim::ScopedFaultPlan faults("ibv_req_notify_cq:fail=EIO:nth=1");
  ASSERT_TRUE(faults.status().ok()) << faults.status();
  rpma_cq* cq = client_rcq_;
  bool is_rcq = false;
  EXPECT_EQ(rpma_conn_wait(pair_->client(), 0, &cq, &is_rcq), RPMA_E_PROVIDER);
  EXPECT_EQ(cq, nullptr);
  EXPECT_EQ(*sim::FaultInjectionCount("ibv_req_notify_cq"), 1u);
  // The completion is still collectable and the connection deletes cleanly.
  ExpectOneCompletion(client_rcq_, IBV_WC_RECV);
  EXPECT_EQ(pair_->DeleteClient(), 0);
}

TEST_F(ConnWaitTest, ConnWait_ReqNotifyCqFailsWithoutErrno_ReturnsProvider) {
  if (!SimulatedNicSelected()) GTEST_SKIP() << kNeedsSimulatedNic;
  CompleteOnCq();
  ASSERT_TRUE(Readable(compl_fd_));
  sim::ScopedFaultPlan faults("ibv_req_notify_cq:fail=none:nth=1");
  ASSERT_TRUE(faults.status().ok()) << faults.status();
  rpma_cq* cq = nullptr;
  EXPECT_EQ(rpma_conn_wait(pair_->client(), 0, &cq, nullptr), RPMA_E_PROVIDER);
  EXPECT_EQ(cq, nullptr);
}

}  // namespace
}  // namespace softrpma
