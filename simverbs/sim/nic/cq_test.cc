// Completion queues and completion channels of the simulator, through the Backend interface:
// creation limits, empty polls, overflow (IBV_EVENT_CQ_ERR), arming, the eventfd, O_NONBLOCK,
// event counting.

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/mutex.h"
#include "simverbs/sim/nic/cq.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

class CqTest : public ::testing::Test {
 protected:
  void Connect(const ConnectionOptions& options = ConnectionOptions()) {
    absl::Status status = conn_.Connect(options);
    ASSERT_TRUE(status.ok()) << status;
    local_ = std::make_unique<TestBuffer>(backend_, conn_.active.pd, 64, IBV_ACCESS_LOCAL_WRITE);
    remote_ = std::make_unique<TestBuffer>(backend_, conn_.passive.pd, 64, kRemoteAccess);
  }

  // One signaled 8-byte write from the active side.
  int Write(uint64_t wr_id, unsigned int flags = IBV_SEND_SIGNALED) {
    ibv_sge sge = local_->Sge(0, 8);
    return PostWrite(backend_, conn_.active.qp(), wr_id, &sge, 1, remote_->addr(),
                     remote_->mr()->rkey, flags);
  }

  void TearDown() override {
    local_.reset();
    remote_.reset();
  }

  Backend* backend_ = SimBackend();
  TestConnection conn_{backend_};
  std::unique_ptr<TestBuffer> local_;
  std::unique_ptr<TestBuffer> remote_;
};

// A program may pthread_cancel a thread asleep in ibv_get_cq_event (rping's CQ thread is written
// for it: pthread_testcancel before each wait). The channel is left as before: no waiter counted
// (which would keep its fd readable with no event), its mutex free, and a later wait works.
// Memory that cannot be had while a big CQ's ring grows (it grows as completions come, up to
// the CQ's size): the CQ fails as on an overflow (IBV_EVENT_CQ_ERR, completions dropped), with
// a line on stderr, and the process goes on. In a child whose address space is limited.
TEST_F(CqTest, RingGrowthOutOfMemory_CqFailsAsOnOverflow_NoCrash) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "an address-space limit and a sanitizer's shadow memory do not mix";
#else
  ibv_cq* cq = nullptr;
  ASSERT_EQ(backend_->IbvCreateCq(SimContext(), (1 << 22) - 1, nullptr, nullptr, 0, &cq), 0);
  SimCq* sim_cq = to_sim(cq);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(60);
    // 256 MiB more than now: the ring's doublings (80 B an entry) run out well before 4 M.
    rlimit limit{};
    getrlimit(RLIMIT_AS, &limit);
    FILE* status = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (status == nullptr || std::fscanf(status, "%lu", &pages) != 1) _exit(3);
    std::fclose(status);
    limit.rlim_cur = pages * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (256ull << 20);
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(4);
    ibv_wc wc{};
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RDMA_WRITE;
    uint64_t pushed = 0;
    while (pushed < (1u << 22) - 1 &&
           sim_cq->Push(wc, false, nullptr, 0, CompletionTimer::Slot{pushed, pushed})) {
      ++pushed;
    }
    // Stopped below the CQ's size, by the memory, and the CQ is in error.
    _exit(pushed > 256 && pushed < (1u << 22) - 1 && sim_cq->overflowed.load() ? 0 : 5);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus)) << "the child died of signal " << WTERMSIG(wstatus);
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  EXPECT_EQ(backend_->IbvDestroyCq(cq), 0);
#endif
}

TEST_F(CqTest, GetCqEvent_SleeperCancelled_ChannelLeftUsable) {
  ibv_context* ctx = SimContext();
  ASSERT_NE(ctx, nullptr);
  ibv_comp_channel* channel = nullptr;
  ASSERT_EQ(backend_->IbvCreateCompChannel(ctx, &channel), 0);
  ibv_cq* cq = nullptr;
  ASSERT_EQ(backend_->IbvCreateCq(ctx, 4, nullptr, channel, 0, &cq), 0);
  std::thread sleeper([this, channel] {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    backend_->IbvGetCqEvent(channel, &ev_cq, &ev_ctx);
  });
  SimCompChannel* sim_channel = to_sim(channel);
  for (;;) {  // until the sleeper is in the channel's read(2)
    {
      softrpma::MutexLock lock(&sim_channel->mu);
      if (sim_channel->signal.waiters() > 0) break;
    }
    std::this_thread::yield();
  }

  ASSERT_EQ(pthread_cancel(sleeper.native_handle()), 0);
  sleeper.join();

  {
    softrpma::MutexLock lock(&sim_channel->mu);  // free again (a leaked lock would hang here)
    EXPECT_EQ(sim_channel->signal.waiters(), 0);
  }
  ASSERT_EQ(fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK), 0);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  EXPECT_EQ(backend_->IbvGetCqEvent(channel, &ev_cq, &ev_ctx), EAGAIN);
  EXPECT_EQ(backend_->IbvDestroyCq(cq), 0);
  EXPECT_EQ(backend_->IbvDestroyCompChannel(channel), 0);
}

