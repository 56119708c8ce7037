// endpoint_test: a process's fabric endpoint (host::ListenEndpoint, which nic/verbs_qp.cc opens at the
// first ibv_create_qp, docs/FABRIC.md "QPs without the CM") against a peer that skips the
// kQpBind its connection must start with: nothing it announces is read.

#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/fabric/hostile_peer.h"
#include "simverbs/sim/fabric/wire.h"
#include "simverbs/sim/sim_backend.h"

namespace softrpma::sim {
namespace {

constexpr int kLimitMs = 30 * 1000;  // a bound against hangs, never a timing assertion

// This process's endpoint's abstract name (nic/verbs_qp.cc: "ep/gid-" and the GID's 32 hex digits).
std::string OwnEndpointName() {
  uint8_t gid[16];
  ProcessGid(gid);
  std::string name = "softrpma/" + host::FabricName() + "/ep/gid-";
  static const char kHex[] = "0123456789abcdef";
  for (uint8_t byte : gid) {
    name += kHex[byte >> 4];
    name += kHex[byte & 15];
  }
  return name;
}

TEST(EndpointTest, Endpoint_WriteBeforeTheQpBind_ClosedBeforeItsBodyIsRead) {
  absl::StatusOr<Backend*> backend = GetSimBackend();
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<ibv_context*> context = GetSimContext();
  ASSERT_TRUE(context.ok()) << context.status();
  ibv_pd* pd = nullptr;
  ASSERT_EQ((*backend)->IbvAllocPd(*context, &pd), 0);
  ibv_cq* cq = nullptr;
  ASSERT_EQ((*backend)->IbvCreateCq(*context, 16, nullptr, nullptr, 0, &cq), 0);
  ibv_qp_init_attr attr{};
  attr.send_cq = cq;
  attr.recv_cq = cq;
  attr.cap.max_send_wr = 4;
  attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.qp_type = IBV_QPT_RC;
  ibv_qp* qp = nullptr;
  ASSERT_EQ((*backend)->IbvCreateQp(pd, &attr, &qp), 0);  // the endpoint listens from here
  const int fd = testing::RawConnect(OwnEndpointName());
  ASSERT_GE(fd, 0) << "no endpoint at " << OwnEndpointName();

  wire::Header write = wire::MakeHeader(wire::Type::kWrite);
  write.body_len = uint32_t{1} << 30;  // announced; a 64 MiB part of it is offered
  ASSERT_TRUE(testing::WriteAll(fd, &write, sizeof(write)));
  std::vector<uint8_t> chunk(size_t{1} << 20);
  size_t offered = 0;
  while (offered < (size_t{64} << 20) && testing::WriteAll(fd, chunk.data(), chunk.size())) {
    offered += chunk.size();
  }

  EXPECT_LT(offered, size_t{64} << 20) << "the endpoint read a body before the kQpBind";
  EXPECT_TRUE(testing::WaitClosed(fd, kLimitMs));
  close(fd);
  EXPECT_EQ((*backend)->IbvDestroyQp(qp), 0);
  EXPECT_EQ((*backend)->IbvDestroyCq(cq), 0);
  EXPECT_EQ((*backend)->IbvDeallocPd(pd), 0);
}

}  // namespace
}  // namespace softrpma::sim
