// carrier_local.cc: THE LOCAL CARRIER (carrier.h). The peer QP is the link's other side, in this
// process: a WR executes against it under the link's lock, the requester handing it to the
// responder (responder.cc) directly, and its completion is made at once.

#include "simverbs/sim/nic/carrier.h"
#include "simverbs/sim/nic/nic_internal.h"
#include "simverbs/sim/nic/qp.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace {

// Executes `wqe`, the WR at the head of qp's send queue, against its peer in this process.
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
  if (FetchesAtomically(op)) {  // the word's former value comes back into the local 8 bytes
    uint64_t former = ExecuteFetchingAtomic(op, remote, wqe.compare_add, wqe.swap);
    Segments value;
    value.Add(reinterpret_cast<uint8_t*>(&former), sizeof(former));
    Copy(value, local);
    return Done(IBV_WC_SUCCESS, sizeof(former));
  }
  if (!op.reads_local) {  // a READ: the target's bytes come back into the local SGEs
    Copy(remote, local);
    return Done(IBV_WC_SUCCESS, local.total);
  }
  const Delivery delivery{&qp->link, qp->qp.qp_num, wqe.solicited, op.with_imm, wqe.imm_data,
                          /*grh=*/false};
  return ApplyLocked(peer, op, delivery, LocalSource(local), remote);
}

class Local final : public LinkCarrier {
 public:
  const char* name() const override { return "local"; }
  bool InProcess() const override { return true; }

  // The head of the queue (nothing is ever "sent" and left outstanding here: sq_sent stays 0).
  bool CarryLocked(SimLink* link, SimQp* qp, SendWqe& wqe) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
    const Outcome outcome = ExecuteLocked(link, qp, wqe);
    if (outcome.wait) return false;
    RetireHeadLocked(qp, outcome.status, outcome.byte_len, outcome.delay_ns);
    return true;
  }

  bool PeerGoneLocked(const SimLink* link) const override { return false; }

  void DrainLocked(SimLink* link) const override {}

  // No backstop: the link's WRs go at the program's own post, poll and progress points.
  Unsent UnsentLocked(SimLink* link, SimQp* qp) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
    return Unsent{link->unexecuted.load(std::memory_order_acquire) > 0, false};
  }

  // Both ends are known here: the send CQ of qp, and the peer's receive CQ.
  void KickLocked(SimLink* link, SimQp* qp) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
    SimQp* peer = link->side[1 - qp->side];
    // A post is a hot path: no dry run when neither CQ has a channel to wake (busy polling).
    if (qp->send_cq->channel == nullptr &&
        (peer == nullptr || peer->recv_cq->channel == nullptr)) {
      return;
    }
    const WouldComplete would = WouldCompleteLocked(link, qp);
    if (would.send) qp->send_cq->Kick(/*solicited=*/false);
    if (would.recv && peer != nullptr) peer->recv_cq->Kick(would.recv_solicited);
  }

  std::shared_ptr<Transport> WatchedLocked(SimLink* link) const override { return nullptr; }
};

}  // namespace

const LinkCarrier& LocalCarrier() {
  static const Local carrier;
  return carrier;
}

}  // namespace softrpma::sim
