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
#include "simverbs/sim/nic/carrier.h"
#include "simverbs/sim/nic/nic_internal.h"
#include "simverbs/sim/nic/qp.h"

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

class Host final : public LinkCarrier {
 public:
  const char* name() const override { return "host"; }
  bool InProcess() const override { return false; }

  // Sends the WR as a request; a WR whose local memory fails the checks is not sent and fails
  // (the requester completes it once every WR before it has its response).
  bool CarryLocked(SimLink* link, SimQp* qp, SendWqe& wqe) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
    const Opcode& op = RowOf(wqe.opcode);
    const bool is_read = !op.reads_local;
    {
      PdReadLocks pd_lock(qp->pd, nullptr);
      Segments local;
      if (!GatherLocal(qp, wqe, is_read ? IBV_ACCESS_LOCAL_WRITE : 0, &local)) {
        wqe.forced_status = IBV_WC_LOC_PROT_ERR;
        return true;
      }
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

const LinkCarrier& HostCarrier() {
  static const Host carrier;
  return carrier;
}

}  // namespace softrpma::sim
