// sim_smoke_test: a client and a server in one process on the simulated NIC, through nothing
// but the public API: listen, connect, accept, ESTABLISHED on both sides with private data,
// RDMA write then read back with completions (rpma_cq_wait + rpma_cq_get_wc, and rpma_conn_wait
// on a shared channel), send/recv, disconnect, CLOSED on both sides, teardown.
//
// Every blocking call is preceded by a bounded poll() on its fd, so a missing event fails the
// test instead of hanging it.

#include <fcntl.h>
#include <poll.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "librpma.h"

namespace {

constexpr char kAddr[] = "127.0.0.1";
constexpr char kPort[] = "7301";
constexpr int kPollLimitMs = 10000;  // a bound against hangs, not a timing assertion

// True when fd becomes readable within the bound.
void MakeNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  ASSERT_GE(flags, 0);
  ASSERT_EQ(fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
}

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, kPollLimitMs) == 1 && (p.revents & POLLIN) != 0;
}

class SimSmokeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("RPMA_BACKEND", "sim", 1);
    ASSERT_EQ(rpma_utils_get_ibv_context(kAddr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx_), 0);
    ASSERT_EQ(rpma_peer_new(ctx_, &peer_), 0);
  }
  void TearDown() override {
    if (client_ != nullptr) rpma_conn_delete(&client_);
    if (server_ != nullptr) rpma_conn_delete(&server_);
    if (ep_ != nullptr) rpma_ep_shutdown(&ep_);
    EXPECT_EQ(rpma_peer_delete(&peer_), 0);
  }

  // Waits for and returns the next event of conn.
  rpma_conn_event NextEvent(rpma_conn* conn) {
    int fd = -1;
    EXPECT_EQ(rpma_conn_get_event_fd(conn, &fd), 0);
    EXPECT_TRUE(Readable(fd)) << "no connection event";
    rpma_conn_event event = RPMA_CONN_UNDEFINED;
    EXPECT_EQ(rpma_conn_next_event(conn, &event), 0);
    return event;
  }

  // Connects client_ and server_ with cfg on both sides; pdata from each side.
  void Connect(const rpma_conn_cfg* cfg) {
    ASSERT_EQ(rpma_ep_listen(peer_, kAddr, kPort, &ep_), 0);
    rpma_conn_req* client_req = nullptr;
    ASSERT_EQ(rpma_conn_req_new(peer_, kAddr, kPort, cfg, &client_req), 0);
    char hello[] = "client-hello";
    rpma_conn_private_data client_pdata{hello, sizeof(hello)};
    ASSERT_EQ(rpma_conn_req_connect(&client_req, &client_pdata, &client_), 0);

    int ep_fd = -1;
    ASSERT_EQ(rpma_ep_get_fd(ep_, &ep_fd), 0);
    ASSERT_TRUE(Readable(ep_fd)) << "no connection request";
    rpma_conn_req* server_req = nullptr;
    ASSERT_EQ(rpma_ep_next_conn_req(ep_, cfg, &server_req), 0);
    rpma_conn_private_data got{};
    ASSERT_EQ(rpma_conn_req_get_private_data(server_req, &got), 0);
    ASSERT_GE(got.len, sizeof(hello));
    EXPECT_STREQ(static_cast<const char*>(got.ptr), hello);
    char welcome[] = "server-welcome";
    rpma_conn_private_data server_pdata{welcome, sizeof(welcome)};
    ASSERT_EQ(rpma_conn_req_connect(&server_req, &server_pdata, &server_), 0);

    EXPECT_EQ(NextEvent(client_), RPMA_CONN_ESTABLISHED);
    EXPECT_EQ(NextEvent(server_), RPMA_CONN_ESTABLISHED);
    ASSERT_EQ(rpma_conn_get_private_data(client_, &got), 0);
    ASSERT_GE(got.len, sizeof(welcome));
    EXPECT_STREQ(static_cast<const char*>(got.ptr), welcome);
    ASSERT_EQ(rpma_conn_get_private_data(server_, &got), 0);
    ASSERT_GE(got.len, sizeof(hello));
    EXPECT_STREQ(static_cast<const char*>(got.ptr), hello);
  }

  // Waits on cq's own channel and returns its one completion.
  ibv_wc OneCompletion(rpma_cq* cq) {
    int fd = -1;
    EXPECT_EQ(rpma_cq_get_fd(cq, &fd), 0);
    EXPECT_TRUE(Readable(fd)) << "no completion event";
    EXPECT_EQ(rpma_cq_wait(cq), 0);
    ibv_wc wc{};
    int got = 0;
    EXPECT_EQ(rpma_cq_get_wc(cq, 1, &wc, &got), 0);
    EXPECT_EQ(got, 1);
    return wc;
  }

  void Disconnect() {
    ASSERT_EQ(rpma_conn_disconnect(client_), 0);
    EXPECT_EQ(NextEvent(client_), RPMA_CONN_CLOSED);
    EXPECT_EQ(NextEvent(server_), RPMA_CONN_CLOSED);
    ASSERT_EQ(rpma_conn_disconnect(server_), 0);
    EXPECT_EQ(rpma_conn_delete(&client_), 0);
    EXPECT_EQ(rpma_conn_delete(&server_), 0);
    EXPECT_EQ(rpma_ep_shutdown(&ep_), 0);
  }

  ibv_context* ctx_ = nullptr;
  rpma_peer* peer_ = nullptr;
  rpma_ep* ep_ = nullptr;
  rpma_conn* client_ = nullptr;
  rpma_conn* server_ = nullptr;
};

