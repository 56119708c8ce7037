// carrier_host.cc: THE HOST CARRIER (carrier.h). The peer QP is in another process: the link
// holds the Transport to it (SimLink::remote, fabric/transport.h), and a WR is sent as one
// wire.h request, in order, when its time comes. The peer's responder executes it and answers
// with one response, which completes it (completer.cc, HandleResponseLocked). The peer's own
// requests arrive on the same Transport (qp.cc, HandleRemoteMessage) and are served by the
// responder, or wait for a receive (responder.cc, the waiting requests).

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>

#include "simverbs/sim/fabric/cma.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/fabric/shm/region_table.h"
#include "simverbs/sim/nic/carrier.h"
#include "simverbs/sim/nic/nic_internal.h"
#include "simverbs/sim/nic/qp.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace {

// The smallest message a remote link sends by cross-memory attach (wire::kFlagCma) when the
// peer can. Below it the bytes go in the connection's messages: through the shared-memory
// ring the sender copies them in and the target out, each on its own core, where a
// cross-memory copy is two copies on the target's (into a bounce buffer, then the region) and
// a hand-off to a copy worker, which waits for a core while both programs spin. Half a ring
// (shm/ring.h: 256 KiB a direction). At 16 KiB, libfabric's rxm (16 KiB segments and a
// header) took every segment through a worker: 3.2 ms a 16 KiB fi_pingpong on 2 cores, 0.84
// ms at this size; 64 KiB writes, 16 in flight: 2.8-3.9 GB/s, 6.2-7.0 here (bench).
constexpr uint64_t kCmaMinBytes = 128 * 1024;

// Sends the WR as one request (wire.h) over the link's connection; its response completes it
// (completer.cc). REQUIRES: link->mu and qp's PD's reader lock held; `local` its checked
// local memory.
void SendRequestLocked(SimLink* link, SimQp* qp, SendWqe& wqe, const Opcode& op,
                       const Segments& local) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  const bool is_read = !op.reads_local;
  wire::Header header = wire::MakeHeader(op.wire);
  header.seq = qp->next_seq++;
  header.remote_addr = wqe.remote_addr;
  header.rkey = wqe.rkey;
  header.imm_data = wqe.imm_data;
  if (op.with_imm) header.flags |= wire::kFlagImm;
  if (wqe.solicited) header.flags |= wire::kFlagSolicited;
  iovec iov[kMaxSge];
  int iovcnt = 0;
  wire::CmaSegment segments[kMaxSge];
  wire::AtomicOperands operands{wqe.compare_add, wqe.swap};
  if (link->peer_reaches_us && !wqe.is_inline && !op.atomic &&
      local.total >= kCmaMinBytes) {
    // The peer copies: the request carries where the bytes are (or go, for a read).
    header.flags |= wire::kFlagCma;
    header.length = local.total;
    for (int i = 0; i < local.count; ++i) {
      segments[i] = wire::CmaSegment{reinterpret_cast<uintptr_t>(local.pieces[i].ptr),
                                     local.pieces[i].length};
    }
    header.body_len = static_cast<uint32_t>(local.count * sizeof(wire::CmaSegment));
    iov[0] = iovec{segments, header.body_len};
    iovcnt = 1;
  } else if (FetchesAtomically(op)) {
    // The operands travel; the word's former value comes back in a read response.
    header.body_len = op.wire == wire::Type::kCompareSwap ? sizeof(operands) : sizeof(uint64_t);
    iov[0] = iovec{&operands, header.body_len};
    iovcnt = 1;
    link->max_read_sent = std::max<uint64_t>(link->max_read_sent, sizeof(uint64_t));
  } else if (is_read) {
    header.length = local.total;
    link->max_read_sent = std::max<uint64_t>(link->max_read_sent, local.total);
  } else {
    header.body_len = static_cast<uint32_t>(local.total);
    iovcnt = ToIovecs(local, iov);
    // The bytes go on the wire now: what they are now is what the peer gets.
    if (!wqe.posted_bytes.empty()) CheckRace(qp, wqe, local);
  }
  wqe.seq = header.seq;
  wqe.sent_cma = (header.flags & wire::kFlagCma) != 0;
  if (wqe.sent_cma) cma::PeerCopyStarted();  // until it leaves the queue (ForgetPeerCopy)
  link->remote->Send(header, iov, iovcnt);
}

