// SignalFd (signal_fd.h): the eventfd behind every pollable channel, and its watching Wait.

#include "simverbs/sim/signal_fd.h"

#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "simverbs/mutex.h"

namespace softrpma::sim {
namespace {

bool Readable(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN) != 0;
}

class SignalFdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(signal_.Open(), 0);
    ASSERT_EQ(pipe(pipe_), 0);
  }
  void TearDown() override {
    close(pipe_[0]);
    close(pipe_[1]);
  }

  softrpma::Mutex mu_;
  SignalFd signal_;
  int pipe_[2] = {-1, -1};
};

TEST_F(SignalFdTest, PlainWait_TakesTheCounter) {
  softrpma::MutexLock lock(&mu_);
  signal_.Raise();
  int ready = 7;
  EXPECT_EQ(signal_.Wait(&mu_, nullptr, 0, &ready), 0);
  EXPECT_EQ(ready, -1);
  EXPECT_FALSE(Readable(signal_.fd()));
}

// An edge-triggered epoll (UCX's async thread) is told of every event, as with a kernel event
// file: a second event while the fd is readable already wakes it again. Lower still empties it.
TEST_F(SignalFdTest, Wake_AnotherEventIsAnotherEdge_LowerEmptiesIt) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event watch{};
  watch.events = EPOLLIN | EPOLLET;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, signal_.fd(), &watch), 0);
  epoll_event got[1];
  softrpma::MutexLock lock(&mu_);
  signal_.Wake();  // nothing raised: no event, nothing written
  EXPECT_EQ(epoll_wait(ep, got, 1, 0), 0);
  signal_.Raise();
  EXPECT_EQ(epoll_wait(ep, got, 1, 0), 1);
  EXPECT_EQ(epoll_wait(ep, got, 1, 0), 0);  // edge-triggered: told once
  signal_.Wake();
  EXPECT_EQ(epoll_wait(ep, got, 1, 0), 1) << "the second event is a new edge";
  signal_.Lower();
  EXPECT_FALSE(Readable(signal_.fd()));
  close(ep);
}

// A watching Wait never reads: woken by its own counter it leaves it up for whoever takes it
// (a watcher asleep in a read that another waiter emptied first would leave what it watches
// unserved), and a plain Wait after it takes it.
TEST_F(SignalFdTest, WatchingWait_WokenByItsCounter_LeavesItUp) {
  softrpma::MutexLock lock(&mu_);
  signal_.Raise();
  int ready = 7;
  EXPECT_EQ(signal_.Wait(&mu_, &pipe_[0], 1, &ready), 0);
  EXPECT_EQ(ready, SignalFd::kRaised);
  EXPECT_TRUE(Readable(signal_.fd()));
  EXPECT_EQ(signal_.waiters(), 0);
  EXPECT_EQ(signal_.Wait(&mu_), 0);
  EXPECT_FALSE(Readable(signal_.fd()));
}

TEST_F(SignalFdTest, WatchingWait_WokenByAWatchedFd_SaysWhichAndLeavesTheCounter) {
  ASSERT_EQ(write(pipe_[1], "x", 1), 1);
  softrpma::MutexLock lock(&mu_);
  int ready = 7;
  const int also[2] = {pipe_[1], pipe_[0]};  // (a pipe's write end is never readable)
  EXPECT_EQ(signal_.Wait(&mu_, also, 2, &ready), 0);
  EXPECT_EQ(ready, 1);
  EXPECT_FALSE(Readable(signal_.fd()));
  // Both ready: the watched one's news first, the counter still up for the next look.
  signal_.Raise();
  EXPECT_EQ(signal_.Wait(&mu_, also, 2, &ready), 0);
  EXPECT_EQ(ready, 1);
  EXPECT_TRUE(Readable(signal_.fd()));
}

// THE LOOKER'S OWN NEWS: the thread that looks at the queue next raises without a write, and
// its Lower then has nothing to take; the counter never goes up (no readable fd in between).
TEST_F(SignalFdTest, LookersOwnRaise_NoWrite_LowerLeavesItDown) {
  softrpma::MutexLock lock(&mu_);
  {
    SignalFd::ScopedLooking looking(&signal_);
    signal_.Raise();
    signal_.Wake();  // (a second event: the looker takes the whole queue)
    EXPECT_FALSE(Readable(signal_.fd()));
  }
  signal_.Lower();
  EXPECT_FALSE(Readable(signal_.fd()));
  // Not deferred any more: a plain raise writes.
  signal_.Raise();
  EXPECT_TRUE(Readable(signal_.fd()));
}

// A deferred raise becomes a real one when the looker leaves events behind (its Raise after
// the look), when another thread raises, and before anyone sleeps on it.
TEST_F(SignalFdTest, DeferredRaise_BecomesRealForTheNextReader) {
  softrpma::MutexLock lock(&mu_);
  {
    SignalFd::ScopedLooking looking(&signal_);
    signal_.Raise();
  }
  EXPECT_FALSE(Readable(signal_.fd()));
  signal_.Raise();  // the looker took one event and left another
  EXPECT_TRUE(Readable(signal_.fd()));
  int ready = 7;
  EXPECT_EQ(signal_.Wait(&mu_, nullptr, 0, &ready), 0);  // takes it, does not block
  EXPECT_FALSE(Readable(signal_.fd()));

  SignalFd other;  // the looker looks at another channel: this one's raise writes
  ASSERT_EQ(other.Open(), 0);
  {
    SignalFd::ScopedLooking looking(&other);
    signal_.Raise();
  }
  EXPECT_TRUE(Readable(signal_.fd()));
  EXPECT_EQ(signal_.Wait(&mu_, nullptr, 0, &ready), 0);

  {
    SignalFd::ScopedLooking looking(&signal_);
    signal_.Raise();
  }
  // Nobody looked: a Wait must not sleep on an event that was never written.
  EXPECT_EQ(signal_.Wait(&mu_, nullptr, 0, &ready), 0);
  EXPECT_FALSE(Readable(signal_.fd()));
}

}  // namespace
}  // namespace softrpma::sim
