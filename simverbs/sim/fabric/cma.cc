#include "simverbs/sim/fabric/cma.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "simverbs/sim/fabric/detached_thread.h"
#include "simverbs/sim/fabric/fork_locks.h"

namespace softrpma::sim::cma {
namespace {

uint64_t NowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ULL + static_cast<uint64_t>(now.tv_nsec);
}

struct Job {
  Copy copy;
  DoneFn done;
  StuckFn on_stuck;
};

// What the watchdog sees of a worker.
struct WorkerState {
  uint64_t busy_since_ns = 0;  // 0: idle
  bool stuck = false;
  StuckFn on_stuck;
};

// The pool (std::mutex and condition variables: pthreads, which ThreadSanitizer understands).
// Its lock is a leaf: nothing else is taken while it is held, so Start may be called under the
// NIC's locks.
struct Pool {
  std::mutex mu;
  std::condition_variable work_cv;      // workers wait for jobs
  std::condition_variable watchdog_cv;  // the watchdog waits for a busy worker
  std::deque<Job> queue;
  std::deque<std::shared_ptr<WorkerState>> workers;  // live ones (not written off)
  int idle = 0;
  int stuck = 0;
  bool watchdog = false;
  // The watchdog looks again within its period on its own (a worker is busy): a worker that
  // starts a copy need not wake it.
  bool watching = false;
};

// Set on a worker while its `done` runs, when the worker goes back to the queue afterwards:
// the first copy that `done` starts is left in the queue for this worker to take, instead of
// waking another one (a thread's wake-up costs as much as copying tens of KiB).
thread_local Pool* t_takes_next = nullptr;

// Workers run `done` under it (shared) and a fork takes it (exclusive) before the pool's lock:
// a child is never a copy of a worker half-way through `done` (which takes the NIC's locks and
// allocates). Never held during a copy, so a stuck copy never holds up a fork. A pointer: a
// fork child makes a lock of its own (see UnlockDoneInChild). Set before the pool is made.
std::shared_mutex* g_done_mu = nullptr;
Pool* g_pool = nullptr;  // guarded by g_pool_mu
std::mutex g_pool_mu;
// Copies started and not yet done (Pending). A fork child's are the parent's: it starts at 0.
std::atomic<int> g_pending{0};
// Requests whose bytes a peer copies, sent and not yet answered (PeerCopyStarted). A fork
// child starts at 0 too.
std::atomic<int> g_peer_copies{0};

// fork(): the locks are taken at their places in the lock order (host.h, LOCK ORDER; the
// fabric's work lock before them, its state lock after them), by fork_locks.h's one handler.
void LockDoneForFork() { g_done_mu->lock(); }
void UnlockDoneInParent() { g_done_mu->unlock(); }
// A read-write lock cannot be unlocked by the child: glibc tells a writer's unlock from a
// reader's by the thread id that write-locked it, and the child's thread has an id of its own,
// so the unlock was taken for a reader's and left the lock write-locked: the child's first
// copy then hung in its `done`. The child leaks the parent's lock and makes one of its own.
void UnlockDoneInChild() { g_done_mu = new std::shared_mutex; }

void LockPoolForFork() {
  g_pool_mu.lock();
  if (g_pool != nullptr) g_pool->mu.lock();
}
void UnlockPoolInParent() {
  if (g_pool != nullptr) g_pool->mu.unlock();
  g_pool_mu.unlock();
}
// The child has none of the parent's threads: it forgets the pool (leaked: a copy of the
// parent's, whose workers do not exist here) and starts its own on first use. (Plain mutexes,
// which the forking thread's copy may unlock.)
void UnlockPoolInChild() {
  if (g_pool != nullptr) g_pool->mu.unlock();
  g_pool = nullptr;
  g_pending.store(0, std::memory_order_relaxed);
  g_peer_copies.store(0, std::memory_order_relaxed);
  g_pool_mu.unlock();
}

const fork_locks::Handlers kDoneForkHandlers = {&LockDoneForFork, &UnlockDoneInParent,
                                                &UnlockDoneInChild};
const fork_locks::Handlers kPoolForkHandlers = {&LockPoolForFork, &UnlockPoolInParent,
                                                &UnlockPoolInChild};

Pool* ThePool() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (g_pool == nullptr) {
    static const bool enrolled = [] {
      g_done_mu = new std::shared_mutex;  // never destroyed: workers may use it at exit
      fork_locks::Enrol(fork_locks::Rank::kCopyDone, &kDoneForkHandlers);
      fork_locks::Enrol(fork_locks::Rank::kCopyPool, &kPoolForkHandlers);
      return true;
    }();
    (void)enrolled;
    g_pool = new Pool;
  }
  return g_pool;
}

bool DoCopy(const Copy& copy) {
  const size_t length = copy.local.size();
  if (length == 0) return true;
  iovec local{const_cast<uint8_t*>(copy.local.data()), length};
  const ssize_t n =
      copy.to_peer
          ? process_vm_writev(copy.pid, &local, 1, copy.remote.data(), copy.remote.size(), 0)
          : process_vm_readv(copy.pid, &local, 1, copy.remote.data(), copy.remote.size(), 0);
  return n == static_cast<ssize_t>(length);
}

struct WorkerArg {
  Pool* pool;
  std::shared_ptr<WorkerState> self;
};

