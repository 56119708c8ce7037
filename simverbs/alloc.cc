#include "simverbs/alloc.h"

namespace softrpma {
namespace {
std::atomic<AllocFailHook> g_alloc_fail_hook{nullptr};
}  // namespace

AllocFailHook SetAllocFailHook(AllocFailHook hook) { return g_alloc_fail_hook.exchange(hook); }

bool AllocShouldFail() {
  AllocFailHook hook = g_alloc_fail_hook.load(std::memory_order_acquire);
  return hook != nullptr && hook();
}

}  // namespace softrpma
