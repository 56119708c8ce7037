#include "simverbs/sim/signal_fd.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace softrpma::sim {

SignalFd::~SignalFd() {
  if (fd_ >= 0) close(fd_);
}

int SignalFd::Open() {
  fd_ = eventfd(0, EFD_CLOEXEC);
  return fd_ < 0 ? errno : 0;
}

void SignalFd::Raise() {
  const uint64_t one = 1;
  while (write(fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void SignalFd::Lower() {
  uint64_t value = 0;
  while (read(fd_, &value, sizeof(value)) < 0 && errno == EINTR) {
  }
}

int SignalFd::WaitReadable(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return errno;
  if ((flags & O_NONBLOCK) != 0) return EAGAIN;
  pollfd pfd{fd, POLLIN, 0};
  while (true) {
    const int ready = poll(&pfd, 1, -1);
    if (ready > 0) return 0;
    if (ready < 0 && errno != EINTR) return errno;
  }
}

}  // namespace softrpma::sim
