// alloc_failure.h: ScopedAllocFailure makes allocations through simverbs/alloc.h fail while it
// lives: all of them, or only the n-th (1-based) one. testonly; one at a time.

#ifndef SOFTRPMA_API_TESTING_ALLOC_FAILURE_H_
#define SOFTRPMA_API_TESTING_ALLOC_FAILURE_H_

#include <atomic>

#include "simverbs/alloc.h"

namespace softrpma::testing {

class ScopedAllocFailure final {
 public:
  // fail_nth == 0: every allocation fails.
  explicit ScopedAllocFailure(int fail_nth = 0) {
    Nth().store(fail_nth);
    Count().store(0);
    previous_ = SetAllocFailHook(&Hook);
  }
  ScopedAllocFailure(const ScopedAllocFailure&) = delete;
  ScopedAllocFailure& operator=(const ScopedAllocFailure&) = delete;
  ~ScopedAllocFailure() { SetAllocFailHook(previous_); }

  // Allocations attempted so far.
  int count() const { return Count().load(); }

 private:
  static std::atomic<int>& Nth() {
    static std::atomic<int> nth{0};
    return nth;
  }
  static std::atomic<int>& Count() {
    static std::atomic<int> count{0};
    return count;
  }
  static bool Hook() {
    const int n = Count().fetch_add(1) + 1;
    return Nth().load() == 0 || Nth().load() == n;
  }

  AllocFailHook previous_;
};

}  // namespace softrpma::testing

#endif  // SOFTRPMA_API_TESTING_ALLOC_FAILURE_H_
