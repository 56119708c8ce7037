#include "tests/conformance/testing/munmap_counter.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace softrpma::conformance {
namespace {

std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_calls{0};

using MunmapFunction = int (*)(void*, size_t);

// The next munmap after ours (libc's, or a sanitizer's interceptor). Resolved without a
// function-local static: dlsym may itself unmap, and must not find a guard held.
MunmapFunction NextMunmap() {
  static std::atomic<MunmapFunction> next{nullptr};
  MunmapFunction function = next.load(std::memory_order_acquire);
  if (function == nullptr) {
    function = reinterpret_cast<MunmapFunction>(dlsym(RTLD_NEXT, "munmap"));
    if (function != nullptr) next.store(function, std::memory_order_release);
  }
  return function;
}

}  // namespace

MunmapCounter::MunmapCounter() {
  g_calls.store(0, std::memory_order_relaxed);
  g_counting.store(true, std::memory_order_release);
}

MunmapCounter::~MunmapCounter() { g_counting.store(false, std::memory_order_release); }

uint64_t MunmapCounter::calls() const { return g_calls.load(std::memory_order_acquire); }

}  // namespace softrpma::conformance

extern "C" int munmap(void* addr, size_t length) noexcept {
  using softrpma::conformance::g_calls;
  using softrpma::conformance::g_counting;
  if (g_counting.load(std::memory_order_acquire)) g_calls.fetch_add(1, std::memory_order_acq_rel);
  softrpma::conformance::MunmapFunction next = softrpma::conformance::NextMunmap();
  if (next == nullptr) return static_cast<int>(syscall(SYS_munmap, addr, length));
  return next(addr, length);
}
