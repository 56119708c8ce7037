// Asynchronous execution and the buffer-race detector (sched.h, "Asynchronous execution"):
// a WR executes after its post returns, at a post point the seed chooses or at the next poll
// point at the latest; eager mode executes inside the post; the detector reports a source
// changed between post and execution and poisons READ and receive buffers.

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/nic/qp.h"
#include "simverbs/sim/sched/sched.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Not;

// A connection with a 64-byte local buffer (source / READ target) and receive buffer on the
// active side and the passive side respectively, and a 64-byte remote region; the write /
// read helpers post one SGE of `local` at `offset` to the same offset of `remote`.
struct Peers {
  explicit Peers(Backend* b) : backend(b), conn(b) {
    absl::Status status = conn.Connect(ConnectionOptions());
    EXPECT_TRUE(status.ok()) << status;
    local.emplace(b, conn.active.pd, 64, IBV_ACCESS_LOCAL_WRITE);
    in.emplace(b, conn.passive.pd, 64, IBV_ACCESS_LOCAL_WRITE);
    remote.emplace(b, conn.passive.pd, 64, kRemoteAccess);
  }
  int Write(uint64_t wr_id, uint32_t offset, uint32_t length,
            unsigned int flags = IBV_SEND_SIGNALED) {
    ibv_sge sge = local->Sge(offset, length);
    return PostWrite(backend, conn.active.qp(), wr_id, &sge, 1, remote->addr(offset),
                     remote->mr()->rkey, flags);
  }
  int Read(uint64_t wr_id, uint32_t offset, uint32_t length) {
    ibv_sge sge = local->Sge(offset, length);
    return PostRead(backend, conn.active.qp(), wr_id, &sge, 1, remote->addr(offset),
                    remote->mr()->rkey);
  }
  int Send(uint64_t wr_id, uint32_t offset, uint32_t length, unsigned int flags) {
    ibv_sge sge = local->Sge(offset, length);
    return PostSendMsg(backend, conn.active.qp(), wr_id, &sge, 1, flags);
  }
  int Recv(uint64_t wr_id) {
    ibv_sge sge = in->Sge(0, 64);
    return PostRecvBuf(backend, conn.passive.qp(), wr_id, &sge, 1);
  }
  size_t PollSends() { return PollAll(backend, conn.active.send_cq).size(); }

  Backend* backend;
  TestConnection conn;
  std::optional<TestBuffer> local;
  std::optional<TestBuffer> in;
  std::optional<TestBuffer> remote;
};

// Restores the process's execution settings after each test.
class AsyncTest : public ::testing::Test {
 protected:
  ~AsyncTest() override {
    SetExecutionMode(ExecutionMode::kAsync);
    SetRaceDetector(false);
    SetSeed(kDefaultSeed);
  }

  Backend* backend_ = SimBackend();
};

