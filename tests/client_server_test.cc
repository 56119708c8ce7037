// A client and a server in one process on the simulated NIC, through the public API only:
// write, read back, send/recv, all waited for on a shared completion channel; disconnect as on
// IB.

#include <cstring>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "librpma.h"
#include "tests/testing/connected_pair.h"

namespace softrpma {
namespace {

using ::softrpma::testing::ConnectedPair;
using ::softrpma::testing::PairOptions;

// Waits on conn's shared channel for one completion and returns it.
ibv_wc WaitOne(rpma_conn* conn, bool expect_rcq) {
  rpma_cq* cq = nullptr;
  bool is_rcq = !expect_rcq;
  EXPECT_EQ(rpma_conn_wait(conn, 0, &cq, &is_rcq), 0);
  EXPECT_EQ(is_rcq, expect_rcq);
  ibv_wc wc{};
  int got = 0;
  if (cq != nullptr) {
    EXPECT_EQ(rpma_cq_get_wc(cq, 1, &wc, &got), 0);
  }
  EXPECT_EQ(got, 1);
  return wc;
}

class ClientServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PairOptions options;
    options.shared_channel = true;
    options.rcq_size = 8;
    auto pair = ConnectedPair::Create(options);
    ASSERT_TRUE(pair.ok()) << pair.status();
    pair_ = std::move(*pair);
  }
  std::unique_ptr<ConnectedPair> pair_;
};

TEST_F(ClientServerTest, WriteThenReadBack) {
  const std::string text = "one-sided, and back again";
  std::memcpy(pair_->client_buf(), text.data(), text.size());
  ASSERT_EQ(rpma_write(pair_->client(), pair_->server_mr_remote(), 100, pair_->client_mr(), 0,
                       text.size(), RPMA_F_COMPLETION_ALWAYS, reinterpret_cast<void*>(0x11)),
            0);
  ibv_wc wc = WaitOne(pair_->client(), /*expect_rcq=*/false);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc.wr_id, 0x11u);
  uint32_t qp_num = 0;
  ASSERT_EQ(rpma_conn_get_qp_num(pair_->client(), &qp_num), 0);
  EXPECT_EQ(wc.qp_num, qp_num);
  EXPECT_EQ(std::string(pair_->server_buf() + 100, text.size()), text);

  ASSERT_EQ(rpma_read(pair_->client(), pair_->client_mr(), 2000, pair_->server_mr_remote(), 100,
                      text.size(), RPMA_F_COMPLETION_ALWAYS, reinterpret_cast<void*>(0x12)),
            0);
  wc = WaitOne(pair_->client(), /*expect_rcq=*/false);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc.wr_id, 0x12u);
  EXPECT_EQ(wc.byte_len, text.size());
  EXPECT_EQ(std::string(pair_->client_buf() + 2000, text.size()), text);
}

TEST_F(ClientServerTest, SendRecvBothWays) {
  const std::string ping = "ping";
  const std::string pong = "pong!";
  ASSERT_EQ(rpma_recv(pair_->server(), pair_->server_mr(), 512, 64, reinterpret_cast<void*>(1)),
            0);
  ASSERT_EQ(rpma_recv(pair_->client(), pair_->client_mr(), 512, 64, reinterpret_cast<void*>(2)),
            0);
  std::memcpy(pair_->client_buf(), ping.data(), ping.size());
  ASSERT_EQ(rpma_send(pair_->client(), pair_->client_mr(), 0, ping.size(),
                      RPMA_F_COMPLETION_ALWAYS, reinterpret_cast<void*>(3)),
            0);
  ibv_wc wc = WaitOne(pair_->client(), /*expect_rcq=*/false);
  EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  EXPECT_EQ(wc.wr_id, 3u);

  wc = WaitOne(pair_->server(), /*expect_rcq=*/true);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.byte_len, ping.size());
  EXPECT_EQ(std::string(pair_->server_buf() + 512, ping.size()), ping);

  std::memcpy(pair_->server_buf(), pong.data(), pong.size());
  ASSERT_EQ(rpma_send(pair_->server(), pair_->server_mr(), 0, pong.size(),
                      RPMA_F_COMPLETION_ON_ERROR, nullptr),
            0);
  wc = WaitOne(pair_->client(), /*expect_rcq=*/true);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.byte_len, pong.size());
  EXPECT_EQ(std::string(pair_->client_buf() + 512, pong.size()), pong);
}

TEST_F(ClientServerTest, WriteOutsideRemoteRegion_CompletesWithRemoteAccessError) {
  std::memset(pair_->server_buf(), 'S', 16);
  // Ends 8 bytes past the end of the server's 4096-byte region.
  ASSERT_EQ(rpma_write(pair_->client(), pair_->server_mr_remote(), 4096 - 8, pair_->client_mr(),
                       0, 16, RPMA_F_COMPLETION_ON_ERROR, reinterpret_cast<void*>(7)),
            0);
  ibv_wc wc = WaitOne(pair_->client(), /*expect_rcq=*/false);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(std::string(pair_->server_buf() + 4096 - 8, 8), std::string(8, '\0'));
}

TEST_F(ClientServerTest, DisconnectIsSeenByBothSides) {
  ASSERT_EQ(rpma_conn_disconnect(pair_->client()), 0);  // IB's DREQ
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(pair_->server(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_CLOSED);
  ASSERT_EQ(rpma_conn_disconnect(pair_->server()), 0);  // the DREP
  ASSERT_EQ(rpma_conn_next_event(pair_->client(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_CLOSED);
  // Each side's timewait ends: RDMA_CM_EVENT_TIMEWAIT_EXIT, which librpma reports as CLOSED.
  ASSERT_EQ(rpma_conn_next_event(pair_->client(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_CLOSED);
  ASSERT_EQ(rpma_conn_next_event(pair_->server(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_CLOSED);
}

TEST_F(ClientServerTest, AfterTheClientDisconnects_ServerKeepsItsReceive_ItsSendTimesOut) {
  ASSERT_EQ(rpma_recv(pair_->server(), pair_->server_mr(), 512, 64, reinterpret_cast<void*>(1)),
            0);
  ASSERT_EQ(rpma_conn_disconnect(pair_->client()), 0);
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  ASSERT_EQ(rpma_conn_next_event(pair_->server(), &event), 0);
  ASSERT_EQ(event, RPMA_CONN_CLOSED);
  rpma_cq* rcq = nullptr;
  ASSERT_EQ(rpma_conn_get_rcq(pair_->server(), &rcq), 0);
  ibv_wc wc{};
  int got = 0;
  EXPECT_EQ(rpma_cq_get_wc(rcq, 1, &wc, &got), RPMA_E_NO_COMPLETION);  // still posted

  ASSERT_EQ(rpma_send(pair_->server(), pair_->server_mr(), 0, 4, RPMA_F_COMPLETION_ALWAYS,
                      reinterpret_cast<void*>(2)),
            0);

  wc = WaitOne(pair_->server(), /*expect_rcq=*/false);
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);  // the client's QP is in ERROR: no answer
  EXPECT_EQ(wc.wr_id, 2u);
  wc = WaitOne(pair_->server(), /*expect_rcq=*/true);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);  // the server's QP went to ERROR
  EXPECT_EQ(wc.wr_id, 1u);
}

}  // namespace
}  // namespace softrpma
