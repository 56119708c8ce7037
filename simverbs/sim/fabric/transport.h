// transport.h: THE TRANSPORT SEAM of the simulated NIC's data path. What one link of a QP
// (qp.h, SimLink) needs from whatever carries its requests to the peer's NIC and brings the
// responses back, and what a CQ polled by a busy program needs to make that carrier progress.
//
// THE MODEL
//   * This is the wire's half of the seam; the NIC's half is the link's carrier (nic/carrier.h).
//     A link's peer QP is in this process or in another. In this process (the LOCAL carrier,
//     nic/carrier_local.cc) nothing goes over a wire: the requester hands a WR to the responder
//     under the link's lock, in the order and at the points the scheduler chose (sched.h). In
//     another process (the HOST carrier, nic/carrier_host.cc) the link holds a Transport: a
//     request is a wire.h message sent with Send, executed by the peer's NIC (its responder,
//     the same code: nic/responder.cc), and answered by exactly one response, in order, that
//     reaches the link's handler.
//   * The requester, the responder and the completer (nic/requester.cc, responder.cc,
//     completer.cc) are one code for every carrier: a carrier moves bytes, it never decides
//     what a request does. The opcode table (opcodes.h) says which request type a WR travels
//     as.
//   * Every byte a Transport delivers is the peer's, UNTRUSTED: wire::ValidateHeader runs before
//     a handler sees a header, and the responder checks every address, key and length against
//     this process's regions before memory is touched.
//   * Send never blocks; what the carrier could not hand over yet is counted (QueuedBytes), so a
//     responder can stop producing for a peer that does not read (kBacklogBytes).
//   * Implementations: host::Conn (host.h: two processes of a machine, a Unix socket for the
//     setup, the bells and the end, and the messages in shared-memory rings once both offered
//     one, shm/ring.h; served by the process's fabric thread). The next one is a new folder
//     behind this interface: TCP between machines with an iWARP-shaped wire (DESIGN.md).
//
// LOCKS: a Transport's methods take only the carrier's own locks, which come after every lock
// of the NIC (host.h, LOCK ORDER: Send, QueuedBytes, Close and Shutdown are callable under
// SimLink::mu); Progress and Settle run the carrier's handlers, which take the NIC's locks, so
// they are called with no NIC lock held.

#ifndef SOFTRPMA_SIMVERBS_SIM_FABRIC_TRANSPORT_H_
#define SOFTRPMA_SIMVERBS_SIM_FABRIC_TRANSPORT_H_

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "simverbs/sim/fabric/wire.h"

namespace softrpma::sim {

namespace shm {
class RegionTable;
}  // namespace shm

class Transport {
 public:
  // The backlog above which an owner should stop producing for a peer until the carrier says
  // it drained (host::Conn::Handler::OnDrained). Send itself never refuses a message.
  static constexpr size_t kBacklogBytes = size_t{16} << 20;

  // Sends one message: `header` (its body_len must be the bytes of `body`) and the body,
  // gathered from `body`. Never blocks. Returns 0; a carrier that is closed or broken drops the
  // message (its peer is gone or going, and the owner's handler is told).
  virtual int Send(const wire::Header& header, const iovec* body, int iovcnt) = 0;
  // The bytes sent that the carrier has not handed over yet.
  virtual size_t QueuedBytes() = 0;
  // Ends the carrier from this side: what was sent is still delivered, then the peer sees the
  // end. The owner's handler gets no further call.
  virtual void Close() = 0;
  // Ends the carrier as if the peer had gone (the owner's handler hears it as such). Takes no
  // lock and never blocks: callable under any lock.
  virtual void Shutdown() = 0;
  // Does the carrier's pending work in the calling thread (sends what is queued, handles what
  // arrived); returns at once when another thread is at it.
  virtual void Progress() = 0;
  // As Progress, but when it returns every message that had arrived when it was called has been
  // handled.
  virtual void Settle() = 0;
  // THE SLEEPER'S WATCH. A thread about to sleep until the carrier brings news for this side
  // (a completion channel's waiter, nic/cq.cc) calls Watch: it returns a descriptor that
  // becomes readable (or ends) when there is news, or -1 when there is none to watch (the
  // carrier is closed, broken, or a fork parent's). While a watch is on, the carrier leaves
  // what arrives to the watcher (which handles it with Serve: one wake-up per message, and no
  // race with another thread for it). Every Watch that returned a descriptor is ended by one
  // Unwatch, whatever happened in between (also when the sleeper is cancelled): the carrier
  // then handles what the watcher left. Never under a lock of the NIC.
  virtual int Watch() = 0;
  virtual void Unwatch() = 0;
  // As Progress, for a sleeper woken by its watch: handles what arrived in the calling thread,
  // without counting it as a busy poller (it goes back to sleep).
  virtual void Serve() = 0;

