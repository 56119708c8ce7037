// requester.cc: THE REQUESTER. The progress step of a send queue: its WRs, from the head, go to
// the peer's NIC in order, each when the scheduler says its time has come (sched.h), by the
// link's carrier (carrier.h): executed against the peer in this process (LOCAL,
// carrier_local.cc) or sent as requests over the link's Transport to the peer's NIC in
// another process (HOST, carrier_host.cc). What comes before the carrier is one code for both.

#include "simverbs/sim/nic/qp.h"

#include "simverbs/sim/nic/carrier.h"
#include "simverbs/sim/nic/nic_internal.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace nic_internal {

// THE PROGRESS STEP of one QP: its send queue, from the first WR not carried yet, until it is
// empty, the carrier says the WR waits (for a receive), or (asynchronous execution) the WR's
// time has not come. Every WR goes to the peer here and nowhere else. The seeded scheduler
// (sched.h) acts on what this produces: each completion gets a seeded ready time from the QP's
// CompletionTimer and the CQ orders completions by it, so QPs sharing a CQ interleave as the
// seed says. A WR carrying a wc_status fault (or a local protection error found while it was
// sent) completes with that status, without reaching the peer, once every WR before it has
// completed: an error, so the QP then goes to ERROR and the rest flushes.
// REQUIRES: link->mu held.
void ProgressQpLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  const LinkCarrier& carrier = *link->carrier;
  CheckOverflowLocked(qp);
  if (carrier.PeerGoneLocked(link)) {  // nothing answers: the head times out, the rest flushes
    if (qp->state == IBV_QPS_RTS && !qp->sq.empty()) {
      RetireHeadLocked(qp, IBV_WC_RETRY_EXC_ERR, 0, kRetryTimeoutNs);
    }
    return;
  }
  while (qp->state == IBV_QPS_RTS && qp->sq_sent < qp->sq.size()) {
    SendWqe& wqe = qp->sq.at(qp->sq_sent);
    // Asynchronous execution: not before its post point, or a poll point after its post (or,
    // on a link to another process, the backstop: RunDeferredSends).
    if (wqe.release_at > link->post_points && wqe.post_seq > qp->released_seq) return;
    if (wqe.forced_status != IBV_WC_SUCCESS) {
      if (qp->sq_sent == 0) RetireHeadLocked(qp, wqe.forced_status, 0, 0);
      return;
    }
    if (!carrier.CarryLocked(link, qp, wqe)) return;
  }
}

// The progress step of both QPs of a link, side 0 first, after the peer's requests that wait
// here (a link to another process has one side, and its peer's requests may wait for it).
void ProgressLinkLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  link->carrier->DrainLocked(link);
  for (SimQp* qp : link->side) {
    if (qp != nullptr) ProgressQpLocked(link, qp);
  }
}

}  // namespace nic_internal

}  // namespace softrpma::sim