TEST_F(AsyncTest, DefaultIsAsync_WriteExecutesAfterThePostAtTheNextPoll) {
  EXPECT_EQ(CurrentExecutionMode(), ExecutionMode::kAsync);
  Peers p(backend_);
  std::memcpy(p.local->data(), "new", 3);

  ASSERT_EQ(p.Write(1, 0, 3), 0);

  EXPECT_EQ(p.remote->data()[0], 0) << "the write executed inside ibv_post_send";
  EXPECT_THAT(PollAll(backend_, p.conn.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
  EXPECT_EQ(std::memcmp(p.remote->data(), "new", 3), 0);
}

// The bug asynchronous execution exists to show: the source reused before the completion.
TEST_F(AsyncTest, SourceReusedBeforeTheCompletion_TheNicSendsTheNewBytes) {
  Peers p(backend_);
  std::memcpy(p.local->data(), "old", 3);
  ASSERT_EQ(p.Write(1, 0, 3), 0);

  std::memcpy(p.local->data(), "NEW", 3);
  ASSERT_EQ(p.PollSends(), 1u);

  EXPECT_EQ(std::memcmp(p.remote->data(), "NEW", 3), 0);
}

TEST_F(AsyncTest, Eager_ExecutesInsideThePost) {
  SetExecutionMode(ExecutionMode::kEager);
  Peers p(backend_);
  std::memcpy(p.local->data(), "old", 3);

  ASSERT_EQ(p.Write(1, 0, 3), 0);
  std::memcpy(p.local->data(), "NEW", 3);

  EXPECT_EQ(std::memcmp(p.remote->data(), "old", 3), 0);
  EXPECT_EQ(p.PollSends(), 1u);
}

// Whether the first of two writes executed by the two post points after it (the second write,
// a receive posted on the peer), for one seed; `qp_num`: the writer's QP.
bool FirstWriteExecutedAtTheNextPosts(Backend* backend, uint64_t seed, uint32_t* qp_num) {
  SetSeed(seed);  // before the QPs are made: their choosers are seeded then
  Peers p(backend);
  *qp_num = p.conn.active.qp()->qp_num;
  std::memcpy(p.local->data(), "x", 1);
  EXPECT_EQ(p.Write(1, 0, 1), 0);
  EXPECT_EQ(p.Write(2, 8, 1), 0);
  EXPECT_EQ(p.Recv(3), 0);
  const bool executed = p.remote->data()[0] == 'x';
  EXPECT_EQ(p.PollSends(), 2u);
  EXPECT_EQ(p.remote->data()[0], 'x');  // a poll point executes everything posted before it
  return executed;
}

TEST_F(AsyncTest, TheSeedChoosesThePostPoint) {
  int executed = 0;
  constexpr int kSeeds = 24;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    uint32_t qp_num = 0;
    const bool first = FirstWriteExecutedAtTheNextPosts(backend_, seed, &qp_num);
    // What the seed says: the first draw of the QP's chooser, a deferral of 1 or 2 post points.
    ExecutionChooser chooser;
    chooser.Init(qp_num);
    const uint64_t deferral = chooser.NextDeferral();
    EXPECT_EQ(first, deferral == 1 || deferral == 2) << "seed " << seed;
    executed += first ? 1 : 0;
  }
  // Deferrals of 1, 2, 3 post points or until the poll, equally likely: both outcomes occur.
  EXPECT_GT(executed, 0);
  EXPECT_LT(executed, kSeeds);
}

// Item 4 of the NIC model: every call of the process but a post is a progress point, so a WR
// posted before an unrelated call (here ibv_reg_mr, on neither QP's CQ) has executed when that
// call returns, whatever deferral the seed drew, as a NIC would have executed it by then.
TEST_F(AsyncTest, AnyCallIsAProgressPoint_AWritePostedBeforeItHasExecuted) {
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    SetSeed(seed);
    Peers p(backend_);
    std::memcpy(p.local->data(), "w", 1);
    ASSERT_EQ(p.Write(1, 0, 1), 0);
    EXPECT_EQ(p.remote->data()[0], 0) << "seed " << seed << ": executed inside the post";

    TestBuffer unrelated(backend_, p.conn.active.pd, 8, IBV_ACCESS_LOCAL_WRITE);

    EXPECT_EQ(p.remote->data()[0], 'w') << "seed " << seed;
    ASSERT_EQ(p.PollSends(), 1u);
  }
}

// The process's progress point looks at the links with deferred work only: a link whose work
// ran leaves its set, and a later post lists it again (its write still executes at the next
// call of the process).
TEST_F(AsyncTest, ProgressPoint_LooksOnlyAtLinksWithDeferredWork_ALinkIsListedAgain) {
  std::vector<std::unique_ptr<Peers>> many;
  for (int i = 0; i < 20; ++i) {
    many.push_back(std::make_unique<Peers>(backend_));
    std::memcpy(many.back()->local->data(), "x", 1);
    ASSERT_EQ(many.back()->Write(1, 0, 1), 0);
    ASSERT_EQ(many.back()->PollSends(), 1u);
  }
  Peers& p = *many.front();
  std::memcpy(p.local->data(), "y", 1);
  ASSERT_EQ(p.Write(2, 0, 1), 0);
  TestBuffer unrelated(backend_, p.conn.active.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(p.remote->data()[0], 'y');  // listed again: the call executed it
  EXPECT_LE(ProcessProgressLinkCount(), 1u);  // not the 20 links that ever deferred a WR
  ASSERT_EQ(p.PollSends(), 1u);
}

TEST_F(AsyncTest, InOrderPerQp_ALaterWrWaitsForAnEarlierOne) {
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    SetSeed(seed);
    Peers p(backend_);
    std::memcpy(p.local->data(), "ab", 2);
    ASSERT_EQ(p.Write(1, 0, 1), 0);
    for (int i = 0; i < 4; ++i) {  // post points: each may execute the WRs whose time came
      ASSERT_EQ(p.Write(2, 1, 1), 0);
      EXPECT_FALSE(p.remote->data()[1] == 'b' && p.remote->data()[0] != 'a') << "seed " << seed;
    }
    ASSERT_EQ(p.PollSends(), 5u);
  }
}