  // THE REQUESTER PUSH (nic/carrier_host.cc): a requester allowed to write its peer's memory
  // writes a plain RDMA WRITE into place itself when the peer published the target range
  // (shm/region_table.h) and its QP's grant. Carriers that cannot leave these as they are.
  struct PushWords {
    const shm::RegionTable* peer_table = nullptr;  // the peer's regions (read-only)
    // The peer's grant for its QP on this connection: (domain << 1) | 1 while it takes remote
    // writes, 0 otherwise. Untrusted: it directs writes into the peer's own memory only.
    const std::atomic<uint64_t>* peer_grant = nullptr;
    // This side's word, naming the region it writes into while it writes (FencePushes).
    std::atomic<uint64_t>* own_pushing = nullptr;
  };
  // The words of a carrier that can push to its peer now; false when it cannot.
  virtual bool GetPushWords(PushWords* words) {
    (void)words;
    return false;
  }
  // The target's half: publishes this side's grant for the peer (0: no pushes). Returns whether
  // the peer can see it (false: the carrier cannot carry pushes).
  virtual bool Grant(uint64_t grant) {
    (void)grant;
    return false;
  }
  // Waits until the peer does not name `tag` (0: anything) as the region it pushes into, at
  // most kPushFenceNs (a peer that names it for longer is not waited for: see host.h).
  static constexpr uint64_t kPushFenceNs = uint64_t{1000} * 1000 * 1000;
  virtual void FencePushes(uint64_t tag) { (void)tag; }

 protected:
  // Never destroyed through this interface (its owners hold it by shared_ptr, whose deleter is
  // the carrier's own), so the destructor is trivial: no call of it to check under UBSan's vptr
  // check, which misreads every object when the process is out of descriptors (host_test's
  // AcceptTest exhausts them on purpose).
  ~Transport() = default;
};

// THE SLEEPER'S WATCHES: the carriers a thread about to sleep watches (Watch), up to kMax of
// them, each ended by one Unwatch when this goes, however the sleep ended (a cancelled sleeper
// unwinds through it). Destroy it after letting go of every lock of the NIC: Unwatch may hand
// the carrier back to the fabric thread. fds() and count() are what the sleeper's wait
// watches besides its own counter (SignalFd::Wait's `also`).
class SleeperWatches final {
 public:
  static constexpr int kMax = 8;
  SleeperWatches() = default;
  SleeperWatches(const SleeperWatches&) = delete;
  SleeperWatches& operator=(const SleeperWatches&) = delete;
  ~SleeperWatches() {
    for (int i = 0; i < count_; ++i) carriers_[i]->Unwatch();
  }
  // Watches `carrier`; false when there is nothing to watch on it, or kMax are watched.
  bool Add(std::shared_ptr<Transport> carrier) {
    if (carrier == nullptr || count_ == kMax) return false;
    const int fd = carrier->Watch();
    if (fd < 0) return false;
    carriers_[count_] = std::move(carrier);
    fds_[count_++] = fd;
    return true;
  }
  const int* fds() const { return fds_; }
  int count() const { return count_; }
  // The sleeper was woken by watch `index` (another value: by something else): it handles
  // what arrived on that carrier (Serve). With no lock of the NIC held.
  void Serve(int index) {
    if (index >= 0 && index < count_) carriers_[index]->Serve();
  }

 private:
  std::shared_ptr<Transport> carriers_[kMax];
  int fds_[kMax] = {};
  int count_ = 0;
};

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_FABRIC_TRANSPORT_H_