void* RunWorker(void* arg) {
  Pool* const pool = static_cast<WorkerArg*>(arg)->pool;
  const std::shared_ptr<WorkerState> self = std::move(static_cast<WorkerArg*>(arg)->self);
  delete static_cast<WorkerArg*>(arg);
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(pool->mu);
      ++pool->idle;
      pool->work_cv.wait(lock, [&] { return !pool->queue.empty(); });
      --pool->idle;
      job = std::move(pool->queue.front());
      pool->queue.pop_front();
      self->busy_since_ns = NowNs();
      self->on_stuck = job.on_stuck;
      if (!pool->watching) pool->watchdog_cv.notify_one();
    }
    const bool ok = DoCopy(job.copy);  // no lock held: it may block as long as the peer likes
    bool written_off;
    {
      std::lock_guard<std::mutex> lock(pool->mu);
      written_off = self->stuck;
      self->busy_since_ns = 0;
      self->on_stuck = nullptr;
    }
    {
      std::shared_lock<std::shared_mutex> done_lock(*g_done_mu);
      t_takes_next = written_off ? nullptr : pool;
      job.done(ok && !written_off, std::move(job.copy.local));
      t_takes_next = nullptr;
    }
    g_pending.fetch_sub(1, std::memory_order_relaxed);
    if (written_off) {
      std::lock_guard<std::mutex> lock(pool->mu);
      --pool->stuck;
      return nullptr;  // replaced when it was written off
    }
  }
}

// Starts a worker. REQUIRES: pool->mu held.
void SpawnWorkerLocked(Pool* pool);

void* RunWatchdog(void* arg) {
  auto* pool = static_cast<Pool*>(arg);
  std::unique_lock<std::mutex> lock(pool->mu);
  while (true) {
    bool any_busy = false;
    const uint64_t now = NowNs();
    for (auto it = pool->workers.begin(); it != pool->workers.end();) {
      WorkerState& worker = **it;
      if (worker.busy_since_ns == 0) {
        ++it;
        continue;
      }
      if (now - worker.busy_since_ns < kTimeoutNs) {
        any_busy = true;
        ++it;
        continue;
      }
      // Stuck: written off (it ends when its system call returns) and replaced.
      worker.stuck = true;
      ++pool->stuck;
      StuckFn on_stuck = std::move(worker.on_stuck);
      worker.on_stuck = nullptr;
      it = pool->workers.erase(it);
      if (!pool->queue.empty() && pool->idle == 0) SpawnWorkerLocked(pool);
      if (on_stuck) on_stuck();  // must not block (it shuts a socket down)
    }
    pool->watching = any_busy;
    if (any_busy) {
      pool->watchdog_cv.wait_for(lock, std::chrono::milliseconds(250));
    } else {
      pool->watchdog_cv.wait(lock);
    }
  }
}

// A thread that takes no signals (the application's handlers run on its own threads).
bool StartThread(void* (*run)(void*), void* arg) { return StartDetachedThread(run, arg) == 0; }

void SpawnWorkerLocked(Pool* pool) {
  auto* arg = new WorkerArg{pool, std::make_shared<WorkerState>()};
  pool->workers.push_back(arg->self);
  if (!StartThread(&RunWorker, arg)) {
    pool->workers.pop_back();
    delete arg;
  }
}

}  // namespace

bool Start(Copy copy, DoneFn done, StuckFn on_stuck) {
  if (copy.pid <= 0 || copy.pid == getpid()) return false;
  uint64_t sum = 0;
  for (const iovec& segment : copy.remote) sum += segment.iov_len;
  if (sum != copy.local.size()) return false;
  Pool* pool = ThePool();
  std::lock_guard<std::mutex> lock(pool->mu);
  if (pool->stuck >= kMaxStuck) return false;
  if (!pool->watchdog) pool->watchdog = StartThread(&RunWatchdog, pool);
  if (!pool->watchdog) return false;
  // Called from a worker's `done`: that worker takes the first copy it starts.
  const bool taken = t_takes_next == pool;
  t_takes_next = nullptr;
  if (!taken && pool->idle <= static_cast<int>(pool->queue.size()) &&
      static_cast<int>(pool->workers.size()) < kMaxWorkers) {
    SpawnWorkerLocked(pool);
  }
  if (pool->workers.empty()) return false;  // no thread could be made
  pool->queue.push_back(Job{std::move(copy), std::move(done), std::move(on_stuck)});
  g_pending.fetch_add(1, std::memory_order_relaxed);
  if (!taken) pool->work_cv.notify_one();
  return true;
}

bool Pending() {
  return g_pending.load(std::memory_order_relaxed) > 0 ||
         g_peer_copies.load(std::memory_order_relaxed) > 0;
}

int IdleWorkersForTest() {
  Pool* pool = ThePool();
  std::lock_guard<std::mutex> lock(pool->mu);
  return pool->idle;
}

void PeerCopyStarted() { g_peer_copies.fetch_add(1, std::memory_order_relaxed); }

void PeerCopyEnded() {
  int count = g_peer_copies.load(std::memory_order_relaxed);
  while (count > 0 &&
         !g_peer_copies.compare_exchange_weak(count, count - 1, std::memory_order_relaxed)) {
  }
}

}  // namespace softrpma::sim::cma
