// Several threads on the data path at once (meant for --config=tsan as much as for the plain
// build): a sender and a receiver thread on the two sides of one connection (RNR waits resumed
// from the other thread), and writers on separate connections. Bounded work; every thread is
// joined; no timing is asserted.

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

constexpr int kMessages = 300;

TEST(ConcurrencyTest, SendAndRecvFromTwoThreads_AllArriveInOrder) {
  Backend* backend = SimBackend();
  TestConnection conn(backend);
  ConnectionOptions options;
  options.max_send_wr = 8;
  options.max_recv_wr = 8;
  options.cqe = 64;
  ASSERT_TRUE(conn.Connect(options).ok());
  TestBuffer out(backend, conn.active.pd, sizeof(int), IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend, conn.passive.pd, 8 * sizeof(int), IBV_ACCESS_LOCAL_WRITE);
  std::vector<int> received;

  std::thread sender([&] {
    int sent = 0;
    while (sent < kMessages) {
      // Inline: the message is copied at post, so the buffer can change while the send waits
      // for a receive.
      std::memcpy(out.data(), &sent, sizeof(int));
      ibv_sge sge = out.Sge(0, sizeof(int));
      ibv_send_wr wr{};
      wr.wr_id = sent;
      wr.opcode = IBV_WR_SEND;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
      ibv_send_wr* bad = nullptr;
      const int post = backend->IbvPostSend(conn.active.qp(), &wr, &bad);
      if (post == 0) {
        ++sent;
      } else {
        ASSERT_EQ(post, ENOMEM);
      }
      PollAll(backend, conn.active.send_cq);  // frees send-queue slots
    }
  });
  std::thread receiver([&] {
    int posted = 0;
    int slot = 0;
    while (static_cast<int>(received.size()) < kMessages) {
      if (posted - static_cast<int>(received.size()) < 8 && posted < kMessages) {
        ibv_sge sge = in.Sge(slot * sizeof(int), sizeof(int));
        if (PostRecvBuf(backend, conn.passive.qp(), slot, &sge, 1) == 0) {
          ++posted;
          slot = (slot + 1) % 8;
        }
      }
      for (const ibv_wc& wc : PollAll(backend, conn.passive.recv_cq)) {
        ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
        int value = 0;
        std::memcpy(&value, in.data() + wc.wr_id * sizeof(int), sizeof(int));
        received.push_back(value);
      }
    }
  });
  sender.join();
  receiver.join();

  ASSERT_EQ(received.size(), static_cast<size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) ASSERT_EQ(received[i], i);
}

TEST(ConcurrencyTest, WritersOnSeparateConnections) {
  Backend* backend = SimBackend();
  constexpr int kConnections = 3;
  std::vector<std::unique_ptr<TestConnection>> conns;
  std::vector<std::unique_ptr<TestBuffer>> locals, remotes;
  for (int i = 0; i < kConnections; ++i) {
    conns.push_back(std::make_unique<TestConnection>(backend));
    ASSERT_TRUE(conns.back()->Connect(ConnectionOptions()).ok());
    locals.push_back(
        std::make_unique<TestBuffer>(backend, conns.back()->active.pd, 64, IBV_ACCESS_LOCAL_WRITE));
    remotes.push_back(std::make_unique<TestBuffer>(
        backend, conns.back()->passive.pd, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  }
  std::vector<std::thread> writers;
  for (int i = 0; i < kConnections; ++i) {
    writers.emplace_back([&, i] {
      for (int n = 0; n < kMessages; ++n) {
        locals[i]->data()[0] = static_cast<uint8_t>(n);
        ibv_sge sge = locals[i]->Sge(0, 1);
        ASSERT_EQ(PostWrite(backend, conns[i]->active.qp(), n, &sge, 1, remotes[i]->addr(),
                            remotes[i]->mr()->rkey),
                  0);
        std::vector<ibv_wc> wcs = PollAll(backend, conns[i]->active.send_cq);
        ASSERT_EQ(wcs.size(), 1u);
        ASSERT_EQ(wcs[0].status, IBV_WC_SUCCESS);
      }
    });
  }
  for (std::thread& writer : writers) writer.join();

  for (int i = 0; i < kConnections; ++i) {
    EXPECT_EQ(remotes[i]->data()[0], static_cast<uint8_t>(kMessages - 1));
  }
  locals.clear();
  remotes.clear();
}

}  // namespace
}  // namespace softrpma::sim::testing
