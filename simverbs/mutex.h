// mutex.h: the locks softrpma guards its shared state with.
//
// Mutex, SharedMutex and their scoped lockers have absl::Mutex's shape and its thread-safety
// annotations (ABSL_GUARDED_BY works with them), but sit on std::mutex / std::shared_mutex,
// that is on pthreads. The reason is ThreadSanitizer: Debian's libabsl is not built with it, so
// TSan cannot see absl::Mutex's synchronization and reports races that do not exist, while it
// understands pthread locks. `bazel test --config=tsan` is only meaningful because of this.
//
// Thread-safety: these are the primitives; every method is thread-safe in the usual sense.

#ifndef SOFTRPMA_SIMVERBS_MUTEX_H_
#define SOFTRPMA_SIMVERBS_MUTEX_H_

#include <mutex>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"

namespace softrpma {

// An exclusive lock. Not recursive.
class ABSL_LOCKABLE Mutex final {
 public:
  constexpr Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Takes the lock if it is free; true when taken.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // For the analysis only: states that the caller holds the lock.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  std::mutex mu_;
};

// A lock that many readers may hold at once, or one writer.
class ABSL_LOCKABLE SharedMutex final {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` exclusively for its lifetime.
template <typename M>
class ABSL_SCOPED_LOCKABLE BasicMutexLock final {
 public:
  explicit BasicMutexLock(M* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  BasicMutexLock(const BasicMutexLock&) = delete;
  BasicMutexLock& operator=(const BasicMutexLock&) = delete;
  ~BasicMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  M* const mu_;
};

using MutexLock = BasicMutexLock<Mutex>;
using WriterMutexLock = BasicMutexLock<SharedMutex>;

// Holds `mu` shared for its lifetime.
class ABSL_SCOPED_LOCKABLE ReaderMutexLock final {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }

 private:
  SharedMutex* const mu_;
};

}  // namespace softrpma

#endif  // SOFTRPMA_SIMVERBS_MUTEX_H_
