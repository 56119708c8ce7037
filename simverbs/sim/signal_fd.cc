#include "simverbs/sim/signal_fd.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace softrpma::sim {
namespace {

// The SignalFd whose queue this thread looks at next (SignalFd::ScopedLooking).
thread_local const SignalFd* t_looking = nullptr;

void Post(int fd) {
  const uint64_t one = 1;
  while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

}  // namespace

SignalFd::ScopedLooking::ScopedLooking(const SignalFd* signal) : previous_(t_looking) {
  t_looking = signal;
}

SignalFd::ScopedLooking::~ScopedLooking() { t_looking = previous_; }

SignalFd::~SignalFd() {
  if (fd_ >= 0) close(fd_);
}

int SignalFd::Open() {
  fd_ = eventfd(0, EFD_CLOEXEC);
  return fd_ < 0 ? errno : 0;
}

void SignalFd::Raise() {
  if (deferred_ && t_looking != this) {  // someone else's raise, or the looker left events
    deferred_ = false;
    Post(fd_);
    return;
  }
  if (raised_) return;  // the counter is 1 already, or a waiter just took it and will look
  raised_ = true;
  if (t_looking == this && waiters_ == 0) {
    deferred_ = true;  // the looker takes it next
    return;
  }
  Post(fd_);
}

void SignalFd::Wake() {
  // Nothing raised (Raise's), a waiter owns it, or the looker takes the whole queue.
  if (!raised_ || waiters_ > 0 || deferred_) return;
  Post(fd_);
}

void SignalFd::Lower() {
  if (deferred_) {  // the counter never went up
    deferred_ = false;
    raised_ = false;
    return;
  }
  // With a waiter asleep the counter is left to it: our read could race its read for the one
  // count and block here, under the owner's mutex.
  if (!raised_ || waiters_ > 0) return;
  uint64_t value = 0;
  while (read(fd_, &value, sizeof(value)) < 0 && errno == EINTR) {
  }
  raised_ = false;
}

int SignalFd::Wait(softrpma::Mutex* mu, const int* also, int count, int* ready) {
  if (ready != nullptr) *ready = -1;
  if (deferred_) {  // (a looker always takes its event first; never sleep on one all the same)
    deferred_ = false;
    Post(fd_);
  }
  ++waiters_;
  mu->Unlock();
  // Re-takes `mu` and leaves the waiters when the read ends, also when pthread_cancel ends it
  // (read(2) and poll(2) are cancellation points, and glibc cancels by unwinding the thread,
  // destructors run): the caller's lock guard then unlocks a mutex it holds, and no waiter is
  // left counted that would keep Lower from ever lowering the counter (the fd would stay
  // readable).
  struct Rejoin {
    SignalFd* self;
    softrpma::Mutex* mu;
    ~Rejoin() {
      mu->Lock();
      --self->waiters_;
    }
  };
  uint64_t value = 0;
  ssize_t n;
  int err;
  {
    Rejoin rejoin{this, mu};
    if (count > 0 && (fcntl(fd_, F_GETFL) & O_NONBLOCK) == 0) {
      pollfd fds[1 + kMaxAlso];
      const int watched = count < kMaxAlso ? count : kMaxAlso;
      fds[0] = pollfd{fd_, POLLIN, 0};
      for (int i = 0; i < watched; ++i) fds[1 + i] = pollfd{also[i], POLLIN | POLLRDHUP, 0};
      int got;
      while ((got = poll(fds, 1 + watched, -1)) < 0 && errno == EINTR) {
      }
      if (got < 0) return errno;
      *ready = kRaised;  // unless a watched one is ready too: its news first
      for (int i = 0; i < watched; ++i) {
        if (fds[1 + i].revents != 0) {
          *ready = i;
          break;
        }
      }
      return 0;
    }
    while ((n = read(fd_, &value, sizeof(value))) < 0 && errno == EINTR) {
    }
    err = n < 0 ? errno : 0;
  }
  if (n > 0) raised_ = false;  // taken: the caller raises it again if it leaves events queued
  return err == EWOULDBLOCK ? EAGAIN : err;
}

}  // namespace softrpma::sim