TEST_F(CqTest, CreateCq_CqeOutOfRange_Einval) {
  ibv_context* ctx = SimContext();
  ASSERT_NE(ctx, nullptr);
  ibv_cq* cq = nullptr;
  EXPECT_EQ(backend_->IbvCreateCq(ctx, 0, nullptr, nullptr, 0, &cq), EINVAL);
  ibv_device_attr_ex attr;
  ASSERT_EQ(backend_->IbvQueryDeviceEx(ctx, &attr), 0);
  EXPECT_EQ(backend_->IbvCreateCq(ctx, attr.orig_attr.max_cqe + 1, nullptr, nullptr, 0, &cq),
            EINVAL);
  EXPECT_EQ(cq, nullptr);  // outputs are written only on success
}

TEST_F(CqTest, CreateCq_FillsFields) {
  ibv_context* ctx = SimContext();
  ibv_comp_channel* channel = nullptr;
  ASSERT_EQ(backend_->IbvCreateCompChannel(ctx, &channel), 0);
  EXPECT_EQ(channel->context, ctx);
  EXPECT_GE(channel->fd, 0);
  int marker = 0;
  ibv_cq* cq = nullptr;

  ASSERT_EQ(backend_->IbvCreateCq(ctx, 10, &marker, channel, 0, &cq), 0);

  EXPECT_EQ(cq->context, ctx);
  EXPECT_EQ(cq->channel, channel);
  EXPECT_EQ(cq->cq_context, &marker);
  EXPECT_EQ(cq->cqe, 15);  // mlx5 (the default profile) rounds 10 + 1 up to 16, minus one
  EXPECT_EQ(backend_->IbvDestroyCompChannel(channel), EBUSY);  // the CQ uses it
  EXPECT_EQ(backend_->IbvDestroyCq(cq), 0);
  EXPECT_EQ(backend_->IbvDestroyCompChannel(channel), 0);
}

TEST_F(CqTest, PollCq_Empty_ReturnsZeroPolled) {
  Connect();
  ibv_wc wc[4];
  int polled = -1;

  EXPECT_EQ(backend_->IbvPollCq(conn_.active.send_cq, 4, wc, &polled), 0);

  EXPECT_EQ(polled, 0);
}

TEST_F(CqTest, PollCq_OldestFirst_AtMostNumEntries) {
  Connect();
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_EQ(Write(i), 0);
  ibv_wc wc[2];
  int polled = 0;

  ASSERT_EQ(backend_->IbvPollCq(conn_.active.send_cq, 2, wc, &polled), 0);
  ASSERT_EQ(polled, 2);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[1].wr_id, 2u);
  ASSERT_EQ(backend_->IbvPollCq(conn_.active.send_cq, 2, wc, &polled), 0);
  ASSERT_EQ(polled, 1);
  EXPECT_EQ(wc[0].wr_id, 3u);
}

