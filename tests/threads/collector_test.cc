// One connection, its completions collected by one thread while other threads post
// (librpma(7), THREAD SAFETY: rpma_write, rpma_send and rpma_conn_wait are thread-safe).
//
// The client connection has a shared completion channel. A poster thread issues kWrites
// signaled RDMA writes on it (at most kWindow in flight, as its send queue allows); a server
// thread sends kMessages messages into receives the client posted up front; a collector thread
// waits on the client's channel with rpma_conn_wait() and drains whichever CQ it names. Checked:
// every write completes exactly once, in posting order (RC), every message arrives in order in
// its own buffer, and every written byte is in the server's region.

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/mutex.h"
#include "tests/threads/waits.h"

namespace softrpma {
namespace {

using threads_testing::AwaitReadable;
using threads_testing::ConnectPair;
using threads_testing::kWaitLimit;
using threads_testing::NextCompletion;
using threads_testing::Pair;
using threads_testing::PairOptions;
using threads_testing::ReleasePair;

constexpr int kWrites = 200;
constexpr int kWindow = 8;       // writes in flight at most (< sq_size, <= cq_size)
constexpr size_t kChunk = 16;    // bytes per write; write i: client [i*kChunk] -> server same
constexpr int kMessages = 12;    // server -> client sends (<= rq_size, <= rcq_size)
constexpr size_t kMessage = 32;  // bytes per message
constexpr size_t kRecvBase = kWrites * kChunk;  // client: receive i lands at kRecvBase + i*kMessage
constexpr uint64_t kRecvWrIdBase = 1000000;

std::string Message(int i) { return absl::StrFormat("message %02d from the server", i); }

// What the collector saw, read by the poster (flow control) and by the test at the end.
class Collected final {
 public:
  void AddWrite(uint64_t wr_id) {
    MutexLock lock(&mu_);
    write_ids_.push_back(wr_id);
  }
  void AddRecv(const ibv_wc& wc) {
    MutexLock lock(&mu_);
    recvs_.push_back(wc);
  }
  void Fail(absl::Status status) {
    MutexLock lock(&mu_);
    if (error_.ok()) error_ = std::move(status);
  }
  // Waits (bounded) until at least `count` writes completed or an error was recorded. Polls:
  // softrpma's Mutex (simverbs/mutex.h, which TSan understands) has no condition wait.
  absl::Status AwaitWrites(size_t count) {
    const absl::Time deadline = absl::Now() + kWaitLimit;
    while (true) {
      {
        MutexLock lock(&mu_);
        if (write_ids_.size() >= count || !error_.ok()) return error_;
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("write ", count, " never completed"));
      }
      absl::SleepFor(absl::Microseconds(50));
    }
  }
  bool Done() {
    MutexLock lock(&mu_);
    return (write_ids_.size() == kWrites && recvs_.size() == kMessages) || !error_.ok();
  }
  std::vector<uint64_t> write_ids() {
    MutexLock lock(&mu_);
    return write_ids_;
  }
  std::vector<ibv_wc> recvs() {
    MutexLock lock(&mu_);
    return recvs_;
  }
  absl::Status error() {
    MutexLock lock(&mu_);
    return error_;
  }