// A program waiting in poll(2) on the completion channel is woken to execute what it waits for.
TEST_F(AsyncTest, ArmedChannelFdBecomesReadable_GetCqEventExecutesAndDelivers) {
  Peers p(backend_);
  ASSERT_EQ(backend_->IbvReqNotifyCq(p.conn.active.send_cq, 0), 0);
  const int fd = p.conn.active.comp_channel->fd;
  EXPECT_FALSE(FdReadable(fd));

  ASSERT_EQ(p.Write(1, 0, 4), 0);

  EXPECT_TRUE(FdReadable(fd));
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  ASSERT_EQ(backend_->IbvGetCqEvent(p.conn.active.comp_channel, &cq, &context), 0);
  EXPECT_EQ(cq, p.conn.active.send_cq);
  backend_->IbvAckCqEvents(cq, 1);
  EXPECT_THAT(PollAll(backend_, p.conn.active.send_cq), ElementsAre(Field(&ibv_wc::wr_id, 1u)));
  EXPECT_FALSE(FdReadable(fd));
}

// An unsignaled write completes nowhere: the channel is not woken for it.
TEST_F(AsyncTest, UnsignaledWrite_KicksNoChannel) {
  Peers p(backend_);
  ASSERT_EQ(backend_->IbvReqNotifyCq(p.conn.active.send_cq, 0), 0);

  ASSERT_EQ(p.Write(1, 0, 4, /*flags=*/0), 0);

  EXPECT_FALSE(FdReadable(p.conn.active.comp_channel->fd));
  EXPECT_EQ(p.PollSends(), 0u);
}

// A SEND whose receive is not posted waits (receiver not ready) and completes nothing: neither
// channel may become readable for it, since a program woken from poll(2) would then sleep in
// ibv_get_cq_event (a real channel is readable only with an event). The receive, once
// posted, wakes both: the SEND can complete now. Also through ibv_req_notify_cq's kick.
TEST_F(AsyncTest, SendWithoutReceive_KicksNoChannelUntilTheReceiveIsPosted) {
  Peers p(backend_);
  ASSERT_EQ(backend_->IbvReqNotifyCq(p.conn.active.send_cq, 0), 0);
  ASSERT_EQ(backend_->IbvReqNotifyCq(p.conn.passive.recv_cq, 0), 0);
  const int send_fd = p.conn.active.comp_channel->fd;
  const int recv_fd = p.conn.passive.comp_channel->fd;

  ASSERT_EQ(p.Send(1, 0, 2, IBV_SEND_SIGNALED), 0);
  EXPECT_FALSE(FdReadable(send_fd));
  EXPECT_FALSE(FdReadable(recv_fd));
  ASSERT_EQ(backend_->IbvReqNotifyCq(p.conn.active.send_cq, 0), 0);  // arming again: no kick
  EXPECT_FALSE(FdReadable(send_fd));

  ASSERT_EQ(p.Recv(2), 0);
  EXPECT_TRUE(FdReadable(send_fd));
  EXPECT_TRUE(FdReadable(recv_fd));
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  ASSERT_EQ(backend_->IbvGetCqEvent(p.conn.active.comp_channel, &cq, &context), 0);
  backend_->IbvAckCqEvents(cq, 1);
  EXPECT_THAT(PollAll(backend_, p.conn.active.send_cq), ElementsAre(Field(&ibv_wc::wr_id, 1u)));
  EXPECT_THAT(PollAll(backend_, p.conn.passive.recv_cq), ElementsAre(Field(&ibv_wc::wr_id, 2u)));
}