// The smallest write pushed with other WRs queued behind it (PushLocked): 64 KiB writes, 16 in
// flight, went from 2.2-3.1 GB/s through the ring to 7.8-10.9 GB/s pushed (bench, 2026-12-07).
constexpr uint64_t kPushAnyBytes = 16 * 1024;
// A push is written in pieces of this size, each checked against the grant and the table first
// (a 4 MiB piece takes about a millisecond, well inside a fence's bound of a second).
constexpr uint64_t kPushChunkBytes = uint64_t{4} << 20;

// THE REQUESTER PUSH (fabric/transport.h). A plain RDMA WRITE at the head of its send queue
// (nothing of its QP's is outstanding at the peer, so nothing it could overtake), alone there
// or of kPushAnyBytes or more, toward a peer
// this process proved at connect time it may write (cross-memory attach), whose QP grants pushes
// and whose region table holds the whole target range in that QP's domain, is written into
// place here with process_vm_writev and completes at once: the peer's responder would have
// executed it, since the grant and the table stand for exactly its checks (readiness and the
// QP's remote access; key, domain, range and access). Anything else goes as a request and the
// target decides, as does a push the kernel refuses (the range unmapped meanwhile): a WRITE
// written twice leaves the same bytes. While it writes, this side names the region in its
// pushing word; a deregistration at the target waits for the word to let go of it
// (host::FencePushesEverywhere), and a grant withdrawn waits for any (Conn::FencePushes). With
// the trace on, nothing is pushed: the trace stays the one of the ordinary path.
// Returns whether it was pushed. REQUIRES: link->mu held.
bool PushLocked(SimLink* link, SimQp* qp, const SendWqe& wqe, const Opcode& op,
                const Segments& local) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  // A small write goes through the ring (copied there without a system call) unless it is the
  // QP's only WR: nothing queued behind it, and no completion of the QP's unpolled (its slot,
  // sq_in_use, is freed when its completion is polled on the default profile), so that a
  // program streaming writes, which posts the next before it polls, streams them through the
  // ring: 64 B writes, 16 in flight, made 0.53-0.56 M/s so, 0.31 M/s pushed one by one.
  const bool alone = qp->sq.size() == 1 && qp->sq_in_use.load(std::memory_order_relaxed) <= 1;
  // On the fabric thread (the backstop) only where any process of this user may stop this one
  // anyway (ptrace, no Yama restriction): a target whose memory makes the copy block (a
  // FUSE-backed mapping) stalls every connection of the process there. Streams of large writes
  // leave many of their WRs to it: 1 MiB writes made 14-16 GB/s so, 8-12 GB/s without.
  if (op.wire != wire::Type::kWrite || op.with_imm || qp->sq_sent != 0 || local.total == 0 ||
      (local.total < kPushAnyBytes && !alone) || !link->we_reach_peer ||
      link->remote_pid <= 0 || TraceOn() || !host::PushesEnabled() ||
      (host::OnFabricThread() && !host::AnyPeerMayStopUs())) {
    return false;
  }
  Transport::PushWords words;
  if (!link->remote->GetPushWords(&words)) return false;
  // Named before the grant and the slot are read (a Dekker pair with the target's withdrawal:
  // one of the two sees the other).
  words.own_pushing->store(PushTag(wqe.rkey), std::memory_order_seq_cst);
  // In pieces of kPushChunkBytes, the grant and the slot read again before each, so that a
  // deregistration's fence waits for one piece at most, never for a whole large write.
  iovec iov[kMaxSge];
  ToIovecs(local, iov);
  int first = 0;
  uint64_t done = 0;
  bool pushed = true;
  while (pushed && done < local.total) {
    const uint64_t grant = words.peer_grant->load(std::memory_order_seq_cst);
    shm::RegionTable::Region region;
    if ((grant & 1) == 0 ||
        !words.peer_table->Lookup(wqe.rkey, wqe.remote_addr, local.total, &region) ||
        region.domain != grant >> 1) {
      pushed = false;
      break;
    }
    // This piece's source: whole iovecs from `first`, the last one cut to the piece's end.
    const uint64_t piece = std::min<uint64_t>(local.total - done, kPushChunkBytes);
    iovec cut[kMaxSge];
    int count = 0;
    uint64_t taken = 0;
    while (taken < piece) {
      cut[count] = iov[first + count];
      const uint64_t left = piece - taken;
      if (cut[count].iov_len > left) cut[count].iov_len = static_cast<size_t>(left);
      taken += cut[count].iov_len;
      ++count;
    }
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(wqe.remote_addr + done)),
                 static_cast<size_t>(piece)};
    pushed = process_vm_writev(link->remote_pid, cut, static_cast<unsigned long>(count), &remote,
                               1, 0) == static_cast<ssize_t>(piece);
    // Past the piece: the iovecs it used up, and what is left of the one it cut.
    for (int i = 0; i < count; ++i) {
      const size_t used = cut[i].iov_len;
      if (used == iov[first].iov_len) {
        ++first;
      } else {
        iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + used;
        iov[first].iov_len -= used;
      }
    }
    done += piece;
  }
  words.own_pushing->store(0, std::memory_order_release);
  // The bytes are in place: what they were at the copy is what the peer got.
  if (pushed && !wqe.posted_bytes.empty()) CheckRace(qp, wqe, local);
  return pushed;
}

