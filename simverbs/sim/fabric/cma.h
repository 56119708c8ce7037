// cma.h: cross-memory-attach copies (process_vm_readv / process_vm_writev) between this process
// and a peer process, run off the fabric thread.
//
// THE MODEL
//   * A responder that serves a kFlagCma request (wire.h) copies between a buffer of its own (a
//     bounce buffer: the request's data on its way into a registered region, or a read's data on
//     its way out of one) and the memory the requester described in ITS address space. The
//     copy is a system call that a hostile peer can make block for as long as it likes (a page
//     of its own under userfaultfd, or swapped out over a dead NFS mount): it never runs on the
//     fabric thread, which serves every connection of the process, and never under a lock of
//     the NIC (a link's, a PD's): no region is touched while it runs, so deregistering one
//     never waits for a peer.
//   * Copies run on a small pool of worker threads (at most kMaxWorkers at once; more wait in
//     order). The first copy a `done` starts (the next request of a connection, served when
//     one ends) is left for that `done`'s worker to take when it returns, and a worker that
//     starts a copy wakes the watchdog only when it is not watching already: a stream of
//     copies costs no thread wake-up per copy. A copy still running kTimeoutNs after it
//     started is STUCK: its `on_stuck` runs (the owner ends that one connection), its worker
//     is written off and replaced, and its `done` runs whenever the system call returns, with
//     ok false. At most kMaxStuck written-off workers exist at once; past that Start refuses
//     (the owner answers the request with an error): a peer cannot make this process grow
//     threads without bound.
//   * Toward whom: the caller names the peer's pid, which must be the kernel's word for the
//     connection's other end (host::Conn::peer_pid, SO_PEERCRED), never a message's; this
//     process itself is refused (a copy "to a peer" that is this process would let the peer
//     name any of our memory).
//   * fork(): the child has no workers (threads do not survive fork) and starts a pool of its
//     own on first use; the parent's jobs are the parent's.
//
// Thread-safety: Start may be called from any thread, without a lock of the NIC's held.

#ifndef SOFTRPMA_SIMVERBS_SIM_FABRIC_CMA_H_
#define SOFTRPMA_SIMVERBS_SIM_FABRIC_CMA_H_

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "simverbs/sim/fabric/bytes.h"

namespace softrpma::sim::cma {

inline constexpr int kMaxWorkers = 4;
inline constexpr int kMaxStuck = 16;
inline constexpr uint64_t kTimeoutNs = uint64_t{10} * 1000 * 1000 * 1000;

// One copy between `local` (this process) and `remote` (segments in process `pid`).
struct Copy {
  pid_t pid = 0;
  bool to_peer = false;  // true: local -> peer (writev); false: peer -> local (readv)
  std::vector<iovec> remote;
  Bytes local;  // its size is the copy's length
};

// Called on a worker when the copy ended: `ok` when every byte was copied; `local` is the
// copy's buffer (the data read, for a copy from the peer). REQUIRES of the callee: it takes
// no lock that a thread may hold while it waits for a copy.
using DoneFn = std::function<void(bool ok, Bytes local)>;
// Called on the pool's watchdog when the copy is stuck (see THE MODEL). It must not block.
using StuckFn = std::function<void()>;

// Starts `copy`. Returns false (nothing is called) when it may not run: the pid is not
// positive or is this process's, the segments' lengths do not add up to local's size, or the
// pool has kMaxStuck stuck workers.
bool Start(Copy copy, DoneFn done, StuckFn on_stuck);

// Whether a copy this process's busy poller may be waiting for is under way: one of its own
// (started and not done), or one a peer makes of this process's memory (a request sent with
// kFlagCma and not answered yet: PeerCopyStarted). One relaxed load each: a busy poller that
// found nothing asks it to give its CPU to that copy (on a machine whose cores all spin, the
// copying worker, ours or the peer's, would wait for a time slice).
bool Pending();

// A request of this process whose bytes a peer copies by cross-memory attach was sent
// (PeerCopyStarted) and is answered or forgotten (PeerCopyEnded: once for each start; never below
// zero, so that a fork child that forgets its parent's requests stays at zero).
void PeerCopyStarted();
void PeerCopyEnded();

// For tests: the workers waiting for a copy now.
int IdleWorkersForTest();

}  // namespace softrpma::sim::cma

#endif  // SOFTRPMA_SIMVERBS_SIM_FABRIC_CMA_H_
