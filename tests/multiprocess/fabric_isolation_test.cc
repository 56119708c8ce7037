// fabric_isolation_test: a librpma program on the simulated NIC against processes that do not
// follow the fabric's rules (docs/FABRIC.md, Naming and isolation): another user's process
// that took its listener's name first, and a peer that announces a 1 GiB write before any
// connect request. Each other process is real (fork), bounded and killed at the end.

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/fabric/hostile_peer.h"
#include "simverbs/sim/fabric/wire.h"

namespace {

namespace wire = softrpma::sim::wire;
using softrpma::sim::testing::Child;

constexpr char kAddr[] = "127.0.0.1";
constexpr int kLimitMs = 30 * 1000;  // a bound against hangs, never a timing assertion

// This process's fabric, which the processes it forks share.
std::string Fabric() {
  static const std::string fabric = [] {
    std::string name = "hostile-" + std::to_string(getpid());
    setenv("RPMA_BACKEND", "sim", 1);
    setenv("RPMA_SIM_FABRIC", name.c_str(), 1);
    return name;
  }();
  return fabric;
}

std::string ListenerName(const char* port) {
  return "softrpma/" + Fabric() + "/" + kAddr + ":" + port;
}

rpma_peer* NewPeer() {
  Fabric();
  ibv_context* ctx = nullptr;
  if (rpma_utils_get_ibv_context(kAddr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx) != 0) return nullptr;
  rpma_peer* peer = nullptr;
  return rpma_peer_new(ctx, &peer) == 0 ? peer : nullptr;
}

TEST(SquattedListenerTest, ListenAndConnect_NameHeldByAnotherUser_FailNamingTheHolder) {
  if (geteuid() != 0) GTEST_SKIP() << "another user's process needs root to start";
  Child squatter;
  softrpma::sim::testing::SquatAsNobody(ListenerName("7311"), &squatter);
  ASSERT_GT(squatter.pid(), 0);
  rpma_peer* peer = NewPeer();
  ASSERT_NE(peer, nullptr);
  const std::string holder =
      "held by another user (uid 65534, pid " + std::to_string(squatter.pid()) + ")";

  // The server cannot listen there, and hears who holds the name.
  ::testing::internal::CaptureStderr();
  rpma_ep* ep = nullptr;
  const int listen_ret = rpma_ep_listen(peer, kAddr, "7311", &ep);
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(listen_ret, RPMA_E_PROVIDER);
  EXPECT_NE(said.find(holder + ": cannot listen"), std::string::npos) << said;

  // The client does not connect to the squatter, and hears why.
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer, kAddr, "7311", nullptr, &req), 0);
  ::testing::internal::CaptureStderr();
  rpma_conn* conn = nullptr;
  const int connect_ret = rpma_conn_req_connect(&req, nullptr, &conn);
  said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(connect_ret, RPMA_E_PROVIDER);
  EXPECT_EQ(conn, nullptr);
  EXPECT_NE(said.find(holder + ": not connecting"), std::string::npos) << said;
  EXPECT_EQ(rpma_peer_delete(&peer), 0);
}

// The child: a librpma server listening at kAddr:7312, which the fabric thread serves.
void Serve(int ready_fd) {
  rpma_peer* peer = NewPeer();
  static rpma_ep* ep = nullptr;
  if (peer == nullptr || rpma_ep_listen(peer, kAddr, "7312", &ep) != 0) _exit(1);
  const char byte = 1;
  if (write(ready_fd, &byte, 1) != 1) _exit(1);
}

TEST(UnboundedBodyTest, Listener_1GiBWriteBeforeAnyConnectRequest_ClosedWithoutBufferingIt) {
  Fabric();
  Child server;
  softrpma::sim::testing::StartServer(&Serve, &server);
  ASSERT_GT(server.pid(), 0);
  const long rss_before_kib = softrpma::sim::testing::RssKiB(server.pid());
  const int fd = softrpma::sim::testing::RawConnect(ListenerName("7312"));
  ASSERT_GE(fd, 0);

  wire::Header write = wire::MakeHeader(wire::Type::kWrite);
  write.body_len = uint32_t{1} << 30;  // announced; 256 MiB of it offered
  ASSERT_TRUE(softrpma::sim::testing::WriteAll(fd, &write, sizeof(write)));
  const size_t offer_bytes = size_t{256} << 20;
  std::vector<uint8_t> chunk(size_t{1} << 20);
  size_t offered = 0;
  while (offered < offer_bytes &&
         softrpma::sim::testing::WriteAll(fd, chunk.data(), chunk.size())) {
    offered += chunk.size();
  }

  EXPECT_LT(offered, offer_bytes) << "the server read the body of a write before a connection";
  EXPECT_TRUE(softrpma::sim::testing::WaitClosed(fd, kLimitMs));
  const long rss_after_kib = softrpma::sim::testing::RssKiB(server.pid());
  ASSERT_GT(rss_before_kib, 0);
  EXPECT_LT(rss_after_kib - rss_before_kib, 32 * 1024)
      << "the server grew from " << rss_before_kib << " KiB to " << rss_after_kib << " KiB";
  close(fd);
}

}  // namespace