class Host final : public LinkCarrier {
 public:
  const char* name() const override { return "host"; }
  bool InProcess() const override { return false; }

  // Pushes the WR (PushLocked) or sends it as a request; a WR whose local memory fails the
  // checks is neither and fails (the requester completes it once every WR before it has its
  // response).
  bool CarryLocked(SimLink* link, SimQp* qp, SendWqe& wqe) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
    const Opcode& op = RowOf(wqe.opcode);
    const bool is_read = !op.reads_local;
    bool pushed = false;
    {
      PdReadLocks pd_lock(qp->pd, nullptr);
      Segments local;
      if (!GatherLocal(qp, wqe, is_read ? IBV_ACCESS_LOCAL_WRITE : 0, &local)) {
        wqe.forced_status = IBV_WC_LOC_PROT_ERR;
        return true;
      }
      if (PushLocked(link, qp, wqe, op, local)) {
        pushed = true;
      } else {
        SendRequestLocked(link, qp, wqe, op, local);
      }
    }
    if (pushed) {
      RetireHeadLocked(qp, IBV_WC_SUCCESS, wqe.length);  // (it was the head)
      return true;
    }
    MarkExecutedLocked(link, wqe);
    ++qp->sq_sent;
    return true;
  }

  bool PeerGoneLocked(const SimLink* link) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
    return link->peer_gone;
  }

  void DrainLocked(SimLink* link) const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
    DrainIncomingLocked(link);
  }

  // The fabric thread's backstop sends what the program leaves unsent while it calls nothing,
  // except on a connection of this process to itself, which stands in for the LOCAL carrier.
  Unsent UnsentLocked(SimLink* link, SimQp* qp) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
    const bool any = qp->sq_sent < qp->sq.size();
    return Unsent{any, any && !SelfOnHostTransportLocked(link)};
  }

  // A connection of this process to itself (the host transport, cm.h): its send CQ, as the
  // in-process link's (the peer's receives are the other end's to know). Toward another
  // process no kick: the completion needs the peer's answer, whose arrival wakes the waiter.
  void KickLocked(SimLink* link, SimQp* qp) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
    if (!SelfOnHostTransportLocked(link) || qp->send_cq->channel == nullptr) return;
    for (size_t i = qp->sq_sent; i < qp->sq.size(); ++i) {
      const SendWqe& wqe = qp->sq.at(i);
      if (wqe.signaled || wqe.forced_status != IBV_WC_SUCCESS) {
        qp->send_cq->Kick(/*solicited=*/false);
        return;
      }
    }
  }

  std::shared_ptr<Transport> WatchedLocked(SimLink* link) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
    return link->peer_gone ? nullptr : link->remote;
  }
};

}  // namespace

namespace nic_internal {

void PublishGrantLocked(SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->link->mu) {
  SimLink* link = qp->link.get();
  if (link->remote == nullptr || qp->verbs) return;  // LOCAL, or a QP without the CM: no push
  const std::shared_ptr<Transport> serving = ServingConnLocked(link);
  if (serving == nullptr) return;
  // A traced target keeps every request on the ordinary path (its trace stays the same).
  const bool open = host::PushesEnabled() && !TraceOn() &&
                    ReadinessOf(qp) == Readiness::kReady &&
                    (qp->remote_access & IBV_ACCESS_REMOTE_WRITE) != 0;
  if (!open) {
    WithdrawGrantLocked(link);
    return;
  }
  serving->Grant((PushDomain(qp->pd) << 1) | 1);
}

void WithdrawGrantLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  const std::shared_ptr<Transport> serving = ServingConnLocked(link);
  if (serving == nullptr) return;
  serving->Grant(0);
  serving->FencePushes(0);
}

}  // namespace nic_internal

const LinkCarrier& HostCarrier() {
  static const Host carrier;
  return carrier;
}

}  // namespace softrpma::sim
