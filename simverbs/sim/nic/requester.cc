// requester.cc: THE REQUESTER. The progress step of a send queue: its WRs, from the head, are
// executed against the peer in this process (the local carrier: ExecuteLocked hands the WR to
// the responder under the link's lock, the short-circuit of the same path, as rxe's loopback
// is) or sent as requests over the link's Transport to the peer's NIC in another process
// (ProgressRemoteLocked), in order, when the scheduler says their time has come (sched.h).

#include "simverbs/sim/nic/qp.h"

#include <sys/uio.h>

#include <algorithm>

#include "simverbs/sim/nic/nic_internal.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace {

// The smallest message a remote link sends by cross-memory attach (wire::kFlagCma) when the
// peer can: below it, a system call to copy costs more than the bytes through the socket.
constexpr uint64_t kCmaMinBytes = 16 * 1024;

// Executes the WR at the head of qp's send queue against its peer in this process.
// REQUIRES: link->mu held; qp is RTS.
Outcome ExecuteLocked(SimLink* link, SimQp* qp, SendWqe& wqe)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  SimQp* peer = link->side[1 - qp->side];
  if (peer != nullptr) CheckOverflowLocked(peer);
  switch (ReadinessOf(peer)) {
    case Readiness::kNotYet:
      return kWait;
    case Readiness::kGone:
      return kRetryExceeded;
    case Readiness::kReady:
      break;
  }
  const Opcode& op = RowOf(wqe.opcode);
  PdReadLocks pd_locks(qp->pd, peer->pd);
  Segments local;
  if (!GatherLocal(qp, wqe, op.reads_local ? 0 : IBV_ACCESS_LOCAL_WRITE, &local)) {
    return Done(IBV_WC_LOC_PROT_ERR);
  }
  if (!wqe.posted_bytes.empty()) CheckRace(qp, wqe, local);
  Segments remote;
  const ibv_wc_status status =
      CheckTargetLocked(peer, op, wqe.rkey, wqe.remote_addr, local.total, &remote);
  if (status != IBV_WC_SUCCESS) return Done(status);
  if (!op.reads_local) {  // a READ: the target's bytes come back into the local SGEs
    Copy(remote, local);
    return Done(IBV_WC_SUCCESS, local.total);
  }
  const Delivery delivery{&qp->link, qp->qp.qp_num, wqe.solicited, op.with_imm, wqe.imm_data};
  return ApplyLocked(peer, op, delivery, LocalSource(local), remote);
}

}  // namespace

namespace nic_internal {

// THE PROGRESS STEP of one QP: executes its send queue from the head until it is empty, the
// head waits for a receive, or (asynchronous execution) the head's time has not come. Every WR
// executes here and nowhere else. The seeded scheduler (sched.h) acts on what this produces:
// each completion gets a seeded ready time from the QP's CompletionTimer and the CQ orders
// completions by it, so QPs sharing a CQ interleave as the seed says. A WR carrying a wc_status fault completes with that status without executing.
// REQUIRES: link->mu held.
void ProgressQpLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (link->remote != nullptr) return ProgressRemoteLocked(link, qp);
  CheckOverflowLocked(qp);
  while (qp->state == IBV_QPS_RTS && !qp->sq.empty()) {
    SendWqe& wqe = qp->sq.front();
    // Asynchronous execution: not before its post point, or a poll point after its post.
    if (wqe.release_at > link->post_points && wqe.post_seq > qp->released_seq) return;
    const Outcome outcome = wqe.forced_status != IBV_WC_SUCCESS ? Done(wqe.forced_status)
                                                                : ExecuteLocked(link, qp, wqe);
    if (outcome.wait) return;
    RetireHeadLocked(qp, outcome.status, outcome.byte_len, outcome.delay_ns);
  }
}

// The progress step of both QPs of a link, side 0 first; of a remote link, its local QP's and
// the peer's requests that wait for a receive.
void ProgressLinkLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (link->remote != nullptr) DrainIncomingLocked(link);
  for (SimQp* qp : link->side) {
    if (qp != nullptr) ProgressQpLocked(link, qp);
  }
}

// ---- The remote data path (qp.h, "Connections to another process") ----------------------

// Sends the WRs of qp's send queue not sent yet, in order, as requests. A WR that must fail
// without reaching the peer (a fault's status, a local protection error) stops the sending:
// it completes once every WR before it has its response.
void ProgressRemoteLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  CheckOverflowLocked(qp);
  if (link->peer_gone) {  // nothing answers: the head times out, the rest flushes
    if (qp->state == IBV_QPS_RTS && !qp->sq.empty()) {
      RetireHeadLocked(qp, IBV_WC_RETRY_EXC_ERR, 0, kRetryTimeoutNs);
    }
    return;
  }
  while (qp->state == IBV_QPS_RTS && qp->sq_sent < qp->sq.size()) {
    SendWqe& wqe = qp->sq.at(qp->sq_sent);
    // Asynchronous execution, as ProgressQpLocked: not before its post point, or a poll point
    // after its post (or the backstop, RunDeferredSends).
    if (wqe.release_at > link->post_points && wqe.post_seq > qp->released_seq) return;
    if (wqe.forced_status != IBV_WC_SUCCESS) {
      if (qp->sq_sent == 0) RetireHeadLocked(qp, wqe.forced_status, 0);
      return;
    }
    const Opcode& op = RowOf(wqe.opcode);
    const bool is_read = !op.reads_local;
    {
      PdReadLocks pd_lock(qp->pd, nullptr);
      Segments local;
      if (!GatherLocal(qp, wqe, is_read ? IBV_ACCESS_LOCAL_WRITE : 0, &local)) {
        wqe.forced_status = IBV_WC_LOC_PROT_ERR;
        continue;
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
      if (link->peer_reaches_us && !wqe.is_inline && wqe.opcode != IBV_WR_ATOMIC_WRITE &&
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
      link->remote->Send(header, iov, iovcnt);
    }
    MarkExecutedLocked(link, wqe);
    ++qp->sq_sent;
  }
}

}  // namespace nic_internal

}  // namespace softrpma::sim