// As mlx5: the completion that does not fit is lost, the device reports IBV_EVENT_CQ_ERR, the
// QP goes to ERROR; what the CQ held before can still be polled, and nothing comes after.
TEST_F(CqTest, Overflow_CqErrAsyncEvent_QueuedCompletionsStillPolled_QpGoesToError) {
  ConnectionOptions options;
  options.cqe = 3;  // as mlx5 (the default profile) rounds it: 2^2 - 1
  Connect(options);
  ibv_context* context = conn_.active.qp()->context;
  for (uint64_t wr_id = 1; wr_id <= 4; ++wr_id) ASSERT_EQ(Write(wr_id), 0);  // 4 > 3

  ibv_wc wc[4];
  int polled = -1;
  ASSERT_EQ(backend_->IbvPollCq(conn_.active.send_cq, 4, wc, &polled), 0);
  ASSERT_EQ(polled, 3);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[2].wr_id, 3u);
  EXPECT_EQ(conn_.active.qp()->state, IBV_QPS_ERR);
  ASSERT_EQ(Write(5), 0);  // flushes into the CQ in error: lost
  ASSERT_EQ(backend_->IbvPollCq(conn_.active.send_cq, 4, wc, &polled), 0);
  EXPECT_EQ(polled, 0);

  EXPECT_TRUE(FdReadable(context->async_fd));
  ibv_async_event event{};
  ASSERT_EQ(backend_->IbvGetAsyncEvent(context, &event), 0);
  EXPECT_EQ(event.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(event.element.cq, conn_.active.send_cq);
  backend_->IbvAckAsyncEvent(&event);
  EXPECT_FALSE(FdReadable(context->async_fd));  // one event per CQ
  const int flags = fcntl(context->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(context->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
  EXPECT_EQ(backend_->IbvGetAsyncEvent(context, &event), EAGAIN);
  ASSERT_EQ(fcntl(context->async_fd, F_SETFL, flags), 0);
}

// A CQ's ring grows with what it holds (a 4 M-entry mlx5 CQ is not 300 MB up front): the
// completions keep their order across the growth, with the ring's head moved by a poll, and the
// CQ still overflows at its cqe, not at the ring's size.
TEST_F(CqTest, ManyCompletions_RingGrows_OrderKept_OverflowAtCqe) {
  ConnectionOptions options;
  options.cqe = 511;  // mlx5: 2^9 - 1, above the ring's first size
  options.max_send_wr = 1024;
  Connect(options);
  for (uint64_t wr_id = 1; wr_id <= 100; ++wr_id) ASSERT_EQ(Write(wr_id), 0);
  std::vector<ibv_wc> wc(600);
  int polled = -1;
  ASSERT_EQ(backend_->IbvPollCq(conn_.active.send_cq, 50, wc.data(), &polled), 0);
  ASSERT_EQ(polled, 50);
  for (uint64_t wr_id = 101; wr_id <= 561; ++wr_id) ASSERT_EQ(Write(wr_id), 0);  // 511 held

  ASSERT_EQ(backend_->IbvPollCq(conn_.active.send_cq, 600, wc.data(), &polled), 0);

  ASSERT_EQ(polled, 511);
  for (int i = 0; i < polled; ++i) ASSERT_EQ(wc[i].wr_id, 51u + i) << i;
  EXPECT_EQ(conn_.active.qp()->state, IBV_QPS_RTS);
  for (uint64_t wr_id = 1; wr_id <= 512; ++wr_id) ASSERT_EQ(Write(wr_id), 0);  // 512 > 511
  ASSERT_EQ(backend_->IbvPollCq(conn_.active.send_cq, 600, wc.data(), &polled), 0);
  EXPECT_EQ(polled, 511);
  EXPECT_EQ(conn_.active.qp()->state, IBV_QPS_ERR);
}

TEST_F(CqTest, ReqNotify_NoChannel_Einval) {
  ConnectionOptions options;
  options.comp_channel = false;
  Connect(options);

  EXPECT_EQ(backend_->IbvReqNotifyCq(conn_.active.send_cq, 0), EINVAL);
}

TEST_F(CqTest, ArmedCq_CompletionMakesFdReadable_GetReturnsCqAndContext) {
  Connect();
  const int fd = conn_.active.comp_channel->fd;
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn_.active.send_cq, 0), 0);
  EXPECT_FALSE(FdReadable(fd));

  ASSERT_EQ(Write(1), 0);

  EXPECT_TRUE(FdReadable(fd));
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  ASSERT_EQ(backend_->IbvGetCqEvent(conn_.active.comp_channel, &cq, &context), 0);
  EXPECT_EQ(cq, conn_.active.send_cq);
  EXPECT_EQ(context, &conn_.active);  // the cq_context given at creation
  EXPECT_FALSE(FdReadable(fd));
  backend_->IbvAckCqEvents(cq, 1);
}

TEST_F(CqTest, UnarmedCq_CompletionSendsNothing) {
  Connect();

  ASSERT_EQ(Write(1), 0);

  EXPECT_FALSE(FdReadable(conn_.active.comp_channel->fd));
}

TEST_F(CqTest, Arming_DoesNotFireForCompletionsAlreadyThere) {
  Connect();
  ASSERT_EQ(Write(1), 0);
  ExecutePosted(backend_, conn_.active.send_cq);

  ASSERT_EQ(backend_->IbvReqNotifyCq(conn_.active.send_cq, 0), 0);

  EXPECT_FALSE(FdReadable(conn_.active.comp_channel->fd));
}

