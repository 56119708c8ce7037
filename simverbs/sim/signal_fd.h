// signal_fd.h: SignalFd, the eventfd behind every pollable channel of the simulator
// (completion channels and rdma_cm event channels).
//
// The owner keeps its events in a queue under its own mutex and keeps the eventfd's counter at
// 1 while that queue is non-empty and 0 while it is empty (Raise on empty -> non-empty, Lower on
// non-empty -> empty, both under the owner's mutex), so poll()/epoll on fd() reports readable
// while an event is pending.
//
// THE BLOCKING WAIT of ibv_get_cq_event / rdma_get_cm_event is one read(2) of the eventfd
// (Wait), outside the owner's mutex: it sleeps until the counter is 1 and takes it (or fails
// with EAGAIN at once when the user made the fd O_NONBLOCK), after which the caller re-checks
// its queue; so a wake-up costs the waiter one system call, as a bare eventfd does. While a
// waiter sleeps, it owns the counter: Lower leaves the counter to it (it will take it, look at
// the queue and sleep again), and Raise writes only when the counter is 0. A waiter that finds
// more events than it takes raises the counter again for the next reader. Our own reads never
// block under the mutex: Lower reads only when the counter is 1 and no waiter could take it.
// These syscalls are made only on the event path, never when posting or polling a CQ.
//
// THE LOOKER'S OWN NEWS. A sleeper woken by one of its watches handles the news in its own
// thread and then looks at its queue (nic/cq.cc, cm/cm.cc). An event it queues meanwhile on
// the SignalFd it waits on (ScopedLooking), while no other thread sleeps on it, is raised
// without the write (DEFERRED): the looker takes it next, so the counter would go up and
// straight down again (two system calls per message for nothing). A deferred raise becomes a
// real one whenever anyone else raises, or the looker leaves events behind (Raise); Lower and
// Wake leave a deferred counter alone. Another thread that comes for an event in the meantime
// finds it in the queue (the owner looks there before it waits).

#ifndef SOFTRPMA_SIMVERBS_SIM_SIGNAL_FD_H_
#define SOFTRPMA_SIMVERBS_SIM_SIGNAL_FD_H_

#include <cerrno>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "simverbs/alloc.h"
#include "simverbs/mutex.h"

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

  // The queue became non-empty / empty. REQUIRES: the owner's mutex held.
  void Raise();
  void Lower();
  // Another event joined a queue that was not empty. A kernel event file wakes its pollers at
  // every event, so an edge-triggered epoll (UCX's async thread) is told again although the fd
  // was readable already: the counter goes up by one more (a read takes it whole; Lower still
  // empties it). With a waiter asleep the counter is left to it (it looks at the whole queue).
  // REQUIRES: the owner's mutex held.
  void Wake();

  // Sleeps until an event may be there (see the file comment): releases `mu` (the owner's
  // mutex, held on entry and on return) around one read(2) of the eventfd. Returns 0 (look at
  // the queue again), EAGAIN at once when the user set O_NONBLOCK on the fd, or the errno of
  // read(2). A pthread_cancel of the sleeper (read is a cancellation point) re-takes `mu` as
  // the thread unwinds, so the caller's lock guard finds it held.
  int Wait(softrpma::Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return Wait(mu, nullptr, 0, nullptr);
  }
  // As Wait, also watching the `count` descriptors `also` (readable, or ended), without ever
  // blocking in read(2): one poll(2) over the eventfd and them. When one of them is ready
  // first, *ready is its index; when the eventfd is, *ready is kRaised and the counter is LEFT
  // UP (another waiter may take it first, and a watcher must not then sleep in a read that
  // nothing it watches can end): the caller looks at its queue, and, finding nothing, waits
  // again without watching (that Wait takes the counter). So a sleeper can handle what arrives
  // for it itself (a completion channel's waiter and its connections to other processes: one
  // wake-up per message instead of the fabric thread's and then the waiter's). *ready is -1
  // when the counter was taken (no descriptors, or an O_NONBLOCK fd: as Wait).
  int Wait(softrpma::Mutex* mu, const int* also, int count, int* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // The most descriptors a Wait watches besides its own (the rest are left to their owners).
  static constexpr int kMaxAlso = 8;
  // Wait's *ready when its own counter woke a watching Wait (and was left up).
  static constexpr int kRaised = -2;

  // The threads sleeping in Wait now. REQUIRES: the owner's mutex held.
  int waiters() const { return waiters_; }

  // While one lives, the calling thread will look at the owner's queue of `signal` before it
  // sleeps again (THE LOOKER'S OWN NEWS). Nests (the innermost counts).
  class ScopedLooking final {
   public:
    explicit ScopedLooking(const SignalFd* signal);
    ~ScopedLooking();
    ScopedLooking(const ScopedLooking&) = delete;
    ScopedLooking& operator=(const ScopedLooking&) = delete;

   private:
    const SignalFd* previous_;
  };

 private:
  int fd_ = -1;
  // Guarded by the owner's mutex.
  bool raised_ = false;  // the counter is 1 (or a waiter has just taken it, or deferred_)
  bool deferred_ = false;  // raised without the write: the looker takes the event itself
  int waiters_ = 0;      // threads in Wait's read(2)
};

// Makes a pollable channel: a `Channel` (New<Channel>(args...)) whose members are `channel`, the
// verbs struct it stands for (ibv_comp_channel, rdma_event_channel), and `signal`, its SignalFd;
// opens the eventfd and sets channel.fd to it. Returns 0 with *out the verbs struct, or ENOMEM /
// the errno of eventfd(2) with nothing made.
template <typename Channel, typename Verbs, typename... Args>
int NewChannel(Verbs** out, Args&&... args) {
  Channel* made = New<Channel>(std::forward<Args>(args)...);
  if (made == nullptr) return ENOMEM;
  const int err = made->signal.Open();
  if (err != 0) {
    Delete(made);
    return err;
  }
  made->channel.fd = made->signal.fd();
  *out = &made->channel;
  return 0;
}

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_SIGNAL_FD_H_
