// signal_fd.h: SignalFd, the eventfd behind every pollable channel of the simulator
// (completion channels and rdma_cm event channels).
//
// The owner keeps its events in a queue under its own mutex and keeps the eventfd's counter at
// exactly 1 while that queue is non-empty and 0 while it is empty (Raise on empty -> non-empty,
// Lower on non-empty -> empty, both under the owner's mutex). So:
//   * poll()/epoll on fd() reports readable exactly while an event is pending;
//   * our own read(2) never blocks (it runs only when the counter is known to be 1), whatever
//     O_NONBLOCK setting the user gave the fd;
//   * the blocking wait of ibv_get_cq_event / rdma_get_cm_event is a poll(2) outside the
//     owner's mutex (WaitReadable), after which the caller re-checks its queue.
// These syscalls are made only on the event path, never when posting or polling a CQ.

#ifndef SOFTRPMA_SIMVERBS_SIM_SIGNAL_FD_H_
#define SOFTRPMA_SIMVERBS_SIM_SIGNAL_FD_H_

namespace softrpma::sim {

class SignalFd final {
 public:
  SignalFd() = default;
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;
  ~SignalFd();

  // Creates the eventfd (blocking mode, close-on-exec). Returns 0 or the errno of eventfd(2).
  int Open();
  int fd() const { return fd_; }

  // Counter 0 -> 1 / 1 -> 0. REQUIRES: the owner's mutex held, and the counter is 0 / 1.
  void Raise();
  void Lower();

  // Blocks until `fd` is readable. Returns 0, EAGAIN at once when the user set O_NONBLOCK on
  // the fd, or the errno of fcntl/poll. Call without holding the owner's mutex.
  static int WaitReadable(int fd);

 private:
  int fd_ = -1;
};

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_SIGNAL_FD_H_