// A thread blocked in ibv_get_cq_event of the receiver gets the message a SEND posted later
// brings: the post kicks the receiver's armed channel.
TEST_F(AsyncTest, BlockedReceiver_WokenBySendPostedAfterItSlept) {
  Peers p(backend_);
  ASSERT_EQ(p.Recv(7), 0);
  ASSERT_EQ(backend_->IbvReqNotifyCq(p.conn.passive.recv_cq, 0), 0);
  ibv_cq* got = nullptr;
  std::thread receiver([&] {
    void* context = nullptr;
    EXPECT_EQ(backend_->IbvGetCqEvent(p.conn.passive.comp_channel, &got, &context), 0);
    if (got != nullptr) backend_->IbvAckCqEvents(got, 1);
  });
  std::memcpy(p.local->data(), "hi", 2);
  ASSERT_EQ(p.Send(8, 0, 2, /*flags=*/0), 0);
  receiver.join();

  EXPECT_EQ(got, p.conn.passive.recv_cq);
  EXPECT_THAT(PollAll(backend_, p.conn.passive.recv_cq),
              ElementsAre(Field(&ibv_wc::byte_len, 2u)));
  EXPECT_EQ(std::memcmp(p.in->data(), "hi", 2), 0);
}

// A thread asleep in ibv_get_cq_event handles what its connections to other processes bring
// itself (one wake-up per message, not the fabric thread's and then its own): with the fabric
// thread held, a SEND and its acknowledgement still wake the receiver's and the sender's
// sleepers, and the bytes arrive.
TEST_F(AsyncTest, Sleepers_HandleTheirConnectionsMessagesThemselves) {
  if (CurrentTransport() != TransportKind::kHost) GTEST_SKIP() << "a connection's carrier only";
  Peers p(backend_);
  ASSERT_EQ(p.Recv(7), 0);
  ASSERT_EQ(backend_->IbvReqNotifyCq(p.conn.passive.recv_cq, 0), 0);
  ASSERT_EQ(backend_->IbvReqNotifyCq(p.conn.active.send_cq, 0), 0);
  std::optional<host::ScopedFabricThreadHeldForTest> held(std::in_place);
  auto sleeper = [&](ibv_comp_channel* channel, std::atomic<pid_t>* tid,
                     std::promise<ibv_cq*>* woke) {
    tid->store(gettid());
    ibv_cq* got = nullptr;
    void* context = nullptr;
    EXPECT_EQ(backend_->IbvGetCqEvent(channel, &got, &context), 0);
    woke->set_value(got);
  };
  std::atomic<pid_t> receiver_tid{0}, sender_tid{0};
  std::promise<ibv_cq*> receiver_woke, sender_woke;
  std::thread receiver(sleeper, p.conn.passive.comp_channel, &receiver_tid, &receiver_woke);
  std::thread sender(sleeper, p.conn.active.comp_channel, &sender_tid, &sender_woke);
  // Both asleep first: a call of this process on the host transport waits (at most 5 s) for
  // its connections to itself to be idle, which only the sleepers can make them now.
  EXPECT_TRUE(ThreadAsleep(&receiver_tid));
  EXPECT_TRUE(ThreadAsleep(&sender_tid));
  std::memcpy(p.local->data(), "hi", 2);
  ASSERT_EQ(p.Send(8, 0, 2, IBV_SEND_SIGNALED), 0);

  // A bound for a hang, not a time measured: without the sleepers' own handling, nothing
  // would wake them while the fabric thread is held.
  std::future<ibv_cq*> received = receiver_woke.get_future();
  std::future<ibv_cq*> sent = sender_woke.get_future();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  EXPECT_EQ(received.wait_until(deadline), std::future_status::ready) << "receiver not woken";
  EXPECT_EQ(sent.wait_until(deadline), std::future_status::ready) << "sender not woken";
  held.reset();  // (lets a sleeper that missed its message be woken, so that the test ends)
  receiver.join();
  sender.join();
  ibv_cq* received_cq = received.get();
  ibv_cq* sent_cq = sent.get();
  EXPECT_EQ(received_cq, p.conn.passive.recv_cq);
  EXPECT_EQ(sent_cq, p.conn.active.send_cq);
  if (received_cq != nullptr) backend_->IbvAckCqEvents(received_cq, 1);
  if (sent_cq != nullptr) backend_->IbvAckCqEvents(sent_cq, 1);
  EXPECT_THAT(PollAll(backend_, p.conn.passive.recv_cq),
              ElementsAre(Field(&ibv_wc::byte_len, 2u)));
  EXPECT_THAT(PollAll(backend_, p.conn.active.send_cq), ElementsAre(Field(&ibv_wc::wr_id, 8u)));
  EXPECT_EQ(std::memcmp(p.in->data(), "hi", 2), 0);
}

