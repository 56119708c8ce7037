#include "simverbs/sim/fabric/shm/ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <utility>

namespace softrpma::sim::shm {

// The mapping's first bytes; the data follows at kDataOffset. Each counter on a cache line of
// its own, so the producer's and the consumer's stores do not fight over one line.
struct Ring::Shared {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) std::atomic<uint32_t> consumer_armed;
  alignas(64) std::atomic<uint32_t> producer_waiting;
  alignas(64) std::atomic<uint64_t> words[Ring::kWords];
};

namespace {

constexpr size_t kDataOffset = 512;
static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "the counters are shared between processes: lock-free only");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared between processes");
constexpr unsigned kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

bool ValidLog2(int capacity_log2) {
  return capacity_log2 >= Ring::kMinCapacityLog2 && capacity_log2 <= Ring::kMaxCapacityLog2;
}

size_t MapBytes(int capacity_log2) { return kDataOffset + (size_t{1} << capacity_log2); }

// THREADSANITIZER AND TWO MAPPINGS. Both ends of a connection of a process with itself (the
// host transport inside one process, sched.h) map one ring at two addresses. The counters'
// release / acquire pairs order the bytes on the machine, but ThreadSanitizer knows memory by
// address, so it sees two unrelated atomics (and then reports the data the ring carried as
// raced). Each ring is given one name per process (its memfd's inode) to tell it about the
// same order.
#if defined(__SANITIZE_THREAD__)
#define SOFTRPMA_RING_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SOFTRPMA_RING_TSAN 1
#endif
#endif

#ifdef SOFTRPMA_RING_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

void* SyncName(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return nullptr;
  static std::mutex mu;
  static auto* names = new std::map<std::pair<dev_t, ino_t>, char*>();  // never freed
  std::lock_guard<std::mutex> lock(mu);
  char*& name = (*names)[{st.st_dev, st.st_ino}];
  if (name == nullptr) name = new char;
  return name;
}
void Acquire(void* sync) {
  if (sync != nullptr) __tsan_acquire(sync);
}
void Release(void* sync) {
  if (sync != nullptr) __tsan_release(sync);
}
#else
void* SyncName(int) { return nullptr; }
void Acquire(void*) {}
void Release(void*) {}
#endif

}  // namespace

Ring::Ring(void* map, size_t map_bytes, size_t capacity, int fd)
    : map_(map),
      map_bytes_(map_bytes),
      capacity_(capacity),
      shared_(static_cast<Shared*>(map)),
      data_(static_cast<uint8_t*>(map) + kDataOffset),
      sync_(SyncName(fd)) {
  static_assert(sizeof(Shared) <= kDataOffset, "the counters and words precede the data");
}

Ring::~Ring() { munmap(map_, map_bytes_); }

std::unique_ptr<Ring> Ring::Create(int capacity_log2, int* fd) {
  if (!ValidLog2(capacity_log2)) {
    errno = EINVAL;
    return nullptr;
  }
  const size_t bytes = MapBytes(capacity_log2);
  const int memfd = memfd_create("softrpma-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0) return nullptr;
  void* map = MAP_FAILED;
  if (ftruncate(memfd, static_cast<off_t>(bytes)) == 0 && fcntl(memfd, F_ADD_SEALS, kSeals) == 0) {
    map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  }
  if (map == MAP_FAILED) {
    const int err = errno;
    close(memfd);
    errno = err;
    return nullptr;
  }
  // A new memfd reads as zeros: both counters 0, nobody armed or waiting.
  std::unique_ptr<Ring> ring(
      new (std::nothrow) Ring(map, bytes, size_t{1} << capacity_log2, memfd));
  if (ring == nullptr) {
    munmap(map, bytes);
    close(memfd);
    errno = ENOMEM;
    return nullptr;
  }
  *fd = memfd;
  return ring;
}

std::unique_ptr<Ring> Ring::Attach(int fd, int capacity_log2) {
  if (!ValidLog2(capacity_log2)) return nullptr;
  const size_t bytes = MapBytes(capacity_log2);
  // F_GET_SEALS fails on anything but a memfd (or shmem): a pipe, a socket, a file.
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (static_cast<unsigned>(seals) & kSeals) != kSeals) return nullptr;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != static_cast<off_t>(bytes)) {
    return nullptr;
  }
  // A ring sealed against writes (F_SEAL_WRITE, F_SEAL_FUTURE_WRITE) cannot be mapped writable:
  // mmap refuses it here, never later.
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return nullptr;
  std::unique_ptr<Ring> ring(new (std::nothrow) Ring(map, bytes, size_t{1} << capacity_log2, fd));
  if (ring == nullptr) munmap(map, bytes);
  return ring;
}

