// region_table.h: THE REGION TABLE of the requester push (nic/carrier_host.cc). A process's
// remotely writable memory regions, published where the peers of its connections read them
// without asking: a requester that may write the target's memory (cross-memory attach) and finds
// the target range here writes a plain RDMA WRITE into place itself, as libfabric's shm provider
// does, instead of waiting for the target's NIC to be scheduled.
//
// THE MODEL
//   * ONE TABLE PER PROCESS (Mine), made on first use: kSlots fixed-size slots in a memfd that
//     this process maps writable and hands to each peer with its ring (host.h, THE SHARED-MEMORY
//     RINGS). The memfd is sealed against shrinking and growing (the peer's mapping can never
//     fault) and against FUTURE WRITES: only the mapping made here is writable; a peer's mmap of
//     it for writing, or a write(2) to it, is refused by the kernel. So a peer reads the table and
//     cannot change it.
//   * A SLOT holds one region: its key (the rkey), its domain (the owner's protection domain, a
//     number only the owner interprets) and its range. The slot of a key is key % kSlots; a
//     region whose slot is taken is not published (its writes go the ordinary way). Each slot is
//     a seqlock: the owner makes its sequence odd, changes the fields, makes it even again; a
//     reader that sees an odd sequence, or a different one after reading, found nothing. The
//     owner's writers claim a slot with a compare-and-swap of its key, so two threads publishing
//     never share one, and no lock is taken (a fork can never find one held).
//   * A PEER'S VIEW (Attach) is read-only and UNTRUSTED in the other direction too: a hostile
//     owner can publish anything, but what it publishes only ever directs writes into its own
//     memory, by a process the kernel lets write it anyway.
//   * fork(): the child does not write its parent's table (it is shared memory): its first
//     Mine() after the fork makes a table of its own, empty (the regions it inherited are the
//     parent's, whose writes go the ordinary way).
//
// Thread-safety: every method is thread-safe.

#ifndef SOFTRPMA_SIMVERBS_SIM_FABRIC_SHM_REGION_TABLE_H_
#define SOFTRPMA_SIMVERBS_SIM_FABRIC_SHM_REGION_TABLE_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace softrpma::sim::shm {

class RegionTable final {
 public:
  static constexpr uint32_t kSlots = 1024;

  // One published region, as Lookup finds it.
  struct Region {
    uint32_t key = 0;
    uint64_t domain = 0;
    uint64_t addr = 0;
    uint64_t length = 0;
  };

  // This process's table, made on the first call (and on the first call of a fork child);
  // nullptr when the kernel refuses the memfd (then nothing is published, and nothing is lost
  // but the speed). *fd (when not nullptr) is its memfd, this process's, not to be closed.
  static RegionTable* Mine(int* fd = nullptr);

  // Maps a peer's table handed over as `fd` (not closed here), read-only. nullptr when it is
  // not one: not a sealed memfd of the table's size.
  static std::unique_ptr<RegionTable> Attach(int fd);

  RegionTable(const RegionTable&) = delete;
  RegionTable& operator=(const RegionTable&) = delete;
  ~RegionTable();

  // OWNER. Publishes a region; false when its slot is taken (or key is 0, or length is 0).
  bool Publish(const Region& region);
  // Withdraws the region of `key` in `domain` that Publish published (nothing when it did not:
  // another domain's region of the same key stays). After it returns, no reader's Lookup that
  // STARTS later finds it; a reader that found it just before must be fenced by the caller
  // (host::FencePushesEverywhere).
  void Withdraw(uint32_t key, uint64_t domain);

  // READER. The region published under `key` now, when [addr, addr + length) lies inside it.
  bool Lookup(uint32_t key, uint64_t addr, uint64_t length, Region* region) const;

 private:
  struct Slot;
  RegionTable(void* map, int fd, pid_t owner);

  void* const map_;
  Slot* const slots_;
  const int fd_;      // the owner's memfd (-1 in a peer's view)
  const pid_t pid_;   // the owner's process (0 in a peer's view)
  const bool owner_;
};

}  // namespace softrpma::sim::shm

#endif  // SOFTRPMA_SIMVERBS_SIM_FABRIC_SHM_REGION_TABLE_H_