// While a sleeper watches a connection, the fabric thread leaves what arrives on it to the
// sleeper; a sleeper cancelled in its sleep (pthread_cancel: rping's CQ thread) ends its watch
// as it unwinds, so the connection is the fabric thread's again: a write to that side, with
// nobody there to call anything, still executes and completes.
TEST_F(AsyncTest, CancelledSleeper_ItsConnectionIsServedAgain) {
  if (CurrentTransport() != TransportKind::kHost) GTEST_SKIP() << "a connection's carrier only";
  Peers p(backend_);
  ASSERT_EQ(backend_->IbvReqNotifyCq(p.conn.passive.recv_cq, 0), 0);
  std::atomic<pid_t> tid{0};
  std::thread sleeper([&] {
    tid.store(gettid());
    ibv_cq* got = nullptr;
    void* context = nullptr;
    backend_->IbvGetCqEvent(p.conn.passive.comp_channel, &got, &context);
  });
  ASSERT_TRUE(ThreadAsleep(&tid));
  ASSERT_EQ(pthread_cancel(sleeper.native_handle()), 0);
  sleeper.join();

  std::memcpy(p.local->data(), "late", 4);
  ASSERT_EQ(p.Write(1, 0, 4), 0);
  // A bound for a hang, not a time measured.
  std::vector<ibv_wc> done;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (done.empty() && std::chrono::steady_clock::now() < deadline) {
    done = PollAll(backend_, p.conn.active.send_cq);
  }
  ASSERT_THAT(done, ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
  EXPECT_EQ(std::memcmp(p.remote->data(), "late", 4), 0);
}

TEST_F(AsyncTest, RaceDetector_ReportsTheChangedBytesOfTheSource) {
  SetRaceDetector(true);
  Peers p(backend_);
  std::memset(p.local->data(), 'a', 32);
  ASSERT_EQ(p.Write(0x2a, 0, 32), 0);
  std::memcpy(p.local->data() + 4, "XYZ", 3);

  ::testing::internal::CaptureStderr();
  ASSERT_EQ(p.PollSends(), 1u);
  const std::string err = ::testing::internal::GetCapturedStderr();

  EXPECT_THAT(err, HasSubstr("softrpma-sim: race: qp " +
                             std::to_string(p.conn.active.qp()->qp_num) +
                             " wr_id 0x2a IBV_WR_RDMA_WRITE: source bytes [4, 7) of 32"));
}

TEST_F(AsyncTest, RaceDetector_SilentWhenTheSourceWaitsForItsCompletion) {
  SetRaceDetector(true);
  Peers p(backend_);

  ::testing::internal::CaptureStderr();
  ASSERT_EQ(p.Write(1, 0, 32), 0);
  ASSERT_EQ(p.Recv(2), 0);
  ASSERT_EQ(p.Send(3, 32, 8, IBV_SEND_SIGNALED), 0);
  ASSERT_EQ(p.PollSends(), 2u);
  ASSERT_EQ(PollAll(backend_, p.conn.passive.recv_cq).size(), 1u);
  std::memset(p.local->data(), 'z', 64);  // after the completions: no race
  const std::string err = ::testing::internal::GetCapturedStderr();

  EXPECT_THAT(err, Not(HasSubstr("race")));
}

// rdma_disconnect is a progress point (upstream's example 12 posts an unsignaled send and
// disconnects at once): the send executes before the QP goes to ERROR, as a NIC had it on the
// wire microseconds after its post.
TEST_F(AsyncTest, Disconnect_ExecutesWhatItsQpPostedFirst) {
  SetRaceDetector(true);
  Peers p(backend_);
  ASSERT_EQ(p.Recv(1), 0);
  std::memcpy(p.local->data(), "bye!", 4);
  ASSERT_EQ(p.Send(2, 0, 4, 0), 0);  // unsignaled
  EXPECT_NE(std::memcmp(p.in->data(), "bye!", 4), 0) << "executed inside the post";
  ASSERT_EQ(p.Write(3, 8, 4, 0), 0);  // a post point: the send may execute here, or not yet

  ::testing::internal::CaptureStderr();
  ASSERT_EQ(backend_->RdmaDisconnect(p.conn.active.id), 0);
  const std::string err = ::testing::internal::GetCapturedStderr();

  EXPECT_THAT(err, Not(HasSubstr("race")));
  EXPECT_THAT(PollAll(backend_, p.conn.passive.recv_cq),
              ElementsAre(::testing::AllOf(Field(&ibv_wc::status, IBV_WC_SUCCESS),
                                           Field(&ibv_wc::byte_len, 4u))));
  EXPECT_EQ(std::memcmp(p.in->data(), "bye!", 4), 0);
}

// A send whose receive is not posted cannot execute: the caller's own disconnect flushes it,
// and the race detector says so instead of losing it silently.
TEST_F(AsyncTest, Disconnect_NamesASendItFlushesUnexecuted) {
  SetRaceDetector(true);
  Peers p(backend_);
  ASSERT_EQ(p.Send(0x77, 0, 4, IBV_SEND_SIGNALED), 0);

  ::testing::internal::CaptureStderr();
  ASSERT_EQ(backend_->RdmaDisconnect(p.conn.active.id), 0);
  const std::string err = ::testing::internal::GetCapturedStderr();

  EXPECT_THAT(err, HasSubstr("softrpma-sim: race: qp " +
                             std::to_string(p.conn.active.qp()->qp_num) +
                             " wr_id 0x77 IBV_WR_SEND: flushed by rdma_disconnect before it "
                             "executed"));
  EXPECT_THAT(PollAll(backend_, p.conn.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_WR_FLUSH_ERR)));
}

