// post.cc: ibv_post_send and ibv_post_recv: each WR validated against the QP's limits and
// the device profile, queued, traced and (race detector on) watched; then a post point.

#include "simverbs/sim/nic/qp.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "simverbs/sim/nic/nic_internal.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace {

// The largest message (as on most RC NICs): byte_len must fit in a uint32_t.
constexpr uint64_t kMaxMessageSize = uint64_t{1} << 31;

// Checks one send WR against the QP's limits. `extended`: built by the extended post API,
// the only way an atomic write is posted (mlx5's ibv_post_send rejects the opcode). Returns 0,
// the profile's post_send_limit_errno for too many SGEs or too much inline data, or EINVAL;
// sets *length.
int ValidateSend(const SimQp* qp, const ibv_send_wr* wr, bool extended, uint64_t* length) {
  const Opcode* op = FindOpcode(wr->opcode);
  if (op == nullptr) return EINVAL;
  // siw has no immediate data: its provider maps both opcodes to "unsupported" and fails the
  // post with EINVAL (docs/DEVICES.md).
  if (op->with_imm && !ActiveProfile().immediate_data) {
    return EINVAL;
  }
  if (wr->opcode == IBV_WR_ATOMIC_WRITE && !extended) return EINVAL;
  // siw reports no atomics, and its provider maps both opcodes to "unsupported" (EINVAL).
  if (FetchesAtomically(*op) && ActiveProfile().atomic_cap == IBV_ATOMIC_NONE) return EINVAL;
  if (wr->num_sge < 0) return EINVAL;
  if (static_cast<uint32_t>(wr->num_sge) > qp->cap.max_send_sge) {
    return ActiveProfile().post_send_limit_errno;
  }
  if (wr->num_sge > 0 && wr->sg_list == nullptr) return EINVAL;
  uint64_t total = 0;
  for (int i = 0; i < wr->num_sge; ++i) total += wr->sg_list[i].length;
  if (total > kMaxMessageSize) return EINVAL;
  if ((wr->send_flags & IBV_SEND_INLINE) != 0) {
    if (wr->opcode == IBV_WR_RDMA_READ) return EINVAL;
    // An atomic write's 8 bytes always travel in the WQE (as with ibv_wr_atomic_write), so
    // they do not count against max_inline_data.
    if (total > qp->cap.max_inline_data && wr->opcode != IBV_WR_ATOMIC_WRITE) {
      return ActiveProfile().post_send_limit_errno;
    }
  }
  if (wr->opcode == IBV_WR_ATOMIC_WRITE && total != sizeof(uint64_t)) return EINVAL;
  if (FetchesAtomically(*op)) {
    // The former value comes back into the first 8 bytes of the SGEs (rxe's provider refuses
    // fewer with EINVAL); they are a destination, so never inline.
    if (total < sizeof(uint64_t) || (wr->send_flags & IBV_SEND_INLINE) != 0) return EINVAL;
    if (!extended && ActiveProfile().atomic_alignment_checked_at_post &&
        (wr->wr.atomic.remote_addr & (sizeof(uint64_t) - 1)) != 0) {
      return EINVAL;
    }
    total = sizeof(uint64_t);
  }
  *length = total;
  return 0;
}

// Cuts the SGEs of `wqe` to their first `bytes` bytes (REQUIRES: they hold at least that many):
// all a NIC touches of a fetching atomic's SGEs is the 8 bytes its former value goes to.
void KeepFirstBytes(SendWqe* wqe, uint64_t bytes) {
  int kept = 0;
  for (uint64_t left = bytes; kept < wqe->num_sge && left > 0; ++kept) {
    ibv_sge& sge = wqe->sges[kept];
    if (sge.length > left) sge.length = static_cast<uint32_t>(left);
    left -= sge.length;
  }
  wqe->num_sge = kept;
}

}  // namespace

namespace nic_internal {

int ValidateRecv(const ibv_recv_wr* wr, uint32_t max_sge) {
  if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > max_sge) return EINVAL;
  if (wr->num_sge > 0 && wr->sg_list == nullptr) return EINVAL;
  return 0;
}

// Sizes the slots of a receive queue (a QP's or an SRQ's) once: a post only fills them.
void InitReceiveQueue(Ring<RecvWqe>* rq, uint32_t max_wr, uint32_t max_sge) {
  rq->Init(max_wr, [max_sge] {
    RecvWqe wqe;
    wqe.sges.resize(max_sge);
    return wqe;
  });
}

void FillRecv(const ibv_recv_wr* wr, RecvWqe* wqe) {
  wqe->wr_id = wr->wr_id;
  wqe->num_sge = wr->num_sge;
  wqe->delay_ns = 0;
  std::copy(wr->sg_list, wr->sg_list + wr->num_sge, wqe->sges.begin());
}

