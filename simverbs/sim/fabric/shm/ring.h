// ring.h: THE SHARED-MEMORY CARRIER's ring. One direction of a fabric connection (host.h)
// between two processes of a host: a single-producer / single-consumer byte ring in a memfd
// that both processes map. The producer's process makes it and hands it over the connection's
// Unix socket (SCM_RIGHTS); from then on that direction's messages (wire.h: a header, then its
// body) are bytes in the ring instead of bytes in the socket, and a busy consumer finds them
// with a memory load, not a recv(2).
//
// THE MODEL
//   * Two counters, each written by one side only and growing for ever: `head` (bytes the
//     producer wrote), `tail` (bytes the consumer took). The bytes in [tail, head) are the
//     consumer's to read; the rest of the ring is the producer's to write.
//   * THE OTHER PROCESS IS UNTRUSTED, and so is every byte of the mapping (it may write any of
//     them at any time). Each side keeps its own counter privately and only publishes it: it
//     never reads it back from the mapping. The other side's counter is read once per call and
//     checked (the consumer: 0 <= head - tail <= capacity; the producer: tail never goes back
//     and never passes head); an impossible one is CORRUPTION, and the caller ends that
//     connection. Bytes are copied out of the ring before anything looks at them, so no check
//     is ever made on memory the peer can change afterwards. The memfd must come sealed
//     against shrinking and growing (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_SEAL) and with exactly
//     the size its capacity needs: a peer cannot make this process fault (SIGBUS) by
//     truncating the file under the mapping.
//   * DOORBELLS, ONLY FOR A SLEEPER. A consumer about to sleep ARMS the ring (Arm) and then
//     looks once more; a producer that has published bytes takes the arming (TakeBellRequest)
//     and only then rings (the caller writes one byte into the socket). A consumer that polls
//     does not arm, so a busy pair exchanges messages with no system call at all. The same
//     holds the other way for a producer waiting for room (WaitForRoom / TakeRoomRequest).
//     Each pair is a Dekker pair (sequentially consistent store, then load) so a sleeper and a
//     publisher can never both miss each other.
//
// Thread-safety: one thread at a time produces (the connection's send lock) and one at a time
// reads (its read lock); Empty and Arm may be called by any thread meanwhile.

#ifndef SOFTRPMA_SIMVERBS_SIM_FABRIC_SHM_RING_H_
#define SOFTRPMA_SIMVERBS_SIM_FABRIC_SHM_RING_H_

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace softrpma::sim::shm {

class Ring final {
 public:
  // Capacities are 2^kMinCapacityLog2 .. 2^kMaxCapacityLog2 bytes.
  static constexpr int kMinCapacityLog2 = 12;
  static constexpr int kMaxCapacityLog2 = 24;
  static constexpr int kDefaultCapacityLog2 = 18;  // 256 KiB per direction of a connection

  // Makes a ring of 2^capacity_log2 bytes in a new sealed memfd and maps it. *fd is the memfd
  // to hand over (the caller closes it). nullptr (and errno set) when the kernel refuses
  // (memfd_create, ftruncate, fcntl, mmap: EMFILE, ENOMEM, ...).
  static std::unique_ptr<Ring> Create(int capacity_log2, int* fd);
  // Maps the ring a peer handed over as `fd` (not closed here), announced as 2^capacity_log2
  // bytes. nullptr when it is not one: a capacity out of range, not a memfd, not sealed as the
  // model says, sealed against writes, or of another size.
  static std::unique_ptr<Ring> Attach(int fd, int capacity_log2);
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring();

  size_t capacity() const { return capacity_; }

  // PRODUCER. Copies the first bytes of `iov` (after skipping `skip` of them) that fit into the
  // ring and publishes them. Returns the bytes written (0: full), or -1 on corruption.
  ssize_t Write(const iovec* iov, int iovcnt, size_t skip);
  // After a Write: whether the consumer armed the ring (it sleeps); clears the request, so the
  // caller rings once.
  bool TakeBellRequest();
  // The producer found the ring full and will wait for a bell: asks for one, then looks again.
  // Returns true when there is room already (no bell will come for it; write now).
  bool WaitForRoom();

  // CONSUMER. Copies up to `want` bytes out of the ring and frees their room. Returns the
  // bytes read (0: empty), or -1 on corruption.
  ssize_t Read(void* into, size_t want);
  // Whether the ring holds no byte for the consumer (a memory load).
  bool Empty() const;
  // The consumer is about to sleep until a bell: asks for one, then looks again. Returns true
  // when the ring is still empty (a bell will come for the next byte); false: read now.
  bool Arm();
  // After a Read: whether the producer waits for room; clears the request.
  bool TakeRoomRequest();

  // THE PRODUCER'S WORDS: kWords 64-bit words beside the counters that the producer's process
  // publishes for the consumer's (what they mean is the caller's: nic/carrier_host.cc, the
  // requester push). The producer stores them, the consumer loads them; like every byte of the
  // mapping they are untrusted to the side that did not write them. REQUIRES: 0 <= i < kWords.
  static constexpr int kWords = 2;
  std::atomic<uint64_t>& word(int i);

 private:
  struct Shared;
  Ring(void* map, size_t map_bytes, size_t capacity, int fd);

  void* const map_;
  const size_t map_bytes_;
  const size_t capacity_;
  Shared* const shared_;
  uint8_t* const data_;
  // ThreadSanitizer's name for this ring's memory, the same for every mapping of it in the
  // process (nullptr when not built with it): see ring.cc.
  void* const sync_;
  uint64_t head_ = 0;       // producer: bytes written (private; published to shared_->head)
  uint64_t seen_tail_ = 0;  // producer: the consumer's tail as last read (never goes back)
  // consumer: bytes taken (private; published to shared_->tail). Atomic only because Empty
  // and Arm may look at it from a thread other than the one reading.
  std::atomic<uint64_t> tail_{0};
};

}  // namespace softrpma::sim::shm

#endif  // SOFTRPMA_SIMVERBS_SIM_FABRIC_SHM_RING_H_