TEST_F(SimSmokeTest, ConnectWriteReadDisconnect) {
  ASSERT_NO_FATAL_FAILURE(Connect(nullptr));

  std::vector<char> server_buf(4096, 0);
  std::vector<char> client_src(4096, 0);
  std::vector<char> client_dst(4096, 0);
  rpma_mr_local* server_mr = nullptr;
  rpma_mr_local* src_mr = nullptr;
  rpma_mr_local* dst_mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer_, server_buf.data(), server_buf.size(),
                        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC, &server_mr),
            0);
  ASSERT_EQ(rpma_mr_reg(peer_, client_src.data(), client_src.size(), RPMA_MR_USAGE_WRITE_SRC,
                        &src_mr),
            0);
  ASSERT_EQ(rpma_mr_reg(peer_, client_dst.data(), client_dst.size(), RPMA_MR_USAGE_READ_DST,
                        &dst_mr),
            0);
  size_t desc_size = 0;
  ASSERT_EQ(rpma_mr_get_descriptor_size(server_mr, &desc_size), 0);
  std::vector<uint8_t> desc(desc_size);
  ASSERT_EQ(rpma_mr_get_descriptor(server_mr, desc.data()), 0);
  rpma_mr_remote* remote = nullptr;
  ASSERT_EQ(rpma_mr_remote_from_descriptor(desc.data(), desc.size(), &remote), 0);

  const std::string text = "hello over the simulated NIC";
  std::memcpy(client_src.data(), text.data(), text.size());
  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(client_, &cq), 0);

  int write_ctx = 1;
  ASSERT_EQ(rpma_write(client_, remote, 100, src_mr, 0, text.size(), RPMA_F_COMPLETION_ALWAYS,
                       &write_ctx),
            0);
  ibv_wc wc = OneCompletion(cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc.wr_id, reinterpret_cast<uint64_t>(&write_ctx));
  EXPECT_EQ(std::string(server_buf.data() + 100, text.size()), text);

  int read_ctx = 2;
  ASSERT_EQ(rpma_read(client_, dst_mr, 8, remote, 100, text.size(), RPMA_F_COMPLETION_ALWAYS,
                      &read_ctx),
            0);
  wc = OneCompletion(cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc.wr_id, reinterpret_cast<uint64_t>(&read_ctx));
  EXPECT_EQ(std::string(client_dst.data() + 8, text.size()), text);

  // A 0-byte write is legal and completes.
  ASSERT_EQ(rpma_write(client_, nullptr, 0, nullptr, 0, 0, RPMA_F_COMPLETION_ALWAYS, nullptr),
            0);
  wc = OneCompletion(cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  ibv_wc none;
  EXPECT_EQ(rpma_cq_get_wc(cq, 1, &none, nullptr), RPMA_E_NO_COMPLETION);

  EXPECT_EQ(rpma_mr_remote_delete(&remote), 0);
  EXPECT_EQ(rpma_mr_dereg(&dst_mr), 0);
  EXPECT_EQ(rpma_mr_dereg(&src_mr), 0);
  EXPECT_EQ(rpma_mr_dereg(&server_mr), 0);
  Disconnect();
}