// The bytes a receive WR can take.
uint64_t RecvCapacity(const ibv_recv_wr* wr) {
  uint64_t capacity = 0;
  for (int i = 0; i < wr->num_sge; ++i) capacity += wr->sg_list[i].length;
  return capacity;
}

}  // namespace nic_internal

namespace {

// Whether every WR of `wr` would be posted (the QP's state, each WR's checks, room in the send
// queue for all of them); else the error and the first WR that fails into *bad_wr.
// REQUIRES: qp->link->mu held.
int ValidateBatchLocked(const SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  const uint32_t in_use = qp->sq_in_use.load(std::memory_order_acquire);
  uint32_t count = 0;
  for (; wr != nullptr; wr = wr->next) {
    uint64_t length = 0;
    int err = qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR ? EINVAL : 0;
    if (err == 0) err = ValidateSend(qp, wr, /*extended=*/true, &length);
    if (err == 0 && in_use + ++count > qp->cap.max_send_wr) err = ENOMEM;
    if (err != 0) {
      *bad_wr = wr;
      return err;
    }
  }
  return 0;
}

// What PostSendWrsLocked leaves for after the link's lock: a WR deferred (on a link to another
// process, not sent), and whether the backstop must send it (carrier.h).
using Unsent = LinkCarrier::Unsent;

int PostSendWrsLocked(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault,
                      bool extended, Unsent* unsent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->link->mu);

}  // namespace

namespace nic_internal {

// ibv_post_send, and ibv_wr_complete's post of its batch (`extended`).
int PostSendWrs(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault,
                bool extended) {
  if (qp->qp.qp_type == IBV_QPT_UD) return PostUdSendWrs(qp, wr, bad_wr, fault, extended);
  Unsent unsent;
  int err = 0;
  {
    softrpma::MutexLock lock(&qp->link->mu);
    err = PostSendWrsLocked(qp, wr, bad_wr, fault, extended, &unsent);
  }
  // (The set's lock is taken before a link's: RunPollPoint.)
  if (unsent.any) ScheduleDeferredSends(qp->link, unsent.backstop);
  return err;
}

}  // namespace nic_internal

namespace {

// PostSendWrs under the link's lock; *unsent: what it left deferred.
int PostSendWrsLocked(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault,
                      bool extended, Unsent* unsent) {
  SimLink* link = qp->link.get();
  CheckOverflowLocked(qp);
  // A post point for what is queued already; the WRs of this post wait for later ones.
  const bool deferred = CurrentExecutionMode() == ExecutionMode::kAsync;
  const bool watch = deferred && RaceDetectorOn();
  if (extended) {
    // ibv_wr_complete posts all of its batch or nothing (ibv_wr_post(3)).
    if (int err = ValidateBatchLocked(qp, wr, bad_wr); err != 0) return err;
  }
  ++link->post_points;
  int err = 0;
  for (bool first = true; wr != nullptr; wr = wr->next, first = false) {
    if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) {
      err = EINVAL;
      break;
    }
    uint64_t length = 0;
    err = ValidateSend(qp, wr, extended, &length);
    if (err != 0) break;
    if (qp->sq_in_use.load(std::memory_order_acquire) >= qp->cap.max_send_wr) {
      err = ENOMEM;
      break;
    }
    qp->sq_in_use.fetch_add(1, std::memory_order_acq_rel);
    if (TraceOn()) {
      TraceEvent("post_send qp=%u wr_id=0x%llx opcode=%s len=%llu signaled=%d", qp->qp.qp_num,
                 static_cast<unsigned long long>(wr->wr_id),
                 NameOr(WrOpcodeName(wr->opcode), wr->opcode).c_str(),
                 static_cast<unsigned long long>(length),
                 qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED) != 0 ? 1 : 0);
    }
    if (qp->state == IBV_QPS_ERR) {
      CompleteSend(qp, wr->wr_id, wr->opcode, true, IBV_WC_WR_FLUSH_ERR, 0, fault.delay_ns);
      continue;
    }
    SendWqe& wqe = qp->sq.push_back();
    wqe.forced_status = first ? fault.status : IBV_WC_SUCCESS;
    wqe.delay_ns = fault.delay_ns;
    wqe.wr_id = wr->wr_id;
    wqe.opcode = wr->opcode;
    wqe.signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED) != 0;
    wqe.solicited = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
    wqe.is_inline = (wr->send_flags & IBV_SEND_INLINE) != 0;
    wqe.imm_data = wr->imm_data;
    const bool fetching_atomic = FetchesAtomically(RowOf(wr->opcode));
    // (ibv_send_wr's rkey is at another offset in wr.atomic than in wr.rdma.)
    wqe.remote_addr = fetching_atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
    wqe.rkey = fetching_atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
    wqe.compare_add = fetching_atomic ? wr->wr.atomic.compare_add : 0;
    wqe.swap = fetching_atomic ? wr->wr.atomic.swap : 0;
    wqe.length = length;
    wqe.num_sge = wr->num_sge;
    if (wqe.is_inline) {
      // Inline data is copied now: the caller may reuse its buffers once the post returns.
      uint64_t offset = 0;
      for (int i = 0; i < wr->num_sge; ++i) {
        std::memcpy(wqe.inline_data.data() + offset, AsPtr(wr->sg_list[i].addr),
                    wr->sg_list[i].length);
        offset += wr->sg_list[i].length;
      }
      wqe.num_sge = 0;
    } else {
      std::copy(wr->sg_list, wr->sg_list + wr->num_sge, wqe.sges.begin());
      if (fetching_atomic) KeepFirstBytes(&wqe, sizeof(uint64_t));
    }
    wqe.post_seq = ++qp->posted_seq;
    wqe.release_at = 0;
    wqe.posted_bytes.clear();  // (keeps its capacity for the slot's next WR)
    wqe.unexecuted = true;
    link->unexecuted.fetch_add(1, std::memory_order_acq_rel);
    g_unexecuted.fetch_add(1, std::memory_order_acq_rel);
    if (deferred) {
      const uint64_t wait = qp->chooser.NextDeferral();
      wqe.release_at = wait == ExecutionChooser::kUntilPoll ? wait : link->post_points + wait;
      if (watch && !wqe.is_inline) WatchAtPost(qp, wqe);
    }
  }
  ProgressLinkLocked(link);  // the WRs before a bad one were posted
  if (deferred) KickForLocked(link, qp);
  *unsent = link->carrier->UnsentLocked(link, qp);
  if (err != 0) {
    *bad_wr = wr;
    return err;
  }
  return 0;
}

}  // namespace