ssize_t Ring::Write(const iovec* iov, int iovcnt, size_t skip) {
  const uint64_t tail = shared_->tail.load(std::memory_order_acquire);
  Acquire(sync_);
  // The consumer's counter: never back, never past what was written.
  if (tail - seen_tail_ > head_ - seen_tail_) return -1;
  seen_tail_ = tail;
  size_t room = capacity_ - static_cast<size_t>(head_ - tail);
  size_t written = 0;
  const size_t mask = capacity_ - 1;
  for (int i = 0; i < iovcnt && room > 0; ++i) {
    size_t length = iov[i].iov_len;
    const uint8_t* from = static_cast<const uint8_t*>(iov[i].iov_base);
    if (skip >= length) {
      skip -= length;
      continue;
    }
    from += skip;
    length -= skip;
    skip = 0;
    length = std::min(length, room);
    const size_t at = static_cast<size_t>(head_ + written) & mask;
    const size_t first = std::min(length, capacity_ - at);
    std::memcpy(data_ + at, from, first);
    if (first < length) std::memcpy(data_, from + first, length - first);
    written += length;
    room -= length;
  }
  if (written > 0) {
    head_ += written;
    Release(sync_);
    shared_->head.store(head_, std::memory_order_seq_cst);
  }
  return static_cast<ssize_t>(written);
}

bool Ring::TakeBellRequest() {
  return shared_->consumer_armed.load(std::memory_order_seq_cst) != 0 &&
         shared_->consumer_armed.exchange(0, std::memory_order_seq_cst) != 0;
}

bool Ring::WaitForRoom() {
  shared_->producer_waiting.store(1, std::memory_order_seq_cst);
  const uint64_t tail = shared_->tail.load(std::memory_order_seq_cst);
  // A corrupt counter is found by the Write that follows.
  return tail - seen_tail_ > head_ - seen_tail_ || head_ - tail < capacity_;
}

ssize_t Ring::Read(void* into, size_t want) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  const uint64_t head = shared_->head.load(std::memory_order_acquire);
  Acquire(sync_);
  const uint64_t available = head - tail;
  if (available > capacity_) return -1;
  const size_t length = std::min<uint64_t>(available, want);
  if (length == 0) return 0;
  const size_t at = static_cast<size_t>(tail) & (capacity_ - 1);
  const size_t first = std::min(length, capacity_ - at);
  std::memcpy(into, data_ + at, first);
  if (first < length) std::memcpy(static_cast<uint8_t*>(into) + first, data_, length - first);
  tail_.store(tail + length, std::memory_order_relaxed);
  Release(sync_);
  shared_->tail.store(tail + length, std::memory_order_seq_cst);
  return static_cast<ssize_t>(length);
}

bool Ring::Empty() const {
  return shared_->head.load(std::memory_order_acquire) == tail_.load(std::memory_order_relaxed);
}

bool Ring::Arm() {
  shared_->consumer_armed.store(1, std::memory_order_seq_cst);
  return shared_->head.load(std::memory_order_seq_cst) == tail_.load(std::memory_order_relaxed);
}

std::atomic<uint64_t>& Ring::word(int i) { return shared_->words[i]; }

bool Ring::TakeRoomRequest() {
  return shared_->producer_waiting.load(std::memory_order_seq_cst) != 0 &&
         shared_->producer_waiting.exchange(0, std::memory_order_seq_cst) != 0;
}

}  // namespace softrpma::sim::shm
