// completer.cc: THE COMPLETER. Send and receive completions pushed to their CQs at the ready
// time the QP's CompletionTimer draws (sched.h), the retirement of a send queue's head, and a
// response from another process's responder (untrusted: its status and length are checked
// against the WR it answers).

#include "simverbs/sim/nic/qp.h"

#include <atomic>
#include <cerrno>
#include <cstring>

#include "simverbs/sim/fabric/cma.h"
#include "simverbs/sim/nic/nic_internal.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace {

ibv_wc MakeWc(uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode, uint64_t byte_len,
              uint32_t qp_num) {
  ibv_wc wc;
  std::memset(&wc, 0, sizeof(wc));
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = opcode;
  wc.byte_len = static_cast<uint32_t>(byte_len);
  wc.qp_num = qp_num;
  wc.vendor_err = 0;
  return wc;
}

}  // namespace

namespace nic_internal {

// Completes a send WR of `qp`. Its queue slot is free now (rxe, siw), or when a completion that
// retires it is polled (mlx5: a successful unsignaled WR waits to be retired by the next
// completion). The completion is ready when qp's CompletionTimer says (sched.h), `delay_ns`
// later still. REQUIRES: qp->link->mu held; the WR is no longer in qp->sq.
void CompleteSend(SimQp* qp, uint64_t wr_id, ibv_wr_opcode opcode, bool signaled,
                  ibv_wc_status status, uint64_t byte_len, uint64_t delay_ns) {
  if (!qp->slots_freed_at_poll) qp->sq_in_use.fetch_sub(1, std::memory_order_acq_rel);
  if (status == IBV_WC_SUCCESS && !signaled) {
    if (qp->slots_freed_at_poll) ++qp->unretired;
    return;
  }
  const Opcode& op = RowOf(opcode);
  ibv_wc wc = MakeWc(wr_id, status, op.wc, status == IBV_WC_SUCCESS ? byte_len : 0,
                     qp->qp.qp_num);
  // As mlx5: the sender of a write or send with immediate data is told so.
  if (op.with_imm) wc.wc_flags |= IBV_WC_WITH_IMM;
  const uint32_t retire = qp->slots_freed_at_poll ? qp->unretired + 1 : 0;
  qp->unretired = 0;
  if (!qp->send_cq->Push(wc, /*solicited=*/false, &qp->sq_in_use, retire,
                         qp->timer.Next(wc.byte_len, delay_ns))) {
    EnterErrorLocked(qp);
  }
}

// Completes a receive WR of `qp` (consumed from its RQ or its SRQ); `delivery` is nullptr for
// a flushed or failed receive. REQUIRES: qp->link->mu held; the WR is no longer queued.
void CompleteRecv(SimQp* qp, uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode,
                  uint64_t byte_len, const Delivery* delivery, uint64_t delay_ns) {
  ibv_wc wc = MakeWc(wr_id, status, opcode, status == IBV_WC_SUCCESS ? byte_len : 0, qp->qp.qp_num);
  bool solicited = false;
  if (delivery != nullptr) {
    wc.src_qp = delivery->src_qp;
    solicited = delivery->solicited;
    if (delivery->grh) {
      wc.wc_flags |= IBV_WC_GRH;
      wc.sl = ActiveProfile().ud_recv_sl;  // (mlx5 on RoCE: the packet's type)
    }
    if (status == IBV_WC_SUCCESS && delivery->with_imm) {
      wc.wc_flags |= IBV_WC_WITH_IMM;
      wc.imm_data = delivery->imm_data;
    }
  }
  std::atomic<uint32_t>* slots = qp->srq != nullptr ? &qp->srq->in_use : &qp->rq_in_use;
  // The receive's slot: free now (rxe, siw), or when this completion is polled (mlx5).
  if (!qp->slots_freed_at_poll) slots->fetch_sub(1, std::memory_order_acq_rel);
  const uint32_t retire = qp->slots_freed_at_poll ? 1 : 0;
  if (!qp->recv_cq->Push(wc, solicited, slots, retire, qp->timer.Next(wc.byte_len, delay_ns))) {
    EnterErrorLocked(qp);
  }
}

// `wqe` no longer counts as unexecuted (it executed, was sent, or leaves the queue).
// REQUIRES: link->mu held.
// The process's unexecuted WRs, all links together: the process's progress point
// (RunProcessProgressPoint) looks no further while there are none.
std::atomic<uint64_t> g_unexecuted{0};

namespace {

// One WR of `link` no longer counts as unexecuted (post.cc counts it in both).
void UncountLocked(SimLink* link) {
  link->unexecuted.fetch_sub(1, std::memory_order_acq_rel);
  g_unexecuted.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace

void MarkExecutedLocked(SimLink* link, SendWqe& wqe) {
  if (!wqe.unexecuted) return;
  wqe.unexecuted = false;
  UncountLocked(link);
}

// Removes the WR at the head of qp's send queue and completes it with `status`: signaled as the
// WR was, or `force_signaled` (a flush), its completion ready `extra_delay_ns` later than it
// would be. It counts as unexecuted until its completion is queued: a poller that finds its
// link with nothing unexecuted, without taking the link's lock (RunPollPoint), then finds the
// completion even when another thread executed the WR. REQUIRES: qp->link->mu held; sq not
// empty.
void PopAndCompleteSendLocked(SimQp* qp, ibv_wc_status status, uint64_t byte_len,
                              bool force_signaled, uint64_t extra_delay_ns) {
  SendWqe& wqe = qp->sq.front();
  const uint64_t wr_id = wqe.wr_id;
  const ibv_wr_opcode opcode = wqe.opcode;
  const bool signaled = force_signaled || wqe.signaled;
  const uint64_t delay_ns = wqe.delay_ns + extra_delay_ns;
  const bool counted = wqe.unexecuted;
  wqe.unexecuted = false;
  ForgetPeerCopy(wqe);
  qp->sq.pop_front();
  CompleteSend(qp, wr_id, opcode, signaled, status, byte_len, delay_ns);
  if (counted) UncountLocked(qp->link.get());
}

// Removes the WR at the head of qp's send queue without a completion (a reset).
// REQUIRES: qp->link->mu held; sq not empty.
void PopSendLocked(SimQp* qp) {
  MarkExecutedLocked(qp->link.get(), qp->sq.front());
  ForgetPeerCopy(qp->sq.front());
  qp->sq.pop_front();
}

void ForgetPeerCopy(SendWqe& wqe) {
  if (!wqe.sent_cma) return;
  wqe.sent_cma = false;  // the slot is reused: its next WR starts without a peer copy
  cma::PeerCopyEnded();
}

// Retires the WR at the head of qp's send queue with `status` (an error moves qp to ERROR), its
// completion ready `extra_delay_ns` later than it would be. REQUIRES: qp->link->mu held;
// qp->sq not empty.
void RetireHeadLocked(SimQp* qp, ibv_wc_status status, uint64_t byte_len,
                      uint64_t extra_delay_ns) {
  PopAndCompleteSendLocked(qp, status, byte_len, /*force_signaled=*/false, extra_delay_ns);
  if (status != IBV_WC_SUCCESS) EnterErrorLocked(qp);
}

}  // namespace nic_internal

namespace {

// A status from the peer, as one this side may report (untrusted input).
ibv_wc_status PeerStatus(int32_t status) {
  return status >= IBV_WC_SUCCESS && status <= IBV_WC_GENERAL_ERR
             ? static_cast<ibv_wc_status>(status)
             : IBV_WC_GENERAL_ERR;
}

}  // namespace

namespace nic_internal {

// A response of the peer: completes the WR at the head of qp's send queue, if it is the one
// answered (a response to a WR that was flushed meanwhile is dropped).
void HandleResponseLocked(SimLink* link, SimQp* qp, const wire::Header& response,
                          const uint8_t* body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (qp == nullptr || qp->sq_sent == 0 || qp->sq.empty()) return;
  SendWqe& wqe = qp->sq.front();
  if (wqe.seq != response.seq) return;
  ibv_wc_status status = PeerStatus(response.status);
  // A READ's response brings its data, a compare-and-swap's or fetch-and-add's the 8 bytes of
  // the word's former value.
  const bool is_read = !RowOf(wqe.opcode).reads_local;
  const bool read_response = static_cast<wire::Type>(response.type) == wire::Type::kReadResponse;
  if (status == IBV_WC_SUCCESS && is_read != read_response) status = IBV_WC_BAD_RESP_ERR;
  // A read response says the data is in place (kFlagCma) exactly when the read asked the
  // responder to put it there; either way round it is a bad response.
  if (status == IBV_WC_SUCCESS && is_read &&
      ((response.flags & wire::kFlagCma) != 0) != wqe.sent_cma) {
    status = IBV_WC_BAD_RESP_ERR;
  }
  if (wqe.sent_cma && !wqe.posted_bytes.empty()) {
    // The peer copied the source at some moment between the request and this response: a
    // change before now may be what it got.
    PdReadLocks pd_lock(qp->pd, nullptr);
    Segments local;
    if (GatherLocal(qp, wqe, 0, &local)) CheckRace(qp, wqe, local);
  }
  if (status == IBV_WC_SUCCESS && is_read && (response.flags & wire::kFlagCma) != 0) {
    // The responder wrote the data into place itself.
  } else if (status == IBV_WC_SUCCESS && is_read) {
    PdReadLocks pd_lock(qp->pd, nullptr);
    Segments local;
    if (response.body_len != wqe.length) {
      status = IBV_WC_BAD_RESP_ERR;
    } else if (!GatherLocal(qp, wqe, IBV_ACCESS_LOCAL_WRITE, &local)) {
      status = IBV_WC_LOC_PROT_ERR;  // the region went away while the read was out
    } else if (local.total > 0) {
      Segments data;
      data.Add(const_cast<uint8_t*>(body), response.body_len);
      Copy(data, local);
    }
  }
  --qp->sq_sent;
  // A responder gone or in ERROR answers nothing on a real fabric: the retries run out.
  RetireHeadLocked(qp, status, wqe.length, status == IBV_WC_RETRY_EXC_ERR ? kRetryTimeoutNs : 0);
  if (qp->state == IBV_QPS_RTS) ProgressQpLocked(link, qp);  // a failing WR may be next
}

}  // namespace nic_internal

}  // namespace softrpma::sim