 private:
  Mutex mu_;
  std::vector<uint64_t> write_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<ibv_wc> recvs_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

// Takes every completion cq has now; false (and an error recorded) on a bad one.
bool Drain(rpma_cq* cq, bool is_rcq, Collected* collected) {
  while (true) {
    ibv_wc wcs[8];
    int got = 0;
    int ret = rpma_cq_get_wc(cq, 8, wcs, &got);
    if (ret == RPMA_E_NO_COMPLETION) return true;
    if (ret != 0) {
      collected->Fail(threads_testing::RpmaStatus(ret, "rpma_cq_get_wc"));
      return false;
    }
    for (int i = 0; i < got; ++i) {
      const ibv_wc& wc = wcs[i];
      const ibv_wc_opcode want = is_rcq ? IBV_WC_RECV : IBV_WC_RDMA_WRITE;
      if (wc.status != IBV_WC_SUCCESS || wc.opcode != want) {
        collected->Fail(absl::InternalError(absl::StrFormat(
            "%s completion wr_id %d: status %s, opcode %d (want %d)", is_rcq ? "RCQ" : "CQ",
            wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode, want)));
        return false;
      }
      if (is_rcq) {
        collected->AddRecv(wc);
      } else {
        collected->AddWrite(wc.wr_id);
      }
    }
  }
}

// The collector: rpma_conn_wait() on the shared channel, then drains the CQ it names; before
// every wait both CQs are drained (a completion that came while a CQ was not armed raised no
// event).
void Collect(rpma_conn* conn, Collected* collected) {
  rpma_cq* cq = nullptr;
  rpma_cq* rcq = nullptr;
  int fd = -1;
  absl::Status status = threads_testing::RpmaStatus(rpma_conn_get_cq(conn, &cq), "get_cq");
  if (status.ok()) status = threads_testing::RpmaStatus(rpma_conn_get_rcq(conn, &rcq), "get_rcq");
  if (status.ok()) {
    status = threads_testing::RpmaStatus(rpma_conn_get_compl_fd(conn, &fd), "get_compl_fd");
  }
  if (!status.ok()) return collected->Fail(status);
  while (Drain(cq, false, collected) && Drain(rcq, true, collected) && !collected->Done()) {
    status = AwaitReadable(fd, "shared completion channel");
    if (!status.ok()) return collected->Fail(status);
    rpma_cq* woke = nullptr;
    bool is_rcq = false;
    int ret = rpma_conn_wait(conn, 0, &woke, &is_rcq);
    if (ret != 0) return collected->Fail(threads_testing::RpmaStatus(ret, "rpma_conn_wait"));
    if (woke != (is_rcq ? rcq : cq)) {
      return collected->Fail(absl::InternalError("rpma_conn_wait named a CQ not of its kind"));
    }
  }
}

// The poster: kWrites signaled writes, each from and to its own kChunk bytes.
absl::Status Post(Pair& pair, Collected* collected) {
  for (int i = 0; i < kWrites; ++i) {
    if (i >= kWindow) {
      absl::Status status = collected->AwaitWrites(i - kWindow + 1);
      if (!status.ok()) return status;
    }
    char* src = pair.client_buf.data() + i * kChunk;
    for (size_t b = 0; b < kChunk; ++b) src[b] = static_cast<char>((i * 7 + b) & 0xff);
    THREADS_RETURN_IF_RPMA_ERROR(rpma_write(
        pair.client, pair.server_mr_remote, i * kChunk, pair.client_mr, i * kChunk, kChunk,
        RPMA_F_COMPLETION_ALWAYS, reinterpret_cast<void*>(static_cast<uintptr_t>(i))));
  }
  return absl::OkStatus();
}

// The server: kMessages sends, each waited for on the server's own CQ (its channel is shared
// too, but only this thread uses the server connection).
absl::Status Send(Pair& pair) {
  rpma_cq* cq = nullptr;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_get_cq(pair.server, &cq));
  int fd = -1;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_get_compl_fd(pair.server, &fd));
  for (int i = 0; i < kMessages; ++i) {
    std::string message = Message(i);
    message.resize(kMessage, '\0');
    std::memcpy(pair.server_buf.data() + kRecvBase + i * kMessage, message.data(), kMessage);
    THREADS_RETURN_IF_RPMA_ERROR(rpma_send(pair.server, pair.server_mr, kRecvBase + i * kMessage,
                                           kMessage, RPMA_F_COMPLETION_ALWAYS, nullptr));
    while (true) {
      ibv_wc wc{};
      int got = 0;
      int ret = rpma_cq_get_wc(cq, 1, &wc, &got);
      if (ret == 0) {
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND) {
          return absl::InternalError(absl::StrCat("send ", i, ": ", ibv_wc_status_str(wc.status)));
        }
        break;
      }
      if (ret != RPMA_E_NO_COMPLETION) return threads_testing::RpmaStatus(ret, "rpma_cq_get_wc");
      absl::Status readable = AwaitReadable(fd, "server completion channel");
      if (!readable.ok()) return readable;
      rpma_cq* woke = nullptr;
      bool is_rcq = true;
      THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_wait(pair.server, 0, &woke, &is_rcq));
    }
  }
  return absl::OkStatus();
}

TEST(CollectorTest, OneThreadCollectsWhileOthersPost_EveryCompletionOnceInOrder) {
  ibv_context* dev = nullptr;
  ASSERT_EQ(
      rpma_utils_get_ibv_context(threads_testing::TestAddress(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev),
      0);
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
  PairOptions options;
  options.port = "26000";
  options.shared_channel = true;
  options.sq_size = 2 * kWindow;
  options.cq_size = 2 * kWindow;
  options.rq_size = kMessages;
  options.rcq_size = kMessages;
  options.buffer_size = kRecvBase + kMessages * kMessage;
  Pair pair;
  absl::Status connected = ConnectPair(peer, options, &pair);
  ASSERT_TRUE(connected.ok()) << connected;

  for (int i = 0; i < kMessages; ++i) {
    ASSERT_EQ(rpma_recv(pair.client, pair.client_mr, kRecvBase + i * kMessage, kMessage,
                        reinterpret_cast<void*>(kRecvWrIdBase + i)),
              0);
  }

  Collected collected;
  absl::Status posted;
  absl::Status sent;
  std::thread collector([&] { Collect(pair.client, &collected); });
  std::thread poster([&] {
    posted = Post(pair, &collected);
    if (!posted.ok()) collected.Fail(posted);
  });
  std::thread server([&] {
    sent = Send(pair);
    if (!sent.ok()) collected.Fail(sent);
  });
  poster.join();
  server.join();
  collector.join();  // bounded: each of its waits is, and any failure ends it

  EXPECT_TRUE(posted.ok()) << posted;
  EXPECT_TRUE(sent.ok()) << sent;
  EXPECT_TRUE(collected.error().ok()) << collected.error();

  std::vector<uint64_t> want_ids(kWrites);
  for (int i = 0; i < kWrites; ++i) want_ids[i] = i;
  EXPECT_EQ(collected.write_ids(), want_ids);

  std::vector<ibv_wc> recvs = collected.recvs();
  ASSERT_EQ(recvs.size(), static_cast<size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    EXPECT_EQ(recvs[i].wr_id, kRecvWrIdBase + i) << "receive " << i;
    EXPECT_EQ(recvs[i].byte_len, kMessage) << "receive " << i;
    EXPECT_EQ(std::string(pair.client_buf.data() + kRecvBase + i * kMessage, Message(i).size()),
              Message(i));
  }
  for (int i = 0; i < kWrites; ++i) {
    for (size_t b = 0; b < kChunk; ++b) {
      ASSERT_EQ(pair.server_buf[i * kChunk + b], static_cast<char>((i * 7 + b) & 0xff))
          << "write " << i << " byte " << b;
    }
  }

  absl::Status released = ReleasePair(&pair);
  EXPECT_TRUE(released.ok()) << released;
  EXPECT_EQ(rpma_peer_delete(&peer), 0);
}

}  // namespace
}  // namespace softrpma