TEST_F(SimSmokeTest, SendRecvOnSharedChannelWithRcq) {
  rpma_conn_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg, 8), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
  ASSERT_NO_FATAL_FAILURE(Connect(cfg));
  rpma_conn_cfg_delete(&cfg);

  char recv_buf[64] = {};
  char send_buf[64] = "ping";
  rpma_mr_local* recv_mr = nullptr;
  rpma_mr_local* send_mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer_, recv_buf, sizeof(recv_buf), RPMA_MR_USAGE_RECV, &recv_mr), 0);
  ASSERT_EQ(rpma_mr_reg(peer_, send_buf, sizeof(send_buf), RPMA_MR_USAGE_SEND, &send_mr), 0);
  int recv_ctx = 3;
  ASSERT_EQ(rpma_recv(server_, recv_mr, 0, sizeof(recv_buf), &recv_ctx), 0);
  ASSERT_EQ(rpma_send(client_, send_mr, 0, 5, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);

  // The server's receive completes on its RCQ, reported through the shared channel.
  int fd = -1;
  ASSERT_EQ(rpma_conn_get_compl_fd(server_, &fd), 0);
  ASSERT_TRUE(Readable(fd)) << "no completion event on the shared channel";
  rpma_cq* cq = nullptr;
  bool is_rcq = false;
  ASSERT_EQ(rpma_conn_wait(server_, RPMA_W_WAIT_FOR_COMPLETION, &cq, &is_rcq), 0);
  rpma_cq* rcq = nullptr;
  ASSERT_EQ(rpma_conn_get_rcq(server_, &rcq), 0);
  EXPECT_EQ(cq, rcq);
  EXPECT_TRUE(is_rcq);
  ibv_wc wc{};
  int got = 0;
  ASSERT_EQ(rpma_cq_get_wc(cq, 1, &wc, &got), 0);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 5u);
  EXPECT_EQ(wc.wr_id, reinterpret_cast<uint64_t>(&recv_ctx));
  EXPECT_STREQ(recv_buf, "ping");

  // The client's send completion comes on its main CQ.
  ASSERT_EQ(rpma_conn_get_compl_fd(client_, &fd), 0);
  ASSERT_TRUE(Readable(fd));
  ASSERT_EQ(rpma_conn_wait(client_, 0, &cq, &is_rcq), 0);
  EXPECT_FALSE(is_rcq);
  ASSERT_EQ(rpma_cq_get_wc(cq, 1, &wc, nullptr), 0);
  EXPECT_EQ(wc.opcode, IBV_WC_SEND);

  EXPECT_EQ(rpma_mr_dereg(&recv_mr), 0);
  EXPECT_EQ(rpma_mr_dereg(&send_mr), 0);
  Disconnect();
}

TEST_F(SimSmokeTest, NoListener_ClientGetsRejected) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, kAddr, "7399", nullptr, &req), 0);
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &client_), 0);
  EXPECT_EQ(NextEvent(client_), RPMA_CONN_REJECTED);
  EXPECT_EQ(rpma_conn_delete(&client_), 0);
}

TEST_F(SimSmokeTest, ServerDeletesRequest_ClientGetsRejected) {
  ASSERT_EQ(rpma_ep_listen(peer_, kAddr, kPort, &ep_), 0);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, kAddr, kPort, nullptr, &req), 0);
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &client_), 0);
  int ep_fd = -1;
  ASSERT_EQ(rpma_ep_get_fd(ep_, &ep_fd), 0);
  ASSERT_TRUE(Readable(ep_fd));
  rpma_conn_req* server_req = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &server_req), 0);
  ASSERT_EQ(rpma_conn_req_delete(&server_req), 0);
  EXPECT_EQ(server_req, nullptr);
  EXPECT_EQ(NextEvent(client_), RPMA_CONN_REJECTED);
  EXPECT_EQ(rpma_conn_delete(&client_), 0);
  EXPECT_EQ(rpma_ep_shutdown(&ep_), 0);
}

TEST_F(SimSmokeTest, NonBlockingFds_NothingPending_NoEventNoCompletion) {
  ASSERT_NO_FATAL_FAILURE(Connect(nullptr));
  int fd = -1;
  ASSERT_EQ(rpma_ep_get_fd(ep_, &fd), 0);
  ASSERT_NO_FATAL_FAILURE(MakeNonBlocking(fd));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), RPMA_E_NO_EVENT);
  EXPECT_EQ(req, nullptr);

  ASSERT_EQ(rpma_conn_get_event_fd(client_, &fd), 0);
  ASSERT_NO_FATAL_FAILURE(MakeNonBlocking(fd));
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  EXPECT_EQ(rpma_conn_next_event(client_, &event), RPMA_E_NO_EVENT);

  rpma_cq* cq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(client_, &cq), 0);
  ASSERT_EQ(rpma_cq_get_fd(cq, &fd), 0);
  ASSERT_NO_FATAL_FAILURE(MakeNonBlocking(fd));
  EXPECT_EQ(rpma_cq_wait(cq), RPMA_E_NO_COMPLETION);
  Disconnect();
}

}  // namespace
