// sim_trace_program: a single-threaded program with several connections whose active sides
// share one CQ. In rounds it posts zero-length RDMA writes on every connection, then polls the
// shared CQ and prints the order in which the completions arrived (that order is the seeded
// scheduler's choice); each connection also does one SEND / RECV with a completion event.
// determinism_test.sh runs it under RPMA_SIM_SEED / RPMA_SIM_TRACE / RPMA_SIM_STATS /
// RPMA_SIM_SCENARIO. Exits 2 (printing why) when the simulator does not start, 1 when a step
// fails, 0 otherwise.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "simverbs/backend.h"
#include "simverbs/sim/sim_backend.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

constexpr int kConnections = 3;
constexpr int kRounds = 4;
constexpr int kWritesPerRound = 2;

int Fail(const std::string& what) {
  std::fprintf(stderr, "sim_trace_program: %s\n", what.c_str());
  return 1;
}

int Run() {
  absl::StatusOr<Backend*> started = GetSimBackend();
  if (!started.ok()) {
    std::fprintf(stderr, "%s\n", std::string(started.status().message()).c_str());
    return 2;
  }
  Backend* backend = *started;
  ibv_context* ctx = SimContext();
  if (ctx == nullptr) return Fail("no device context");
  ibv_cq* shared_cq = nullptr;
  if (backend->IbvCreateCq(ctx, 64, nullptr, nullptr, 0, &shared_cq) != 0) {
    return Fail("ibv_create_cq");
  }
  {
    std::vector<std::unique_ptr<TestConnection>> connections;
    for (int c = 0; c < kConnections; ++c) {
      connections.push_back(std::make_unique<TestConnection>(backend));
      ConnectionOptions options;
      options.active_cq = shared_cq;
      absl::Status status = connections.back()->Connect(options);
      if (!status.ok()) return Fail(absl::StrCat("connect: ", status.message()));
    }
    for (int round = 0; round < kRounds; ++round) {
      for (int c = 0; c < kConnections; ++c) {
        for (int k = 0; k < kWritesPerRound; ++k) {
          const uint64_t wr_id = (c + 1) * 100 + round * 10 + k;
          if (PostWrite(backend, connections[c]->active.qp(), wr_id, nullptr, 0, 0, 0) != 0) {
            return Fail("ibv_post_send");
          }
        }
      }
      std::string order = absl::StrCat("round ", round, ":");
      size_t got = 0;
      while (got < kConnections * kWritesPerRound) {
        std::vector<ibv_wc> wcs = PollAll(backend, shared_cq);
        if (wcs.empty()) return Fail("a completion is missing");
        for (const ibv_wc& wc : wcs) {
          absl::StrAppend(&order, " ", wc.wr_id, wc.status == IBV_WC_SUCCESS ? "" : "!");
        }
        got += wcs.size();
      }
      std::printf("%s\n", order.c_str());
    }
    // One SEND / RECV per connection, with a completion event on the passive side.
    for (int c = 0; c < kConnections; ++c) {
      TestConnection& conn = *connections[c];
      if (backend->IbvReqNotifyCq(conn.passive.recv_cq, 0) != 0) return Fail("req_notify");
      if (PostRecvBuf(backend, conn.passive.qp(), 900 + c, nullptr, 0) != 0) return Fail("recv");
      if (PostSendMsg(backend, conn.active.qp(), 800 + c, nullptr, 0) != 0) return Fail("send");
      ibv_cq* event_cq = nullptr;
      void* event_context = nullptr;
      if (backend->IbvGetCqEvent(conn.passive.comp_channel, &event_cq, &event_context) != 0) {
        return Fail("ibv_get_cq_event");
      }
      backend->IbvAckCqEvents(event_cq, 1);
      const std::vector<ibv_wc> received = PollAll(backend, conn.passive.recv_cq);
      const std::vector<ibv_wc> sent = PollAll(backend, shared_cq);
      if (received.size() != 1 || sent.size() != 1) return Fail("send/recv completions");
      std::printf("send/recv %d: %llu %llu\n", c, static_cast<unsigned long long>(sent[0].wr_id),
                  static_cast<unsigned long long>(received[0].wr_id));
    }
    for (auto& connection : connections) {
      absl::Status status = connection->Disconnect();
      if (!status.ok()) return Fail(absl::StrCat("disconnect: ", status.message()));
      PollAll(backend, shared_cq);
    }
  }
  if (backend->IbvDestroyCq(shared_cq) != 0) return Fail("ibv_destroy_cq");
  return 0;
}

}  // namespace
}  // namespace softrpma::sim::testing

int main() { return softrpma::sim::testing::Run(); }
