#include "tests/conformance/testing/connected_test.h"

#include "gtest/gtest.h"

namespace softrpma::conformance {

void ConnectedTest::SetUp() {
  ASSERT_NO_FATAL_FAILURE(RigTest::SetUp());
  Configure(rig_->cfg());
  ASSERT_RPMA(rig_->Establish(), 0);
  client_mr_ = rig_->RegisterMr(kMrSize, kAllMrUsages);
  server_mr_ = rig_->RegisterMr(kMrSize, kAllMrUsages);
  ASSERT_NE(client_mr_, nullptr);
  ASSERT_NE(server_mr_, nullptr);
  server_remote_ = rig_->RemoteOf(server_mr_);
  ASSERT_NE(server_remote_, nullptr);
}

void ConnectedTest::CompleteOnCq() {
  ASSERT_RPMA(rpma_write(rig_->client(), server_remote_, 0, client_mr_, 0, 8,
                         RPMA_F_COMPLETION_ALWAYS, nullptr),
              0);
}

void ConnectedTest::CompleteOnRcq() {
  ASSERT_RPMA(rpma_recv(rig_->client(), client_mr_, 0, 8, nullptr), 0);
  ASSERT_RPMA(rpma_send(rig_->server(), server_mr_, 0, 8, RPMA_F_COMPLETION_ON_ERROR, nullptr), 0);
}

void ConnectedTest::WaitCq(rpma_cq* cq) {
  int fd = -1;
  ASSERT_RPMA(rpma_cq_get_fd(cq, &fd), 0);
  ASSERT_TRUE(Readable(fd));
  ASSERT_RPMA(rpma_cq_wait(cq), 0);
}

void ConnectedTest::ExpectOneCompletion(rpma_cq* cq, ibv_wc_opcode opcode) {
  ibv_wc wc{};
  int got = 0;
  ASSERT_RPMA(rpma_cq_get_wc(cq, 1, &wc, &got), 0);
  EXPECT_EQ(got, 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, opcode);
}

void ConnectedTest::ExpectClientCompletion(ibv_wc_opcode opcode) {
  rpma_cq* cq = client_cq();
  ASSERT_NE(cq, nullptr);
  WaitCq(cq);
  ExpectOneCompletion(cq, opcode);
}

rpma_cq* ConnectedTest::client_cq() const {
  rpma_cq* cq = nullptr;
  EXPECT_RPMA(rpma_conn_get_cq(rig_->client(), &cq), 0);
  return cq;
}

}  // namespace softrpma::conformance
