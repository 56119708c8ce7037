// Receives that arrive other ways than a plain send into rpma_recv: through a shared receive
// queue (rpma_srq_*), and with immediate data (rpma_write_with_imm, rpma_send_with_imm). Public
// API only, on the selected backend.

#include <arpa/inet.h>
#include <poll.h>

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

// Waits (bounded) for cq's channel, then collects exactly one completion.
ibv_wc WaitOneOnCq(rpma_cq* cq) {
  int fd = -1;
  EXPECT_EQ(rpma_cq_get_fd(cq, &fd), 0);
  pollfd pfd{fd, POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, /*timeout_ms=*/5000), 1) << "no completion event within 5 s";
  EXPECT_EQ(rpma_cq_wait(cq), 0);
  ibv_wc wc{};
  int got = 0;
  EXPECT_EQ(rpma_cq_get_wc(cq, 1, &wc, &got), 0);
  EXPECT_EQ(got, 1);
  return wc;
}

TEST(SrqTest, SendToAConnectionOnAnSrq_LandsOnTheSrqsRcq) {
  PairOptions options;
  options.server_uses_srq = true;
  auto pair = ConnectedPair::Create(options);
  ASSERT_TRUE(pair.ok()) << pair.status();
  ConnectedPair& p = **pair;
  rpma_cq* srq_rcq = nullptr;
  ASSERT_EQ(rpma_srq_get_rcq(p.server_srq(), &srq_rcq), 0);
  ASSERT_NE(srq_rcq, nullptr);

  ASSERT_EQ(rpma_srq_recv(p.server_srq(), p.server_mr(), 256, 64, reinterpret_cast<void*>(0x51)),
            0);
  const std::string message = "into the shared queue";
  std::memcpy(p.client_buf(), message.data(), message.size());
  ASSERT_EQ(rpma_send(p.client(), p.client_mr(), 0, message.size(), RPMA_F_COMPLETION_ON_ERROR,
                      nullptr),
            0);

  ibv_wc wc = WaitOneOnCq(srq_rcq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 0x51u);
  EXPECT_EQ(wc.byte_len, message.size());
  uint32_t server_qp_num = 0;
  ASSERT_EQ(rpma_conn_get_qp_num(p.server(), &server_qp_num), 0);
  EXPECT_EQ(wc.qp_num, server_qp_num);
  EXPECT_EQ(std::string(p.server_buf() + 256, message.size()), message);
}

TEST(ImmTest, WriteWithImm_WritesAndConsumesAReceiveCarryingTheImmediate) {
  auto pair = ConnectedPair::Create();
  ASSERT_TRUE(pair.ok()) << pair.status();
  ConnectedPair& p = **pair;
  rpma_cq* server_cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(p.server(), &server_cq), 0);

  // A receive with no buffer: write_with_imm consumes one, as on hardware.
  ASSERT_EQ(rpma_recv(p.server(), nullptr, 0, 0, reinterpret_cast<void*>(0x61)), 0);
  const std::string text = "written with an immediate";
  std::memcpy(p.client_buf(), text.data(), text.size());
  ASSERT_EQ(rpma_write_with_imm(p.client(), p.server_mr_remote(), 64, p.client_mr(), 0,
                                text.size(), RPMA_F_COMPLETION_ON_ERROR, 0xC0FFEEu, nullptr),
            0);

  ibv_wc wc = WaitOneOnCq(server_cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.wr_id, 0x61u);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc.imm_data), 0xC0FFEEu);  // verbs carries it in network byte order
  EXPECT_EQ(std::string(p.server_buf() + 64, text.size()), text);
}

TEST(ImmTest, SendWithImm_DeliversTheMessageAndTheImmediate) {
  auto pair = ConnectedPair::Create();
  ASSERT_TRUE(pair.ok()) << pair.status();
  ConnectedPair& p = **pair;
  rpma_cq* server_cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(p.server(), &server_cq), 0);

  ASSERT_EQ(rpma_recv(p.server(), p.server_mr(), 0, 32, reinterpret_cast<void*>(0x71)), 0);
  const std::string message = "hi";
  std::memcpy(p.client_buf(), message.data(), message.size());
  ASSERT_EQ(rpma_send_with_imm(p.client(), p.client_mr(), 0, message.size(),
                               RPMA_F_COMPLETION_ON_ERROR, 7u, nullptr),
            0);

  ibv_wc wc = WaitOneOnCq(server_cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 0x71u);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc.imm_data), 7u);
  EXPECT_EQ(wc.byte_len, message.size());
  EXPECT_EQ(std::string(p.server_buf(), message.size()), message);
}

}  // namespace
}  // namespace softrpma
