#include "simverbs/sim/fabric/shm/region_table.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <new>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1
#endif

namespace softrpma::sim::shm {

// One cache line. Every field an atomic: the peer reads them while the owner writes.
struct RegionTable::Slot {
  std::atomic<uint32_t> seq;  // odd while the owner changes the fields
  std::atomic<uint32_t> key;  // 0: free; claimed by compare-and-swap
  std::atomic<uint64_t> domain;
  std::atomic<uint64_t> addr;
  std::atomic<uint64_t> length;  // 0: nothing published
  uint64_t reserved[4];
};

namespace {

static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "shared between processes: lock-free only");
constexpr size_t kTableBytes = 64 * size_t{RegionTable::kSlots};
constexpr unsigned kPeerSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
constexpr unsigned kOwnerSeals = kPeerSeals | F_SEAL_FUTURE_WRITE;

std::atomic<RegionTable*> g_mine{nullptr};  // this process's (a fork child makes its own)

}  // namespace

RegionTable::RegionTable(void* map, int fd, pid_t owner)
    : map_(map), slots_(static_cast<Slot*>(map)), fd_(fd), pid_(owner), owner_(owner != 0) {
  static_assert(sizeof(Slot) == 64, "one slot, one cache line");
}

RegionTable::~RegionTable() {
  munmap(map_, kTableBytes);
  if (owner_) close(fd_);
}

RegionTable* RegionTable::Mine(int* fd) {
  const pid_t self = getpid();
  RegionTable* table = g_mine.load(std::memory_order_acquire);
  // Made here on first use, and again in a fork child: the inherited one is the parent's (it
  // stays mapped and open, unused, as the child's copy of the parent's memory).
  while (table == nullptr || table->pid_ != self) {
    const int memfd = memfd_create("softrpma-regions", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memfd < 0) return nullptr;
    void* map = MAP_FAILED;
    if (ftruncate(memfd, static_cast<off_t>(kTableBytes)) == 0) {
      map = mmap(nullptr, kTableBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    }
    // Sealed after the owner's mapping: F_SEAL_FUTURE_WRITE refuses every later writable one.
    if (map != MAP_FAILED && fcntl(memfd, F_ADD_SEALS, kOwnerSeals) != 0) {
      munmap(map, kTableBytes);
      map = MAP_FAILED;
    }
    if (map == MAP_FAILED) {
      close(memfd);
      return nullptr;
    }
    RegionTable* made = new (std::nothrow) RegionTable(map, memfd, self);
    if (made == nullptr) {
      munmap(map, kTableBytes);
      close(memfd);
      return nullptr;
    }
    // Two threads making it at once: the first one's stays (the loop then finds it).
    if (g_mine.compare_exchange_strong(table, made, std::memory_order_acq_rel)) {
      table = made;
    } else {
      delete made;
    }
  }
  if (fd != nullptr) *fd = table->fd_;
  return table;
}

std::unique_ptr<RegionTable> RegionTable::Attach(int fd) {
  // F_GET_SEALS fails on anything but a memfd (or shmem): a pipe, a socket, a file.
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (static_cast<unsigned>(seals) & kPeerSeals) != kPeerSeals) return nullptr;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size != static_cast<off_t>(kTableBytes)) {
    return nullptr;
  }
  void* map = mmap(nullptr, kTableBytes, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return nullptr;
  std::unique_ptr<RegionTable> table(new (std::nothrow) RegionTable(map, -1, /*owner=*/0));
  if (table == nullptr) munmap(map, kTableBytes);
  return table;
}

bool RegionTable::Publish(const Region& region) {
  if (!owner_ || region.key == 0 || region.length == 0) return false;
  Slot& slot = slots_[region.key % kSlots];
  uint32_t free_key = 0;
  if (!slot.key.compare_exchange_strong(free_key, region.key, std::memory_order_acq_rel)) {
    return false;
  }
  // Odd, then the fields, each a release store: a reader whose acquire load sees a new field
  // sees the odd sequence too, and refuses what it read.
  slot.seq.fetch_add(1, std::memory_order_seq_cst);
  slot.domain.store(region.domain, std::memory_order_release);
  slot.addr.store(region.addr, std::memory_order_release);
  slot.length.store(region.length, std::memory_order_release);
  slot.seq.fetch_add(1, std::memory_order_release);  // even: readable
  return true;
}

void RegionTable::Withdraw(uint32_t key, uint64_t domain) {
  if (!owner_ || key == 0) return;
  Slot& slot = slots_[key % kSlots];
  // Never published here (its slot was taken), or another domain's region of the same key.
  if (slot.key.load(std::memory_order_acquire) != key ||
      slot.domain.load(std::memory_order_relaxed) != domain) {
    return;
  }
  // Odd first (sequentially consistent: the push's fence pairs with it), and it stays so
  // until the fields say nothing.
  slot.seq.fetch_add(1, std::memory_order_seq_cst);
  slot.length.store(0, std::memory_order_release);
  slot.domain.store(0, std::memory_order_release);
  slot.addr.store(0, std::memory_order_release);
  slot.seq.fetch_add(1, std::memory_order_release);
  slot.key.store(0, std::memory_order_release);  // free for the next region of this slot
}

bool RegionTable::Lookup(uint32_t key, uint64_t addr, uint64_t length, Region* region) const {
  if (key == 0) return false;
  const Slot& slot = slots_[key % kSlots];
  const uint32_t before = slot.seq.load(std::memory_order_seq_cst);
  if ((before & 1) != 0) return false;
  Region found;
  // Acquire loads (where a fence would do, but ThreadSanitizer does not understand fences):
  // the sequence is read again after every field.
  found.key = slot.key.load(std::memory_order_acquire);
  found.domain = slot.domain.load(std::memory_order_acquire);
  found.addr = slot.addr.load(std::memory_order_acquire);
  found.length = slot.length.load(std::memory_order_acquire);
  if (slot.seq.load(std::memory_order_relaxed) != before) return false;
  // The range, overflow-safe (the peer's numbers are anything at all).
  if (found.key != key || found.length == 0 || addr < found.addr || length > found.length ||
      addr - found.addr > found.length - length) {
    return false;
  }
  *region = found;
  return true;
}

}  // namespace softrpma::sim::shm