TEST_F(AsyncTest, Disconnect_RaceDetectorOff_NoLine) {
  Peers p(backend_);
  ASSERT_EQ(p.Send(0x77, 0, 4, IBV_SEND_SIGNALED), 0);

  ::testing::internal::CaptureStderr();
  ASSERT_EQ(backend_->RdmaDisconnect(p.conn.active.id), 0);
  const std::string err = ::testing::internal::GetCapturedStderr();

  EXPECT_THAT(err, Not(HasSubstr("race")));
}

TEST_F(AsyncTest, RaceDetector_ReadDestinationAndReceiveBufferHoldPoisonUntilTheCompletion) {
  SetRaceDetector(true);
  Peers p(backend_);
  std::memcpy(p.remote->data(), "remote", 6);

  ASSERT_EQ(p.Read(1, 0, 6), 0);
  EXPECT_EQ(p.local->data()[0], kRacePoison);
  EXPECT_EQ(p.local->data()[5], kRacePoison);
  EXPECT_EQ(p.local->data()[6], 0);  // outside the READ

  ASSERT_EQ(p.Recv(2), 0);
  EXPECT_EQ(p.in->data()[0], kRacePoison);
  EXPECT_EQ(p.in->data()[63], kRacePoison);
  ASSERT_EQ(p.PollSends(), 1u);
  EXPECT_EQ(std::memcmp(p.local->data(), "remote", 6), 0);
}

// Only a receive's first kPoisonedReceiveBytes are poisoned: a NIC writes no more than the
// message, and UCX lays its receive buffers out so that an SGE's tail is the next descriptor's
// header (poison there crashed ucx_perftest).
TEST_F(AsyncTest, RaceDetector_AReceiveIsPoisonedInItsFirst4KiBOnly) {
  SetRaceDetector(true);
  Peers p(backend_);
  TestBuffer big(backend_, p.conn.passive.pd, 2 * kPoisonedReceiveBytes, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = big.Sge(0, static_cast<uint32_t>(big.size()));
  ASSERT_EQ(PostRecvBuf(backend_, p.conn.passive.qp(), 1, &sge, 1), 0);
  EXPECT_EQ(big.data()[0], kRacePoison);
  EXPECT_EQ(big.data()[kPoisonedReceiveBytes - 1], kRacePoison);
  EXPECT_EQ(big.data()[kPoisonedReceiveBytes], 0);
  EXPECT_EQ(big.data()[big.size() - 1], 0);
}

TEST(ExecutionModeTest, Parse) {
  EXPECT_EQ(*ParseExecutionMode("async"), ExecutionMode::kAsync);
  EXPECT_EQ(*ParseExecutionMode("eager"), ExecutionMode::kEager);
  absl::StatusOr<ExecutionMode> bad = ParseExecutionMode("later");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("bad value \"later\": expected async"));
}

}  // namespace
}  // namespace softrpma::sim::testing
