// Asynchronous execution and the buffer-race detector (sched.h, "Asynchronous execution"):
// a WR executes after its post returns, at a post point the seed chooses or at the next poll
// point at the latest; eager mode executes inside the post; the detector reports a source
// changed between post and execution and poisons READ and receive buffers.

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/sched.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// Restores the process's execution settings after each test.
class AsyncTest : public ::testing::Test {
 protected:
  ~AsyncTest() override {
    SetExecutionMode(ExecutionMode::kAsync);
    SetRaceDetector(false);
    SetSeed(kDefaultSeed);
  }

  void Connect(TestConnection* conn) {
    absl::Status status = conn->Connect(ConnectionOptions());
    ASSERT_TRUE(status.ok()) << status;
  }

  Backend* backend_ = SimBackend();
};

TEST_F(AsyncTest, DefaultIsAsync_WriteExecutesAfterThePostAtTheNextPoll) {
  EXPECT_EQ(CurrentExecutionMode(), ExecutionMode::kAsync);
  TestConnection conn(backend_);
  Connect(&conn);
  TestBuffer local(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn.passive.pd, 16, kRemoteAccess);
  std::memcpy(local.data(), "new", 3);
  ibv_sge sge = local.Sge(0, 3);

  ASSERT_EQ(PostWrite(backend_, conn.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);

  EXPECT_EQ(remote.data()[0], 0) << "the write executed inside ibv_post_send";
  EXPECT_THAT(PollAll(backend_, conn.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
  EXPECT_EQ(std::memcmp(remote.data(), "new", 3), 0);
}

// The bug asynchronous execution exists to show: the source reused before the completion.
TEST_F(AsyncTest, SourceReusedBeforeTheCompletion_TheNicSendsTheNewBytes) {
  TestConnection conn(backend_);
  Connect(&conn);
  TestBuffer local(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn.passive.pd, 16, kRemoteAccess);
  std::memcpy(local.data(), "old", 3);
  ibv_sge sge = local.Sge(0, 3);
  ASSERT_EQ(PostWrite(backend_, conn.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);

  std::memcpy(local.data(), "NEW", 3);
  ASSERT_EQ(PollAll(backend_, conn.active.send_cq).size(), 1u);

  EXPECT_EQ(std::memcmp(remote.data(), "NEW", 3), 0);
}

TEST_F(AsyncTest, Eager_ExecutesInsideThePost) {
  SetExecutionMode(ExecutionMode::kEager);
  TestConnection conn(backend_);
  Connect(&conn);
  TestBuffer local(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn.passive.pd, 16, kRemoteAccess);
  std::memcpy(local.data(), "old", 3);
  ibv_sge sge = local.Sge(0, 3);

  ASSERT_EQ(PostWrite(backend_, conn.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);
  std::memcpy(local.data(), "NEW", 3);

  EXPECT_EQ(std::memcmp(remote.data(), "old", 3), 0);
  EXPECT_EQ(PollAll(backend_, conn.active.send_cq).size(), 1u);
}

// Whether the first of two writes executed by the two post points after it (the second write,
// a receive posted on the peer), for one seed; `qp_num`: the writer's QP.
bool FirstWriteExecutedAtTheNextPosts(Backend* backend, uint64_t seed, uint32_t* qp_num) {
  SetSeed(seed);  // before the QPs are made: their choosers are seeded then
  TestConnection conn(backend);
  EXPECT_TRUE(conn.Connect(ConnectionOptions()).ok());
  *qp_num = conn.active.qp()->qp_num;
  TestBuffer local(backend, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend, conn.passive.pd, 16, kRemoteAccess);
  TestBuffer in(backend, conn.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  std::memcpy(local.data(), "x", 1);
  ibv_sge sge = local.Sge(0, 1);
  EXPECT_EQ(PostWrite(backend, conn.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);
  ibv_sge other = local.Sge(8, 1);
  EXPECT_EQ(PostWrite(backend, conn.active.qp(), 2, &other, 1, remote.addr(8), remote.mr()->rkey),
            0);
  ibv_sge recv = in.Sge(0, 16);
  EXPECT_EQ(PostRecvBuf(backend, conn.passive.qp(), 3, &recv, 1), 0);
  const bool executed = remote.data()[0] == 'x';
  EXPECT_EQ(PollAll(backend, conn.active.send_cq).size(), 2u);
  EXPECT_EQ(remote.data()[0], 'x');  // a poll point executes everything posted before it
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

TEST_F(AsyncTest, InOrderPerQp_ALaterWrWaitsForAnEarlierOne) {
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    SetSeed(seed);
    TestConnection conn(backend_);
    Connect(&conn);
    TestBuffer local(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
    TestBuffer remote(backend_, conn.passive.pd, 16, kRemoteAccess);
    std::memcpy(local.data(), "ab", 2);
    ibv_sge first = local.Sge(0, 1);
    ibv_sge second = local.Sge(1, 1);
    ASSERT_EQ(
        PostWrite(backend_, conn.active.qp(), 1, &first, 1, remote.addr(0), remote.mr()->rkey),
        0);
    for (int i = 0; i < 4; ++i) {  // post points: each may execute the WRs whose time came
      ASSERT_EQ(
          PostWrite(backend_, conn.active.qp(), 2, &second, 1, remote.addr(1), remote.mr()->rkey),
          0);
      EXPECT_FALSE(remote.data()[1] == 'b' && remote.data()[0] != 'a') << "seed " << seed;
    }
    ASSERT_EQ(PollAll(backend_, conn.active.send_cq).size(), 5u);
  }
}

// A program waiting in poll(2) on the completion channel is woken to execute what it waits for.
TEST_F(AsyncTest, ArmedChannelFdBecomesReadable_GetCqEventExecutesAndDelivers) {
  TestConnection conn(backend_);
  Connect(&conn);
  TestBuffer local(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn.passive.pd, 16, kRemoteAccess);
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn.active.send_cq, 0), 0);
  const int fd = conn.active.comp_channel->fd;
  EXPECT_FALSE(FdReadable(fd));
  ibv_sge sge = local.Sge(0, 4);

  ASSERT_EQ(PostWrite(backend_, conn.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);

  EXPECT_TRUE(FdReadable(fd));
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  ASSERT_EQ(backend_->IbvGetCqEvent(conn.active.comp_channel, &cq, &context), 0);
  EXPECT_EQ(cq, conn.active.send_cq);
  backend_->IbvAckCqEvents(cq, 1);
  EXPECT_THAT(PollAll(backend_, conn.active.send_cq), ElementsAre(Field(&ibv_wc::wr_id, 1u)));
  EXPECT_FALSE(FdReadable(fd));
}

// An unsignaled write completes nowhere: the channel is not woken for it.
TEST_F(AsyncTest, UnsignaledWrite_KicksNoChannel) {
  TestConnection conn(backend_);
  Connect(&conn);
  TestBuffer local(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn.passive.pd, 16, kRemoteAccess);
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn.active.send_cq, 0), 0);
  ibv_sge sge = local.Sge(0, 4);

  ASSERT_EQ(PostWrite(backend_, conn.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey,
                      /*flags=*/0),
            0);

  EXPECT_FALSE(FdReadable(conn.active.comp_channel->fd));
  EXPECT_TRUE(PollAll(backend_, conn.active.send_cq).empty());
}

// A thread blocked in ibv_get_cq_event of the receiver gets the message a SEND posted later
// brings: the post kicks the receiver's armed channel.
TEST_F(AsyncTest, BlockedReceiver_WokenBySendPostedAfterItSlept) {
  TestConnection conn(backend_);
  Connect(&conn);
  TestBuffer out(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, conn.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge recv = in.Sge(0, 16);
  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 7, &recv, 1), 0);
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn.passive.recv_cq, 0), 0);
  ibv_cq* got = nullptr;
  std::thread receiver([&] {
    void* context = nullptr;
    EXPECT_EQ(backend_->IbvGetCqEvent(conn.passive.comp_channel, &got, &context), 0);
    if (got != nullptr) backend_->IbvAckCqEvents(got, 1);
  });
  std::memcpy(out.data(), "hi", 2);
  ibv_sge send = out.Sge(0, 2);
  ASSERT_EQ(PostSendMsg(backend_, conn.active.qp(), 8, &send, 1, /*flags=*/0), 0);
  receiver.join();

  EXPECT_EQ(got, conn.passive.recv_cq);
  EXPECT_THAT(PollAll(backend_, conn.passive.recv_cq),
              ElementsAre(Field(&ibv_wc::byte_len, 2u)));
  EXPECT_EQ(std::memcmp(in.data(), "hi", 2), 0);
}

TEST_F(AsyncTest, RaceDetector_ReportsTheChangedBytesOfTheSource) {
  SetRaceDetector(true);
  TestConnection conn(backend_);
  Connect(&conn);
  TestBuffer local(backend_, conn.active.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn.passive.pd, 64, kRemoteAccess);
  std::memset(local.data(), 'a', 32);
  ibv_sge sge = local.Sge(0, 32);
  ASSERT_EQ(PostWrite(backend_, conn.active.qp(), 0x2a, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);
  std::memcpy(local.data() + 4, "XYZ", 3);

  ::testing::internal::CaptureStderr();
  ASSERT_EQ(PollAll(backend_, conn.active.send_cq).size(), 1u);
  const std::string err = ::testing::internal::GetCapturedStderr();

  EXPECT_THAT(err, HasSubstr("softrpma-sim: race: qp " +
                             std::to_string(conn.active.qp()->qp_num) +
                             " wr_id 0x2a IBV_WR_RDMA_WRITE: source bytes [4, 7) of 32"));
}

TEST_F(AsyncTest, RaceDetector_SilentWhenTheSourceWaitsForItsCompletion) {
  SetRaceDetector(true);
  TestConnection conn(backend_);
  Connect(&conn);
  TestBuffer local(backend_, conn.active.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer out(backend_, conn.active.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, conn.passive.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn.passive.pd, 64, kRemoteAccess);
  ibv_sge sge = local.Sge(0, 32);
  ibv_sge recv = in.Sge(0, 64);
  ibv_sge send = out.Sge(0, 8);

  ::testing::internal::CaptureStderr();
  ASSERT_EQ(PostWrite(backend_, conn.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);
  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 2, &recv, 1), 0);
  ASSERT_EQ(PostSendMsg(backend_, conn.active.qp(), 3, &send, 1), 0);
  ASSERT_EQ(PollAll(backend_, conn.active.send_cq).size(), 2u);
  ASSERT_EQ(PollAll(backend_, conn.passive.recv_cq).size(), 1u);
  std::memset(local.data(), 'z', 32);  // after the completion: no race
  const std::string err = ::testing::internal::GetCapturedStderr();

  EXPECT_THAT(err, Not(HasSubstr("race")));
}

TEST_F(AsyncTest, RaceDetector_ReadDestinationAndReceiveBufferHoldPoisonUntilTheCompletion) {
  SetRaceDetector(true);
  TestConnection conn(backend_);
  Connect(&conn);
  TestBuffer local(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn.passive.pd, 16, kRemoteAccess);
  TestBuffer in(backend_, conn.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  std::memcpy(remote.data(), "remote", 6);
  ibv_sge read = local.Sge(0, 6);
  ibv_sge recv = in.Sge(0, 16);

  ASSERT_EQ(PostRead(backend_, conn.active.qp(), 1, &read, 1, remote.addr(), remote.mr()->rkey),
            0);
  EXPECT_EQ(local.data()[0], kRacePoison);
  EXPECT_EQ(local.data()[5], kRacePoison);
  EXPECT_EQ(local.data()[6], 0);  // outside the READ

  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 2, &recv, 1), 0);
  EXPECT_EQ(in.data()[0], kRacePoison);
  EXPECT_EQ(in.data()[15], kRacePoison);
  ASSERT_EQ(PollAll(backend_, conn.active.send_cq).size(), 1u);
  EXPECT_EQ(std::memcmp(local.data(), "remote", 6), 0);
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