int PostSend(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault) {
  return PostSendWrs(qp, wr, bad_wr, fault, /*extended=*/false);
}

int PostRecv(SimQp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr, const WrFault& fault) {
  if (qp->srq != nullptr) {
    *bad_wr = wr;
    return EINVAL;
  }
  SimLink* link = qp->link.get();
  const bool watch = RaceDetectorOn() && CurrentExecutionMode() == ExecutionMode::kAsync;
  softrpma::MutexLock lock(&link->mu);
  CheckOverflowLocked(qp);
  ++link->post_points;
  int err = 0;
  for (bool first = true; wr != nullptr; wr = wr->next, first = false) {
    if (qp->state == IBV_QPS_RESET) {  // receives from INIT on (rxe: EINVAL)
      err = EINVAL;
      break;
    }
    err = ValidateRecv(wr, qp->cap.max_recv_sge);
    if (err != 0) break;
    if (qp->rq_in_use.load(std::memory_order_acquire) >= qp->cap.max_recv_wr) {
      err = ENOMEM;  // posted, or completed and not polled yet
      break;
    }
    qp->rq_in_use.fetch_add(1, std::memory_order_acq_rel);
    if (TraceOn()) {
      TraceEvent("post_recv qp=%u wr_id=0x%llx len=%llu", qp->qp.qp_num,
                 static_cast<unsigned long long>(wr->wr_id),
                 static_cast<unsigned long long>(RecvCapacity(wr)));
    }
    if (qp->state == IBV_QPS_ERR) {
      CompleteRecv(qp, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, nullptr, fault.delay_ns);
      continue;
    }
    if (first && fault.status != IBV_WC_SUCCESS) {
      // A wc_status fault: this receive fails at once; the QP goes to ERROR, flushing the
      // receives posted before it (after it in the CQ) and the rest of this list.
      CompleteRecv(qp, wr->wr_id, fault.status, IBV_WC_RECV, 0, nullptr, fault.delay_ns);
      EnterErrorLocked(qp);
      continue;
    }
    if (watch) {
      PoisonReceive(qp->pd, wr, qp->cap.max_recv_sge,
                    qp->qp.qp_type == IBV_QPT_UD ? kGrhBytes + UdMtuBytes()
                                                 : kPoisonedReceiveBytes);
    }
    RecvWqe& wqe = qp->rq.push_back();
    FillRecv(wr, &wqe);
    wqe.delay_ns = fault.delay_ns;
  }
  // A post point; a sender waiting for a receive of this QP may go on now, and one whose WRs
  // are still deferred may now have a completion coming.
  ProgressLinkLocked(link);
  KickLinkLocked(link);
  if (err != 0) {
    *bad_wr = wr;
    return err;
  }
  return 0;
}

}  // namespace softrpma::sim
