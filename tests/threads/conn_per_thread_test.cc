// librpma's most common threaded use (librpma(7), THREAD SAFETY): many threads share one peer
// and each creates and uses a connection of its own. Here every thread, at the same time as the
// others, makes its own configuration, endpoint, regions and connected client/server pair on the
// shared peer, then runs rounds of RDMA write, read back and send/recv, waiting for each
// completion (bounded), and checks every completion and every byte before tearing down.

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "librpma.h"
#include "tests/threads/waits.h"

namespace softrpma {
namespace {

using threads_testing::ConnectPair;
using threads_testing::NextCompletion;
using threads_testing::Pair;
using threads_testing::PairOptions;
using threads_testing::ReleasePair;

constexpr int kThreads = 4;
constexpr int kRounds = 40;
constexpr size_t kChunk = 64;      // bytes per write / read
constexpr size_t kSlots = 16;      // write destinations cycle through the server's first slots
constexpr size_t kMessage = 32;    // bytes per send
constexpr size_t kReadDst = 2048;  // client: where reads land
constexpr size_t kSendSrc = 3072;  // client: what sends send
constexpr size_t kRecvDst = 3072;  // server: where receives land

// The bytes thread `thread` writes in round `round`: different for every (thread, round, i).
char PatternByte(int thread, int round, size_t i) {
  return static_cast<char>((thread * 131 + round * 17 + static_cast<int>(i) * 3 + 1) & 0xff);
}

// Checks one completion: status, opcode, wr_id.
absl::Status Expect(const absl::StatusOr<ibv_wc>& wc, ibv_wc_opcode opcode, uint64_t wr_id,
                    const std::string& what) {
  if (!wc.ok()) return absl::InternalError(absl::StrCat(what, ": ", wc.status().ToString()));
  if (wc->status != IBV_WC_SUCCESS || wc->opcode != opcode || wc->wr_id != wr_id) {
    return absl::InternalError(
        absl::StrFormat("%s: got status %s, opcode %d, wr_id %d; want success, opcode %d, wr_id %d",
                        what, ibv_wc_status_str(wc->status), wc->opcode, wc->wr_id, opcode, wr_id));
  }
  return absl::OkStatus();
}

#define RETURN_IF_ERROR(expr)          \
  do {                                 \
    absl::Status status_ = (expr);     \
    if (!status_.ok()) return status_; \
  } while (0)

// One round on the thread's own pair: write, read back, send/recv; every byte checked.
absl::Status RunRound(Pair& pair, int thread, int round) {
  rpma_cq* client_cq = nullptr;
  rpma_cq* server_rcq = nullptr;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_get_cq(pair.client, &client_cq));
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_get_rcq(pair.server, &server_rcq));
  const std::string where = absl::StrFormat("thread %d round %d", thread, round);
  const uint64_t base = static_cast<uint64_t>(round) * 4;

  // RDMA write: client -> server slot.
  const size_t slot = (round % kSlots) * kChunk;
  for (size_t i = 0; i < kChunk; ++i) pair.client_buf[i] = PatternByte(thread, round, i);
  THREADS_RETURN_IF_RPMA_ERROR(rpma_write(pair.client, pair.server_mr_remote, slot, pair.client_mr,
                                          0, kChunk, RPMA_F_COMPLETION_ALWAYS,
                                          reinterpret_cast<void*>(base + 1)));
  RETURN_IF_ERROR(Expect(NextCompletion(client_cq), IBV_WC_RDMA_WRITE, base + 1, where + " write"));
  for (size_t i = 0; i < kChunk; ++i) {
    if (pair.server_buf[slot + i] != PatternByte(thread, round, i)) {
      return absl::InternalError(absl::StrCat(where, ": server byte ", slot + i, " wrong"));
    }
  }

  // RDMA read: the same slot back into the client's read area.
  std::memset(pair.client_buf.data() + kReadDst, 0, kChunk);
  THREADS_RETURN_IF_RPMA_ERROR(
      rpma_read(pair.client, pair.client_mr, kReadDst, pair.server_mr_remote, slot, kChunk,
                RPMA_F_COMPLETION_ALWAYS, reinterpret_cast<void*>(base + 2)));
  absl::StatusOr<ibv_wc> wc = NextCompletion(client_cq);
  RETURN_IF_ERROR(Expect(wc, IBV_WC_RDMA_READ, base + 2, where + " read"));
  if (wc->byte_len != kChunk ||
      std::memcmp(pair.client_buf.data() + kReadDst, pair.server_buf.data() + slot, kChunk) != 0) {
    return absl::InternalError(absl::StrCat(where, ": read back differs"));
  }

  // Send/recv: client -> server, a message naming thread and round.
  const std::string message = absl::StrFormat("thread %02d round %03d", thread, round);
  std::memset(pair.server_buf.data() + kRecvDst, 0, kMessage);
  THREADS_RETURN_IF_RPMA_ERROR(rpma_recv(pair.server, pair.server_mr, kRecvDst, kMessage,
                                         reinterpret_cast<void*>(base + 3)));
  std::memcpy(pair.client_buf.data() + kSendSrc, message.data(), message.size());
  THREADS_RETURN_IF_RPMA_ERROR(rpma_send(pair.client, pair.client_mr, kSendSrc, message.size(),
                                         RPMA_F_COMPLETION_ALWAYS,
                                         reinterpret_cast<void*>(base + 4)));
  RETURN_IF_ERROR(Expect(NextCompletion(client_cq), IBV_WC_SEND, base + 4, where + " send"));
  wc = NextCompletion(server_rcq);
  RETURN_IF_ERROR(Expect(wc, IBV_WC_RECV, base + 3, where + " recv"));
  if (wc->byte_len != message.size() ||
      std::string(pair.server_buf.data() + kRecvDst, message.size()) != message) {
    return absl::InternalError(absl::StrCat(where, ": received message differs"));
  }
  return absl::OkStatus();
}

// Everything one thread does, from configuration to teardown, on the shared peer.
absl::Status RunThread(rpma_peer* peer, int thread) {
  PairOptions options;
  options.port = std::to_string(25000 + thread);
  Pair pair;
  absl::Status status = ConnectPair(peer, options, &pair);
  for (int round = 0; status.ok() && round < kRounds; ++round) {
    status = RunRound(pair, thread, round);
  }
  absl::Status released = ReleasePair(&pair);
  return status.ok() ? released : status;
}

TEST(ConnPerThreadTest, ThreadsWithOwnConnectionsOnOnePeer_AllDataIntact) {
  ibv_context* dev = nullptr;
  ASSERT_EQ(
      rpma_utils_get_ibv_context(threads_testing::TestAddress(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev),
      0);
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(dev, &peer), 0);

  std::vector<absl::Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([peer, t, &results] { results[t] = RunThread(peer, t); });
  }
  for (std::thread& thread : threads) thread.join();  // each thread's waits are bounded

  for (int t = 0; t < kThreads; ++t)
    EXPECT_TRUE(results[t].ok()) << "thread " << t << ": " << results[t];
  EXPECT_EQ(rpma_peer_delete(&peer), 0);
}

}  // namespace
}  // namespace softrpma
