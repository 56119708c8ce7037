#include "simverbs/sim/fabric/fork_locks.h"

#include <pthread.h>

#include <atomic>

namespace softrpma::sim::fork_locks {
namespace {

constexpr int kRanks = static_cast<int>(Rank::kCount);

std::atomic<const Handlers*> g_handlers[kRanks];

// The handlers the current fork's prepare ran, for its parent and child handlers (a rank
// enrolled meanwhile has nothing to let go). glibc runs one fork's handlers at a time.
const Handlers* g_prepared[kRanks];

void Prepare() {
  for (int rank = 0; rank < kRanks; ++rank) {
    g_prepared[rank] = g_handlers[rank].load(std::memory_order_acquire);
    if (g_prepared[rank] != nullptr) g_prepared[rank]->prepare();
  }
}

void Parent() {
  for (int rank = kRanks - 1; rank >= 0; --rank) {
    if (g_prepared[rank] != nullptr) g_prepared[rank]->parent();
  }
}

void Child() {
  for (int rank = kRanks - 1; rank >= 0; --rank) {
    if (g_prepared[rank] != nullptr) g_prepared[rank]->child();
  }
}

}  // namespace

void Enrol(Rank rank, const Handlers* handlers) {
  static const bool registered = (pthread_atfork(&Prepare, &Parent, &Child), true);
  (void)registered;
  const Handlers* none = nullptr;
  g_handlers[static_cast<int>(rank)].compare_exchange_strong(none, handlers,
                                                              std::memory_order_acq_rel);
}

}  // namespace softrpma::sim::fork_locks
