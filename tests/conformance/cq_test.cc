// Conformance of completion queues (rpma_cq_get_fd(3), rpma_cq_wait(3), rpma_cq_get_wc(3)): one
// test per ERRORS line (rows of rpma-errors.tsv), through the public API on the simulated NIC.

#include <infiniband/verbs.h>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/conformance_test.h"
#include "tests/conformance/testing/connected_test.h"

namespace softrpma::conformance {
namespace {

// The client's CQ, on a completion channel of its own.
class CqTest : public ConnectedTest {
 protected:
  void SetUp() override {
    ConnectedTest::SetUp();
    cq_ = client_cq();
    ASSERT_NE(cq_, nullptr);
    ASSERT_RPMA(rpma_cq_get_fd(cq_, &fd_), 0);
  }

  rpma_cq* cq_ = nullptr;
  int fd_ = -1;
};

// The client's CQ, on the connection's shared completion channel.
class CqSharedChannelTest : public CqTest {
 protected:
  void Configure(rpma_conn_cfg* cfg) override {
    ASSERT_RPMA(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  }
};

RPMA_TEST_F(CqTest, CqGetFd_CqOrFdNull_ReturnsInval,
            RPMA_ROW("rpma_cq_get_fd", "RPMA_E_INVAL", "cq or fd is NULL")) {
  int fd = -12345;
  EXPECT_RPMA(rpma_cq_get_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_cq_get_fd(cq_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(fd, -12345);
}

// ---- rpma_cq_wait -----------------------------------------------------------------------------

RPMA_TEST_F(CqTest, CqWait_CqNull_ReturnsInval,
            RPMA_ROW("rpma_cq_wait", "RPMA_E_INVAL", "cq is NULL")) {
  EXPECT_RPMA(rpma_cq_wait(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(CqTest, CqWait_ReqNotifyCqFails_ReturnsProvider,
            RPMA_ROW("rpma_cq_wait", "RPMA_E_PROVIDER",
                     "ibv_req_notify_cq(3) failed with a provider error")) {
  CompleteOnCq();
  ASSERT_TRUE(Readable(fd_));
  {
    ARM_FAULTS(faults, "ibv_req_notify_cq:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_cq_wait(cq_), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_req_notify_cq"), 1u);
  }
  // The completion is still there to collect.
  ExpectOneCompletion(cq_, IBV_WC_RDMA_WRITE);
}

RPMA_TEST_F(CqTest, CqWait_NoCompletionOnNonBlockingFd_ReturnsNoCompletion,
            RPMA_ROW("rpma_cq_wait", "RPMA_E_NO_COMPLETION", "no completions available")) {
  ASSERT_TRUE(SetNonBlocking(fd_));
  EXPECT_RPMA(rpma_cq_wait(cq_), RPMA_E_NO_COMPLETION);
  // A completion that comes later is waited for and collected.
  CompleteOnCq();
  ASSERT_TRUE(Readable(fd_));
  EXPECT_RPMA(rpma_cq_wait(cq_), 0);
  ExpectOneCompletion(cq_, IBV_WC_RDMA_WRITE);
}

RPMA_TEST_F(CqSharedChannelTest, CqWait_ChannelShared_ReturnsSharedChannel,
            RPMA_ROW("rpma_cq_wait", "RPMA_E_SHARED_CHANNEL",
                     "the completion event channel is shared and cannot be handled by any "
                     "particular CQ")) {
  CompleteOnCq();  // an event waits on the shared channel: the call must not take it
  EXPECT_RPMA(rpma_cq_wait(cq_), RPMA_E_SHARED_CHANNEL);
  int compl_fd = -1;
  ASSERT_RPMA(rpma_conn_get_compl_fd(rig_->client(), &compl_fd), 0);
  ASSERT_TRUE(Readable(compl_fd));
  rpma_cq* cq = nullptr;
  EXPECT_RPMA(rpma_conn_wait(rig_->client(), 0, &cq, nullptr), 0);
  EXPECT_EQ(cq, cq_);
  ExpectOneCompletion(cq_, IBV_WC_RDMA_WRITE);
}

// ---- rpma_cq_get_wc ---------------------------------------------------------------------------

RPMA_TEST_F(CqTest, CqGetWc_BadNumEntriesCqWcOrNumEntriesGot_ReturnsInval,
            RPMA_ROW("rpma_cq_get_wc", "RPMA_E_INVAL",
                     "num_entries < 1, cq or wc is NULL, num_entries > 1 and num_entries_got is "
                     "NULL")) {
  CompleteOnCq();  // a completion waits: none of the calls may take it
  ibv_wc wc[2] = {};
  int got = -1;
  EXPECT_RPMA(rpma_cq_get_wc(cq_, 0, wc, &got), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_cq_get_wc(cq_, -1, wc, &got), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_cq_get_wc(nullptr, 1, wc, &got), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_cq_get_wc(cq_, 1, nullptr, &got), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_cq_get_wc(cq_, 2, wc, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(got, -1);
  WaitCq(cq_);
  ExpectOneCompletion(cq_, IBV_WC_RDMA_WRITE);
}

RPMA_TEST_F(CqTest, CqGetWc_EmptyCq_ReturnsNoCompletion,
            RPMA_ROW("rpma_cq_get_wc", "RPMA_E_NO_COMPLETION", "no completions available")) {
  ibv_wc wc[2] = {};
  int got = -1;
  EXPECT_RPMA(rpma_cq_get_wc(cq_, 2, wc, &got), RPMA_E_NO_COMPLETION);
  EXPECT_RPMA(rpma_cq_get_wc(cq_, 1, wc, nullptr), RPMA_E_NO_COMPLETION);
  EXPECT_EQ(got, -1);
}

RPMA_TEST_F(CqTest, CqGetWc_PollCqFailsWithErrno_ReturnsProvider,
            RPMA_ROW("rpma_cq_get_wc", "RPMA_E_PROVIDER",
                     "ibv_poll_cq(3) failed with a provider error")) {
  CompleteOnCq();
  WaitCq(cq_);
  ibv_wc wc{};
  int got = -1;
  {
    ARM_FAULTS(faults, "ibv_poll_cq:fail=EOVERFLOW:nth=1");
    EXPECT_RPMA(rpma_cq_get_wc(cq_, 1, &wc, &got), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_poll_cq"), 1u);
  }
  EXPECT_EQ(got, -1);
  ExpectOneCompletion(cq_, IBV_WC_RDMA_WRITE);
}

RPMA_TEST_F(CqTest, CqGetWc_PollCqFailsWithoutErrno_ReturnsProviderAsUpstream,
            RPMA_ROW_NOT_ENFORCED("rpma_cq_get_wc", "RPMA_E_UNKNOWN",
                                  "ibv_poll_cq(3) failed but no provider error is available",
                                  "upstream returns RPMA_E_PROVIDER for every failed "
                                  "ibv_poll_cq (cq.c), which never reports an errno on a real "
                                  "NIC; softrpma does the same on both backends")) {
  CompleteOnCq();
  WaitCq(cq_);
  ibv_wc wc{};
  int got = -1;
  {
    ARM_FAULTS(faults, "ibv_poll_cq:fail=none:nth=1");
    EXPECT_RPMA(rpma_cq_get_wc(cq_, 1, &wc, &got), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_poll_cq"), 1u);
  }
  EXPECT_EQ(got, -1);
  ExpectOneCompletion(cq_, IBV_WC_RDMA_WRITE);
}

}  // namespace
}  // namespace softrpma::conformance