TEST_F(CqTest, OneEventPerArm) {
  Connect();
  const int fd = conn_.active.comp_channel->fd;
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn_.active.send_cq, 0), 0);
  ASSERT_EQ(Write(1), 0);
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  ASSERT_EQ(backend_->IbvGetCqEvent(conn_.active.comp_channel, &cq, &context), 0);
  backend_->IbvAckCqEvents(cq, 1);

  ASSERT_EQ(Write(2), 0);  // disarmed by the first completion
  EXPECT_FALSE(FdReadable(fd));

  ASSERT_EQ(backend_->IbvReqNotifyCq(conn_.active.send_cq, 0), 0);
  ASSERT_EQ(Write(3), 0);
  EXPECT_TRUE(FdReadable(fd));
  ASSERT_EQ(backend_->IbvGetCqEvent(conn_.active.comp_channel, &cq, &context), 0);
  backend_->IbvAckCqEvents(cq, 1);
}

TEST_F(CqTest, SolicitedOnly_FiresOnErrorCompletion) {
  Connect();
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn_.active.send_cq, /*solicited_only=*/1), 0);
  ASSERT_EQ(Write(1), 0);  // a success, not solicited
  EXPECT_FALSE(FdReadable(conn_.active.comp_channel->fd));

  ibv_sge sge = local_->Sge(0, 8);
  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 2, &sge, 1, remote_->addr(), 0xdead), 0);
  // An unexpected error kicks no waiter (cq.h, Kick): it comes at the next poll point.
  ExecutePosted(backend_, conn_.active.send_cq);

  EXPECT_TRUE(FdReadable(conn_.active.comp_channel->fd));
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  ASSERT_EQ(backend_->IbvGetCqEvent(conn_.active.comp_channel, &cq, &context), 0);
  backend_->IbvAckCqEvents(cq, 1);
}

TEST_F(CqTest, GetCqEvent_NonBlockingFdAndNoEvent_Eagain) {
  Connect();
  const int fd = conn_.active.comp_channel->fd;
  ASSERT_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  ibv_cq* cq = nullptr;
  void* context = nullptr;

  EXPECT_EQ(backend_->IbvGetCqEvent(conn_.active.comp_channel, &cq, &context), EAGAIN);
  EXPECT_EQ(cq, nullptr);
}

TEST_F(CqTest, GetCqEvent_Blocks_UntilArmedCqGetsCompletion) {
  Connect();
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn_.active.send_cq, 0), 0);
  absl::Notification got;
  ibv_cq* cq = nullptr;
  int err = -100;
  std::thread waiter([&] {
    void* context = nullptr;
    err = backend_->IbvGetCqEvent(conn_.active.comp_channel, &cq, &context);
    got.Notify();
  });

  ASSERT_EQ(Write(1), 0);

  // A bound on liveness, not a timing assertion.
  ASSERT_TRUE(got.WaitForNotificationWithTimeout(absl::Seconds(60)));
  waiter.join();
  EXPECT_EQ(err, 0);
  EXPECT_EQ(cq, conn_.active.send_cq);
  backend_->IbvAckCqEvents(cq, 1);
}

TEST_F(CqTest, DestroyCq_UnackedEvents_Ebusy_ThenOkAfterAck) {
  Connect();
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn_.active.send_cq, 0), 0);
  ASSERT_EQ(Write(1), 0);
  ibv_cq* event_cq = nullptr;
  void* context = nullptr;
  ASSERT_EQ(backend_->IbvGetCqEvent(conn_.active.comp_channel, &event_cq, &context), 0);
  backend_->RdmaDestroyQp(conn_.active.id);  // no QP keeps the CQ busy any more

  EXPECT_EQ(backend_->IbvDestroyCq(event_cq), EBUSY);  // one event got, none acked
  backend_->IbvAckCqEvents(event_cq, 1);
  EXPECT_EQ(backend_->IbvDestroyCq(event_cq), 0);
  conn_.active.send_cq = conn_.active.recv_cq = nullptr;  // destroyed here
}

TEST_F(CqTest, DestroyCq_UsedByQp_Ebusy) {
  Connect();

  EXPECT_EQ(backend_->IbvDestroyCq(conn_.active.send_cq), EBUSY);
}

}  // namespace
}  // namespace softrpma::sim::testing
