// fork_locks.h: the process-wide locks a fork() holds, taken in the lock order of host.h.
//
// A fork must not copy a lock that another thread holds (the child would find it held forever),
// so the fabric (host.cc) and the copy pool (cma.cc) take their locks before fork() and let
// them go after it. Each used to register its own pthread_atfork handlers on first use, and
// glibc runs prepare handlers in the reverse order of registration: the order the locks were
// taken in depended on which module a process used first, and one of the two orders inverted
// the lock order (the fork held the pool's lock waiting for the fabric's work lock, which the
// fabric thread held waiting for the pool's lock inside a copy's start: both hung). Here one
// pthread_atfork registration runs every module's handlers BY RANK, the rank being the lock's
// place in host.h's LOCK ORDER: prepare handlers in ascending rank, the parent's and the child's
// in descending rank.
//
// Thread-safety: Enrol may be called from any thread, at any time (also while another thread
// forks: a fork whose prepare handlers did not run a rank's does not run its parent or child).

#ifndef SOFTRPMA_SIMVERBS_SIM_FABRIC_FORK_LOCKS_H_
#define SOFTRPMA_SIMVERBS_SIM_FABRIC_FORK_LOCKS_H_

namespace softrpma::sim::fork_locks {

// host.h, LOCK ORDER: the locks a fork takes, outermost first.
enum class Rank {
  kFabricWork = 0,  // host.cc's g_work_mu: the fabric thread's work
  kCopyDone,        // cma.cc's done lock: a copy's `done` running on a worker
  kCopyPool,        // cma.cc's pool locks: the pool pointer's, then the pool's own
  kFabricState,     // host.cc's g_mu: the fabric's sockets
  kCount,
};

struct Handlers {
  void (*prepare)();  // takes the rank's locks
  void (*parent)();   // lets them go in the parent
  void (*child)();    // in the child (one thread, the forking one's copy): makes them usable
};

// Has fork() run `handlers` at `rank` from now on. Once per rank: a second call for a rank
// that has handlers changes nothing. `handlers` must live as long as the process.
void Enrol(Rank rank, const Handlers* handlers);

}  // namespace softrpma::sim::fork_locks

#endif  // SOFTRPMA_SIMVERBS_SIM_FABRIC_FORK_LOCKS_H_
