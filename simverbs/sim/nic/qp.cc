#include "simverbs/sim/nic/qp.h"

#include <pthread.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "simverbs/alloc.h"
#include "simverbs/sim/fabric/cma.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/nic/opcodes.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {
namespace {

// The largest message (as on most RC NICs): byte_len must fit in a uint32_t.
constexpr uint64_t kMaxMessageSize = uint64_t{1} << 31;

// A contiguous piece of memory on one side of a copy.
struct Segment {
  uint8_t* ptr;
  uint64_t length;
};

// The memory of one side of a WR: at most kMaxSge pieces.
struct Segments {
  std::array<Segment, kMaxSge> pieces;
  int count = 0;
  uint64_t total = 0;

  void Add(uint8_t* ptr, uint64_t length) {
    pieces[count++] = Segment{ptr, length};
    total += length;
  }
};

uint8_t* AsPtr(uint64_t addr) { return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(addr)); }

// Copies `src` into `dst` piece by piece. REQUIRES: dst.total >= src.total. memmove: the two
// sides may be the same memory (a loopback connection). Exactly 8 bytes into an 8-byte aligned
// word are one atomic store, as one PCIe write of a NIC is (librpma's emulated atomic write
// relies on it): a concurrent reader sees the old or the new word, never a mix.
void Copy(const Segments& src, const Segments& dst) {
  if (src.total == sizeof(uint64_t) && dst.count > 0 && dst.pieces[0].length >= sizeof(uint64_t) &&
      reinterpret_cast<uintptr_t>(dst.pieces[0].ptr) % sizeof(uint64_t) == 0) {
    uint8_t bytes[sizeof(uint64_t)];
    uint64_t offset = 0;
    for (int s = 0; s < src.count; ++s) {
      std::memcpy(bytes + offset, src.pieces[s].ptr, src.pieces[s].length);
      offset += src.pieces[s].length;
    }
    uint64_t value = 0;
    std::memcpy(&value, bytes, sizeof(value));
    __atomic_store_n(reinterpret_cast<uint64_t*>(dst.pieces[0].ptr), value, __ATOMIC_SEQ_CST);
    return;
  }
  int d = 0;
  uint64_t d_off = 0;
  for (int s = 0; s < src.count; ++s) {
    uint64_t s_off = 0;
    while (s_off < src.pieces[s].length) {
      while (d_off == dst.pieces[d].length) {
        ++d;
        d_off = 0;
      }
      const uint64_t n = std::min(src.pieces[s].length - s_off, dst.pieces[d].length - d_off);
      std::memmove(dst.pieces[d].ptr + d_off, src.pieces[s].ptr + s_off, n);
      s_off += n;
      d_off += n;
    }
  }
}

// The smallest message a remote link sends by cross-memory attach (wire::kFlagCma) when the
// peer can: below it, a system call to copy costs more than the bytes through the socket.
constexpr uint64_t kCmaMinBytes = 16 * 1024;

// Where the bytes of a message are. Always in this process: a cross-memory-attach request's
// data is fetched into a buffer of this process before it is served (ServeRequestLocked).
struct MessageSource {
  const Segments* local = nullptr;
  uint64_t total = 0;

  // Copies the message into the front of `dst` (REQUIRES: dst.total >= total). True.
  bool CopyTo(const Segments& dst) const {
    Copy(*local, dst);
    return true;
  }
};

MessageSource LocalSource(const Segments& segments) {
  MessageSource source;
  source.local = &segments;
  source.total = segments.total;
  return source;
}

// The row of a posted WR's opcode (ValidateSend lets only modelled ones in).
const Opcode& RowOf(ibv_wr_opcode opcode) { return *FindOpcode(opcode); }

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

void EnterErrorLocked(SimQp* qp);

// Completes a send WR of `qp`. A successful unsignaled WR only waits to be retired by the next
// completion. The completion is ready when qp's CompletionTimer says (sched.h), `delay_ns`
// later still. REQUIRES: qp->link->mu held; the WR is no longer in qp->sq.
void CompleteSend(SimQp* qp, uint64_t wr_id, ibv_wr_opcode opcode, bool signaled,
                  ibv_wc_status status, uint64_t byte_len, uint64_t delay_ns = 0) {
  if (status == IBV_WC_SUCCESS && !signaled) {
    ++qp->unretired;
    return;
  }
  const Opcode& op = RowOf(opcode);
  ibv_wc wc = MakeWc(wr_id, status, op.wc, status == IBV_WC_SUCCESS ? byte_len : 0,
                     qp->qp.qp_num);
  // As mlx5: the sender of a write or send with immediate data is told so.
  if (op.with_imm) wc.wc_flags |= IBV_WC_WITH_IMM;
  const uint32_t retire = qp->unretired + 1;
  qp->unretired = 0;
  if (!qp->send_cq->Push(wc, /*solicited=*/false, &qp->sq_in_use, retire,
                         qp->timer.Next(wc.byte_len, delay_ns))) {
    EnterErrorLocked(qp);
  }
}

// What a receive learns of the message that consumed it, and who waits when none is posted.
struct Delivery {
  const std::shared_ptr<SimLink>* waiter;  // resumed by the SRQ's next post
  uint32_t src_qp;
  bool solicited;
  bool with_imm;
  uint32_t imm_data;  // network order
};

// Completes a receive WR of `qp` (consumed from its RQ or its SRQ); `delivery` is nullptr for
// a flushed or failed receive. REQUIRES: qp->link->mu held; the WR is no longer queued.
void CompleteRecv(SimQp* qp, uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode,
                  uint64_t byte_len, const Delivery* delivery, uint64_t delay_ns = 0) {
  ibv_wc wc = MakeWc(wr_id, status, opcode, status == IBV_WC_SUCCESS ? byte_len : 0, qp->qp.qp_num);
  bool solicited = false;
  if (delivery != nullptr) {
    wc.src_qp = delivery->src_qp;
    solicited = delivery->solicited;
    if (status == IBV_WC_SUCCESS && delivery->with_imm) {
      wc.wc_flags |= IBV_WC_WITH_IMM;
      wc.imm_data = delivery->imm_data;
    }
  }
  std::atomic<uint32_t>* slots = qp->srq != nullptr ? &qp->srq->in_use : &qp->rq_in_use;
  if (!qp->recv_cq->Push(wc, solicited, slots, 1, qp->timer.Next(wc.byte_len, delay_ns))) {
    EnterErrorLocked(qp);
  }
}

// `wqe` no longer counts as unexecuted (it executed, was sent, or leaves the queue).
// REQUIRES: link->mu held.
// The process's unexecuted WRs, all links together: the process's progress point
// (RunProcessProgressPoint) looks no further while there are none.
std::atomic<uint64_t> g_unexecuted{0};

void MarkExecutedLocked(SimLink* link, SendWqe& wqe) {
  if (!wqe.unexecuted) return;
  wqe.unexecuted = false;
  link->unexecuted.fetch_sub(1, std::memory_order_acq_rel);
  g_unexecuted.fetch_sub(1, std::memory_order_acq_rel);
}

// Removes the WR at the head of qp's send queue. REQUIRES: qp->link->mu held; sq not empty.
void PopSendLocked(SimQp* qp) {
  MarkExecutedLocked(qp->link.get(), qp->sq.front());
  qp->sq.pop_front();
}

// THE QP STATE SETTER: the state of the model and the one the QP's struct shows, and its
// trace event. REQUIRES: qp->link->mu held.
void SetStateLocked(SimQp* qp, ibv_qp_state state) {
  qp->state = state;
  qp->qp.state = state;
  if (TraceOn()) {
    TraceEvent("qp_state qp=%u state=%s", qp->qp.qp_num,
               state == IBV_QPS_RESET ? "IBV_QPS_RESET"
               : state == IBV_QPS_INIT ? "IBV_QPS_INIT"
               : state == IBV_QPS_RTR  ? "IBV_QPS_RTR"
               : state == IBV_QPS_RTS  ? "IBV_QPS_RTS"
                                       : "IBV_QPS_ERR");
  }
}

// Moves `qp` to ERROR and flushes its send and receive queues. REQUIRES: qp->link->mu held.
void EnterErrorLocked(SimQp* qp) {
  if (qp->state == IBV_QPS_ERR) return;
  SetStateLocked(qp, IBV_QPS_ERR);
  qp->sq_sent = 0;  // a remote link's outstanding requests flush too; late responses are dropped
  while (!qp->sq.empty()) {
    const SendWqe& wqe = qp->sq.front();
    const uint64_t wr_id = wqe.wr_id;
    const ibv_wr_opcode opcode = wqe.opcode;
    const uint64_t delay_ns = wqe.delay_ns;
    PopSendLocked(qp);
    CompleteSend(qp, wr_id, opcode, true, IBV_WC_WR_FLUSH_ERR, 0, delay_ns);
  }
  while (!qp->rq.empty()) {
    const uint64_t wr_id = qp->rq.front().wr_id;
    const uint64_t delay_ns = qp->rq.front().delay_ns;
    qp->rq.pop_front();
    CompleteRecv(qp, wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, nullptr, delay_ns);
  }
}

// An overflow of one of its CQs moves a QP to ERROR; this is where the QPs that did not cause
// the overflow notice it. REQUIRES: qp->link->mu held.
void CheckOverflowLocked(SimQp* qp) {
  if (qp->state == IBV_QPS_ERR) return;
  if (qp->send_cq->overflowed.load(std::memory_order_acquire) ||
      qp->recv_cq->overflowed.load(std::memory_order_acquire)) {
    EnterErrorLocked(qp);
  }
}

// The memory of the SGEs of `wqe`, each checked against qp's PD with `need_access`. Returns
// false on a protection error. REQUIRES: pd->mu held (shared).
bool GatherSges(SimQp* qp, const SendWqe& wqe, int need_access, Segments* out) {
  for (int i = 0; i < wqe.num_sge; ++i) {
    const ibv_sge& sge = wqe.sges[i];
    if (sge.length == 0) continue;
    if (qp->pd->FindLocal(sge.lkey, sge.addr, sge.length, need_access) == nullptr) return false;
    out->Add(AsPtr(sge.addr), sge.length);
  }
  return true;
}

// The local memory of `wqe`: its inline data, or its SGEs (GatherSges).
bool GatherLocal(SimQp* qp, SendWqe& wqe, int need_access, Segments* out) {
  if (wqe.is_inline) {
    out->Add(wqe.inline_data.data(), wqe.length);
    return true;
  }
  return GatherSges(qp, wqe, need_access, out);
}

// The result of executing the head of a send queue.
struct Outcome {
  bool wait;  // receiver not ready: the WR stays at the head
  ibv_wc_status status;
  uint64_t byte_len;
  uint64_t delay_ns;  // the completion is ready that much later (the retry timeout)
};

constexpr Outcome kWait{true, IBV_WC_SUCCESS, 0, 0};
Outcome Done(ibv_wc_status status, uint64_t byte_len = 0) {
  return Outcome{false, status, byte_len, 0};
}
// The responder is gone or in ERROR: the requester's retries run out (qp.h).
constexpr Outcome kRetryExceeded{false, IBV_WC_RETRY_EXC_ERR, 0, kRetryTimeoutNs};

void AddWaiterLocked(SimSrq* srq, const std::shared_ptr<SimLink>& link)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(srq->mu) {
  for (const std::weak_ptr<SimLink>& waiter : srq->waiters) {
    if (waiter.lock() == link) return;
  }
  srq->waiters.push_back(link);
}

// SEND / SEND_WITH_IMM / WRITE_WITH_IMM: consumes the responder's oldest receive and completes
// it. `src` is the message; for WRITE_WITH_IMM the data has already been checked and is copied
// here, to `remote`. REQUIRES: the responder's link mu and its PD's reader lock held.
Outcome DeliverToReceive(SimQp* peer, const Delivery& delivery, const MessageSource& src,
                         const Segments* remote) {
  SimSrq* srq = peer->srq;
  Ring<RecvWqe>* rq = srq != nullptr ? &srq->rq : &peer->rq;
  if (srq != nullptr) srq->mu.Lock();
  if (rq->empty()) {
    if (srq != nullptr) {
      AddWaiterLocked(srq, *delivery.waiter);
      srq->mu.Unlock();
    }
    return kWait;
  }
  RecvWqe& recv = rq->front();
  const uint64_t recv_wr_id = recv.wr_id;
  const uint64_t recv_delay_ns = recv.delay_ns;
  ibv_wc_status recv_status = IBV_WC_SUCCESS;
  ibv_wc_status send_status = IBV_WC_SUCCESS;
  ibv_wc_opcode recv_opcode = IBV_WC_RECV;
  if (remote != nullptr) {  // WRITE_WITH_IMM: the data goes to the remote range, not the receive
    recv_opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    if (!src.CopyTo(*remote)) {  // the requester's memory went away under cross-memory attach
      recv_status = IBV_WC_GENERAL_ERR;
      send_status = IBV_WC_LOC_PROT_ERR;
    }
  } else {
    uint64_t capacity = 0;
    for (int i = 0; i < recv.num_sge; ++i) capacity += recv.sges[i].length;
    if (capacity < src.total) {
      recv_status = IBV_WC_LOC_LEN_ERR;
      send_status = IBV_WC_REM_INV_REQ_ERR;
    } else {
      Segments dst;
      for (int i = 0; i < recv.num_sge && dst.total < src.total; ++i) {
        const ibv_sge& sge = recv.sges[i];
        if (sge.length == 0) continue;
        if (peer->pd->FindLocal(sge.lkey, sge.addr, sge.length, IBV_ACCESS_LOCAL_WRITE) ==
            nullptr) {
          recv_status = IBV_WC_LOC_PROT_ERR;
          send_status = IBV_WC_REM_OP_ERR;
          break;
        }
        dst.Add(AsPtr(sge.addr), sge.length);
      }
      if (recv_status == IBV_WC_SUCCESS && !src.CopyTo(dst)) {
        recv_status = IBV_WC_GENERAL_ERR;
        send_status = IBV_WC_LOC_PROT_ERR;
      }
    }
  }
  rq->pop_front();
  if (srq != nullptr) srq->mu.Unlock();
  CompleteRecv(peer, recv_wr_id, recv_status, recv_opcode, src.total, &delivery, recv_delay_ns);
  if (recv_status != IBV_WC_SUCCESS) EnterErrorLocked(peer);
  return Done(send_status, src.total);
}

// ---- The race detector (sched.h) ----------------------------------------------------------

// At post time: keeps the source bytes of a WRITE / SEND, poisons the destination of a READ.
// REQUIRES: the race detector is on; wqe is not inline.
void WatchAtPost(SimQp* qp, SendWqe& wqe) {
  if (wqe.length == 0) return;
  const bool is_read = !RowOf(wqe.opcode).reads_local;
  PdReadLocks pd_lock(qp->pd, nullptr);
  Segments local;
  // A WR that will fail with a protection error when it executes is left alone.
  if (!GatherSges(qp, wqe, is_read ? IBV_ACCESS_LOCAL_WRITE : 0, &local)) return;
  if (is_read) {
    for (int i = 0; i < local.count; ++i) {
      std::memset(local.pieces[i].ptr, kRacePoison, local.pieces[i].length);
    }
    return;
  }
  wqe.posted_bytes.resize(local.total);
  uint64_t offset = 0;
  for (int i = 0; i < local.count; ++i) {
    std::memcpy(wqe.posted_bytes.data() + offset, local.pieces[i].ptr, local.pieces[i].length);
    offset += local.pieces[i].length;
  }
}

// At execution: reports source bytes that changed since the post (one line per WR).
void CheckRace(const SimQp* qp, const SendWqe& wqe, const Segments& local) {
  uint64_t first = local.total;
  uint64_t end = 0;
  uint64_t first_addr = 0;
  uint64_t offset = 0;
  for (int i = 0; i < local.count; ++i) {
    const Segment& piece = local.pieces[i];
    for (uint64_t b = 0; b < piece.length && offset + b < wqe.posted_bytes.size(); ++b) {
      if (piece.ptr[b] == wqe.posted_bytes[offset + b]) continue;
      if (first == local.total) {
        first = offset + b;
        first_addr = reinterpret_cast<uintptr_t>(piece.ptr + b);
      }
      end = offset + b + 1;
    }
    offset += piece.length;
  }
  if (first == local.total) return;
  const std::string opcode = NameOr(WrOpcodeName(wqe.opcode), wqe.opcode);
  std::fprintf(stderr,
               "softrpma-sim: race: qp %u wr_id 0x%llx %s: source bytes [%llu, %llu) of %llu "
               "(first at 0x%llx) changed after the post, before the NIC read them; reuse a "
               "buffer only after its completion\n",
               qp->qp.qp_num, static_cast<unsigned long long>(wqe.wr_id), opcode.c_str(),
               static_cast<unsigned long long>(first), static_cast<unsigned long long>(end),
               static_cast<unsigned long long>(local.total),
               static_cast<unsigned long long>(first_addr));
  if (TraceOn()) {
    TraceEvent("race qp=%u wr_id=0x%llx opcode=%s first=%llu end=%llu len=%llu", qp->qp.qp_num,
               static_cast<unsigned long long>(wqe.wr_id), opcode.c_str(),
               static_cast<unsigned long long>(first), static_cast<unsigned long long>(end),
               static_cast<unsigned long long>(local.total));
  }
}

// Fills the buffers of a receive with poison (race detector on), when they are registered
// memory the NIC may write (and the WR is well-formed). REQUIRES: no PD lock held.
void PoisonReceive(SimPd* pd, const ibv_recv_wr* wr, uint32_t max_sge) {
  if (wr->num_sge <= 0 || static_cast<uint32_t>(wr->num_sge) > max_sge || wr->sg_list == nullptr) {
    return;
  }
  PdReadLocks pd_lock(pd, nullptr);
  for (int i = 0; i < wr->num_sge; ++i) {
    const ibv_sge& sge = wr->sg_list[i];
    if (sge.length == 0) continue;
    if (pd->FindLocal(sge.lkey, sge.addr, sge.length, IBV_ACCESS_LOCAL_WRITE) == nullptr) return;
  }
  for (int i = 0; i < wr->num_sge; ++i) {
    std::memset(AsPtr(wr->sg_list[i].addr), kRacePoison, wr->sg_list[i].length);
  }
}

// ---- THE RESPONDER: what the target's NIC does with a request ------------------------------
// A request reaches it from the requester in this process (ExecuteLocked) or from another
// process (ServeRequestLocked); either way its checks run in ONE ORDER: the responder's
// readiness (ReadinessOf), the target range's key, bounds and access, then an atomic's
// alignment (CheckTargetLocked), then the receive's capacity and keys (DeliverToReceive).
// Memory is touched only after every check that could refuse the request.

enum class Readiness {
  kReady,
  kNotYet,  // the responder drops what arrives and the requester retries: the request waits
  kGone,    // no responder, or one in ERROR / RESET: the requester's retries run out
};

// A responder not ready yet is a passive side whose connect has not completed (INIT), or a QP
// of ibv_modify_qp back in INIT after a RESET; a QP of ibv_modify_qp receives from RTR on.
Readiness ReadinessOf(const SimQp* responder) {
  if (responder != nullptr && responder->state == IBV_QPS_INIT && !responder->verbs) {
    return Readiness::kNotYet;
  }
  if (responder == nullptr ||
      (responder->state != IBV_QPS_RTS && responder->state != IBV_QPS_RTR)) {
    return Readiness::kGone;
  }
  return Readiness::kReady;
}

// The target range of a request of `op` on `responder`, `length` bytes at `addr` (a SEND has
// none; a zero-length operation checks no key): adds it to *remote, or returns the error the
// requester completes with. An error moves the responder to ERROR as well (IB class C for a
// protection error; an invalid request NAK for a misaligned atomic). REQUIRES: the responder's
// link mu and its PD's reader lock held.
ibv_wc_status CheckTargetLocked(SimQp* responder, const Opcode& op, uint32_t rkey, uint64_t addr,
                                uint64_t length, Segments* remote) {
  if (op.target_access == 0 || length == 0) return IBV_WC_SUCCESS;
  if (responder->pd->FindRemote(rkey, addr, length, op.target_access) == nullptr) {
    EnterErrorLocked(responder);
    return IBV_WC_REM_ACCESS_ERR;
  }
  if (op.wr == IBV_WR_ATOMIC_WRITE && addr % sizeof(uint64_t) != 0) {
    EnterErrorLocked(responder);
    return IBV_WC_REM_INV_REQ_ERR;
  }
  remote->Add(AsPtr(addr), length);
  return IBV_WC_SUCCESS;
}

// Applies a checked request that brings data (every op but a READ): the message to the oldest
// receive, or the data to the target range (an ATOMIC WRITE's 8 aligned bytes are one store,
// see Copy). REQUIRES: as CheckTargetLocked; `remote` is what it returned.
Outcome ApplyLocked(SimQp* responder, const Opcode& op, const Delivery& delivery,
                    const MessageSource& src, const Segments& remote) {
  if (op.consumes_receive) {
    return DeliverToReceive(responder, delivery, src, op.target_access != 0 ? &remote : nullptr);
  }
  src.CopyTo(remote);
  return Done(IBV_WC_SUCCESS, src.total);
}

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

// Retires the WR at the head of qp's send queue with `status` (an error moves qp to ERROR), its
// completion ready `extra_delay_ns` later than it would be. REQUIRES: qp->link->mu held;
// qp->sq not empty.
void RetireHeadLocked(SimQp* qp, ibv_wc_status status, uint64_t byte_len,
                      uint64_t extra_delay_ns = 0) {
  const SendWqe& wqe = qp->sq.front();
  const uint64_t wr_id = wqe.wr_id;
  const ibv_wr_opcode opcode = wqe.opcode;
  const bool signaled = wqe.signaled;
  const uint64_t delay_ns = wqe.delay_ns + extra_delay_ns;
  PopSendLocked(qp);
  CompleteSend(qp, wr_id, opcode, signaled, status, byte_len, delay_ns);
  if (status != IBV_WC_SUCCESS) EnterErrorLocked(qp);
}

void ProgressRemoteLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void DrainIncomingLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);

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

// ---- Kicks (cq.h, SimCq::Kick) ---------------------------------------------------------

// Where the unexecuted WRs of `qp` would complete if its link executed them now: on its send
// CQ (a signaled WR, or an error), on its peer's receive CQ (a WR consuming a receive that is
// there; `recv_solicited` when such a WR is IBV_SEND_SOLICITED).
struct WouldComplete {
  bool send = false;
  bool recv = false;
  bool recv_solicited = false;
};

// The dry run behind every kick. A WR that would wait (its receive is not posted, or the
// responder is not ready) holds back every WR behind it, as ExecuteLocked does: then nothing
// completes, and no channel may become readable, or a program waiting in poll(2) would wake
// to an ibv_get_cq_event that sleeps (a real channel is readable only with an event there).
// An SRQ's receives count as there (another QP may take them first: such a kick is spurious).
// REQUIRES: link->mu held; an in-process link.
WouldComplete WouldCompleteLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  WouldComplete result;
  if (qp->state != IBV_QPS_RTS || qp->sq.empty()) return result;
  SimQp* peer = link->side[1 - qp->side];
  switch (ReadinessOf(peer)) {
    case Readiness::kNotYet:
      return result;  // the WRs wait
    case Readiness::kGone:
      result.send = true;  // the head's retries run out: an error completion
      return result;
    case Readiness::kReady:
      break;
  }
  size_t receives = peer->srq != nullptr ? SIZE_MAX : peer->rq.size();
  for (size_t i = 0; i < qp->sq.size(); ++i) {
    const SendWqe& wqe = qp->sq.at(i);
    if (wqe.forced_status != IBV_WC_SUCCESS) {
      result.send = true;  // an error completion, and the rest flushes
      break;
    }
    if (RowOf(wqe.opcode).consumes_receive) {
      if (receives == 0) break;  // receiver not ready: this WR and those behind it wait
      if (receives != SIZE_MAX) --receives;
      result.recv = true;
      result.recv_solicited = result.recv_solicited || wqe.solicited;
    }
    result.send = result.send || wqe.signaled;
    if (result.send && result.recv_solicited) break;  // the rest can add nothing
  }
  return result;
}

// A connection of this process to itself made by the host transport (sched.h, Transport): it
// stands in for the in-process link, so it has no backstop (the in-process link has none) and
// kicks as that link does. (A raw peer or a QP bound to itself are other processes' stand-ins.)
bool SelfOnHostTransportLocked(const SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  return CurrentTransport() == TransportKind::kHost && link->remote_pid == getpid();
}

// Kicks the channels that qp's unexecuted WRs would complete on. REQUIRES: link->mu held.
void KickForLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (qp == nullptr || link->unexecuted.load(std::memory_order_acquire) == 0) return;
  if (link->remote != nullptr) {
    // A connection of this process to itself (the host transport, cm.h): its send CQ, as the
    // in-process link's (the peer's receives are the other end's to know). Toward another
    // process no kick: the completion needs the peer's answer, whose arrival wakes the waiter.
    if (!SelfOnHostTransportLocked(link) || qp->send_cq->channel == nullptr) return;
    for (size_t i = qp->sq_sent; i < qp->sq.size(); ++i) {
      const SendWqe& wqe = qp->sq.at(i);
      if (wqe.signaled || wqe.forced_status != IBV_WC_SUCCESS) {
        qp->send_cq->Kick(/*solicited=*/false);
        return;
      }
    }
    return;
  }
  SimQp* peer = link->side[1 - qp->side];
  // A post is a hot path: no dry run when neither CQ has a channel to wake (busy polling).
  if (qp->send_cq->channel == nullptr && (peer == nullptr || peer->recv_cq->channel == nullptr)) {
    return;
  }
  const WouldComplete would = WouldCompleteLocked(link, qp);
  if (would.send) qp->send_cq->Kick(/*solicited=*/false);
  if (would.recv && peer != nullptr) peer->recv_cq->Kick(would.recv_solicited);
}

// Kicks for both QPs of `link` (a receive was posted, a side became ready). REQUIRES:
// link->mu held.
void KickLinkLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (CurrentExecutionMode() != ExecutionMode::kAsync) return;
  for (SimQp* qp : link->side) KickForLocked(link, qp);
}

// ---- The remote data path (qp.h, "Connections to another process") ----------------------

// The local QP of a remote link (its one side), or nullptr once it was destroyed.
SimQp* LocalSideLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  return link->side[0] != nullptr ? link->side[0] : link->side[1];
}

// The iovecs of `segments` (at most kMaxSge). Returns their count.
int ToIovecs(const Segments& segments, iovec* iov) {
  for (int i = 0; i < segments.count; ++i) {
    iov[i] = iovec{segments.pieces[i].ptr, static_cast<size_t>(segments.pieces[i].length)};
  }
  return segments.count;
}

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

bool IsRequest(uint16_t type) {
  switch (static_cast<wire::Type>(type)) {
    case wire::Type::kWrite:
    case wire::Type::kSend:
    case wire::Type::kRead:
    case wire::Type::kAtomicWrite:
      return true;
    default:
      return false;
  }
}

// Answers `request` on `out`: an ack, or a read response carrying `data` when the read
// succeeded (none when the data went by cross-memory attach).
void Respond(Transport* out, const wire::Header& request, ibv_wc_status status,
             const Segments* data) {
  const bool is_read = static_cast<wire::Type>(request.type) == wire::Type::kRead;
  wire::Header response =
      wire::MakeHeader(is_read ? wire::Type::kReadResponse : wire::Type::kAck);
  response.seq = request.seq;
  response.status = status;
  iovec iov[kMaxSge];
  int iovcnt = 0;
  if (is_read && (request.flags & wire::kFlagCma) != 0) {
    response.flags = wire::kFlagCma;  // the data is in the requester's memory already
  } else if (is_read && status == IBV_WC_SUCCESS && data != nullptr) {
    response.body_len = static_cast<uint32_t>(data->total);
    iovcnt = ToIovecs(*data, iov);
  }
  out->Send(response, iov, iovcnt);
}

// The connection `request` came on (and is answered on).
std::shared_ptr<Transport> ServingConnLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  return link->serve != nullptr ? link->serve : link->remote;
}

// Answers a request of link's peer (Respond).
void RespondLocked(SimLink* link, const wire::Header& request, ibv_wc_status status,
                   const Segments* data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (std::shared_ptr<Transport> out = ServingConnLocked(link); out != nullptr) {
    Respond(out.get(), request, status, data);
  }
}

// What became of a request of the peer (ServeRequestLocked).
enum class Served {
  kAnswered,  // executed (or refused) and answered
  kWaits,     // needs a receive and none is posted: it waits, unanswered, with what follows it
  kCopying,   // its cross-memory-attach copy runs (cma.h): it waits, in flight, until it ends
};

// THE BUDGET of requests a peer may leave waiting here (a SEND without a receive, and what
// arrived behind it): per connection, and for the whole process. A peer over it is a peer this
// NIC cannot keep up with: the connection ends (the peer sees it closed, as after a NIC's RNR
// retries ran out), instead of this process buffering without bound.
constexpr uint64_t kMaxWaitingBytesPerLink = uint64_t{256} << 20;
constexpr size_t kMaxWaitingPerLink = 65536;
constexpr uint64_t kMaxWaitingBytes = uint64_t{1} << 30;
// The largest SEND whose data is fetched by cross-memory attach before a receive takes it.
constexpr uint64_t kMaxFetchedSendBytes = kMaxWaitingBytesPerLink;
std::atomic<uint64_t> g_waiting_bytes{0};

// The peer's segments of a kFlagCma request (a validated header: 1 to kMaxCmaSegments of them)
// as iovecs of ITS address space; false when their lengths do not add up to header.length.
bool CmaSegments(const wire::Header& request, const uint8_t* body, std::vector<iovec>* out) {
  const size_t count = request.body_len / sizeof(wire::CmaSegment);
  out->resize(count);
  uint64_t sum = 0;
  for (size_t i = 0; i < count; ++i) {
    wire::CmaSegment segment;
    std::memcpy(&segment, body + i * sizeof(segment), sizeof(segment));
    if (segment.length > wire::kMaxMessageBytes) return false;
    sum += segment.length;
    (*out)[i] = iovec{reinterpret_cast<void*>(static_cast<uintptr_t>(segment.addr)),
                      static_cast<size_t>(segment.length)};
  }
  return sum == request.length;
}

void DrainIncomingLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);

// The in-flight request at the head of link's incoming requests, if it is `seq`'s (it may have
// gone meanwhile: the peer went away, the QP was destroyed or reset).
IncomingRequest* InFlightLocked(SimLink* link, uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (link->incoming.empty()) return nullptr;
  IncomingRequest& head = link->incoming.front();
  return head.in_flight && head.header.seq == seq ? &head : nullptr;
}

// Starts the cross-memory-attach copy of `request` (the head of link's requests from now on),
// between `local` and the peer's `segments`: for a WRITE or SEND, the data is fetched and the
// request is then served as if it had carried it; for a READ (to_peer), `local` holds the data
// and the response follows the copy. Toward the connection's own peer only: link->remote_pid
// is the kernel's word for it. Returns kCopying, or kAnswered when the copy may not start.
Served StartCopyLocked(SimLink* link, SimQp* qp, const wire::Header& request,
                       std::vector<iovec> segments, std::vector<uint8_t> local, bool to_peer)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  std::weak_ptr<SimLink> weak = qp->link;
  std::weak_ptr<Transport> conn = ServingConnLocked(link);
  cma::Copy copy;
  copy.pid = link->remote_pid;
  copy.to_peer = to_peer;
  copy.remote = std::move(segments);
  copy.local = std::move(local);
  const uint64_t seq = request.seq;
  auto done = [weak, seq, to_peer](bool ok, std::vector<uint8_t> data) {
    std::shared_ptr<SimLink> link = weak.lock();
    if (link == nullptr) return;
    softrpma::MutexLock lock(&link->mu);
    IncomingRequest* head = InFlightLocked(link.get(), seq);
    if (head == nullptr) return;
    if (to_peer || !ok) {
      // A read's data is in place (or could not be put there); a fetch that failed: the
      // requester's memory went away.
      RespondLocked(link.get(), head->header,
                    ok ? IBV_WC_SUCCESS : IBV_WC_LOC_PROT_ERR, nullptr);
      link->incoming.pop_front();
    } else {
      // The data is here now: the request is served as one that carried it.
      head->header.flags &= static_cast<uint16_t>(~wire::kFlagCma);
      head->header.length = 0;
      head->header.body_len = static_cast<uint32_t>(data.size());
      link->incoming_bytes += data.size();
      g_waiting_bytes.fetch_add(data.size(), std::memory_order_relaxed);
      head->body = std::move(data);
      head->in_flight = false;
    }
    DrainIncomingLocked(link.get());
  };
  auto on_stuck = [conn] {
    if (std::shared_ptr<Transport> c = conn.lock(); c != nullptr) c->Shutdown();
  };
  if (!cma::Start(std::move(copy), std::move(done), std::move(on_stuck))) {
    RespondLocked(link, request, IBV_WC_REM_OP_ERR, nullptr);
    return Served::kAnswered;
  }
  if (TraceOn()) {
    TraceEvent("fabric_cma_copy qp=%u seq=%llu bytes=%llu", qp->qp.qp_num,
               static_cast<unsigned long long>(seq),
               static_cast<unsigned long long>(request.length));
  }
  return Served::kCopying;
}

// Executes one request of the peer against `qp` (nullptr: destroyed) and answers it, or says
// why it waits. ONE RULE for every request type (wire::TargetBytes): the bytes the operation
// touches here are what is checked against the key, whatever the flags say.
Served ServeRequestLocked(SimLink* link, SimQp* qp, const wire::Header& request,
                          const uint8_t* body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  const wire::Type type = static_cast<wire::Type>(request.type);
  if (qp != nullptr) CheckOverflowLocked(qp);
  switch (ReadinessOf(qp)) {
    case Readiness::kNotYet:
      return Served::kWaits;  // as the peer's retries would
    case Readiness::kGone:
      RespondLocked(link, request, IBV_WC_RETRY_EXC_ERR, nullptr);  // a real requester times out
      return Served::kAnswered;
    case Readiness::kReady:
      break;
  }
  const Opcode* op = FromWire(type, (request.flags & wire::kFlagImm) != 0);
  if (op == nullptr) {  // (a validated request always has a row)
    RespondLocked(link, request, IBV_WC_REM_INV_REQ_ERR, nullptr);
    return Served::kAnswered;
  }
  PdReadLocks pd_lock(qp->pd, nullptr);
  const bool cma = (request.flags & wire::kFlagCma) != 0;
  std::vector<iovec> segments;
  if (cma) {
    // The bytes are in the requester's process, at addresses of ITS memory. Copied only toward
    // the connection's own peer as the kernel names it, and only when this side proved at
    // connect time that it may reach it (host::CanReach); never toward this process itself.
    if (!link->we_reach_peer || link->remote_pid <= 0 || link->remote_pid == getpid() ||
        !CmaSegments(request, body, &segments)) {
      RespondLocked(link, request, IBV_WC_REM_INV_REQ_ERR, nullptr);  // malformed: refused
      return Served::kAnswered;
    }
  }
  Segments remote;
  const uint64_t length = wire::TargetBytes(request);
  const ibv_wc_status status =
      CheckTargetLocked(qp, *op, request.rkey, request.remote_addr, length, &remote);
  if (status != IBV_WC_SUCCESS) {
    RespondLocked(link, request, status, nullptr);
    return Served::kAnswered;
  }
  if (cma) {
    if (!op->reads_local) {
      // The data leaves the region now, under its PD's lock; the copy into the requester's
      // memory runs without it.
      std::vector<uint8_t> data(length);
      Segments bounce;
      if (length > 0) bounce.Add(data.data(), length);
      Copy(remote, bounce);
      return StartCopyLocked(link, qp, request, std::move(segments), std::move(data), true);
    }
    if (type == wire::Type::kSend && length > kMaxFetchedSendBytes) {
      RespondLocked(link, request, IBV_WC_REM_INV_REQ_ERR, nullptr);
      return Served::kAnswered;
    }
    return StartCopyLocked(link, qp, request, std::move(segments), std::vector<uint8_t>(length),
                           false);
  }
  if (!op->reads_local) {
    // A READ. Back-pressure, as a NIC's credits: while the peer leaves this many response bytes
    // unread, its next reads wait (with what follows them) until the backlog drains
    // (ResumeRemoteLink, from the connection's OnDrained), instead of this process holding
    // every response a peer that never reads asks for.
    std::shared_ptr<Transport> out = ServingConnLocked(link);
    if (out != nullptr && out->QueuedBytes() >= Transport::kBacklogBytes) return Served::kWaits;
    RespondLocked(link, request, IBV_WC_SUCCESS, &remote);
    return Served::kAnswered;
  }
  Segments message;
  if (request.body_len > 0) message.Add(const_cast<uint8_t*>(body), request.body_len);
  const Delivery delivery{&qp->link, link->remote_qp_num,
                          (request.flags & wire::kFlagSolicited) != 0, op->with_imm,
                          request.imm_data};
  const Outcome outcome = ApplyLocked(qp, *op, delivery, LocalSource(message), remote);
  if (outcome.wait) return Served::kWaits;
  RespondLocked(link, request, outcome.status, nullptr);
  return Served::kAnswered;
}

// Forgets link's waiting requests (their bytes leave the process's budget).
void ClearIncomingLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  g_waiting_bytes.fetch_sub(link->incoming_bytes, std::memory_order_relaxed);
  link->incoming_bytes = 0;
  link->incoming.clear();
}

// The peer's process is gone (its connection closed): nobody is left to answer, so the head
// of the send queue times out and the rest flushes (ProgressRemoteLocked), and its requests
// that waited here are forgotten.
void PeerGoneLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (link->remote == nullptr || link->peer_gone) return;
  link->peer_gone = true;
  ClearIncomingLocked(link);
  if (SimQp* qp = LocalSideLocked(link); qp != nullptr) ProgressRemoteLocked(link, qp);
}

void PopIncomingLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  const uint64_t bytes = link->incoming.front().body.size();
  link->incoming_bytes -= bytes;
  g_waiting_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  link->incoming.pop_front();
}

// Serves the peer's requests that waited, oldest first, until one waits again (or is in
// flight).
void DrainIncomingLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  SimQp* qp = LocalSideLocked(link);
  while (!link->incoming.empty()) {
    IncomingRequest& request = link->incoming.front();
    if (request.in_flight) return;
    const Served served = ServeRequestLocked(link, qp, request.header, request.body.data());
    if (served == Served::kWaits) return;
    if (served == Served::kCopying) {
      // Its body (segments) is spent; the copy owns what comes next.
      g_waiting_bytes.fetch_sub(request.body.size(), std::memory_order_relaxed);
      link->incoming_bytes -= request.body.size();
      request.body.clear();
      request.in_flight = true;
      return;
    }
    PopIncomingLocked(link);
  }
}

// A request of the peer that arrived on link's connection: served now, in order behind the ones
// that wait, or kept (within THE BUDGET) until it can be.
void ServeOrQueueLocked(SimLink* link, SimQp* qp, const wire::Header& header,
                        const uint8_t* body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  Served served = Served::kWaits;
  if (link->incoming.empty()) {
    served = ServeRequestLocked(link, qp, header, body);
    if (served == Served::kAnswered) return;
  }
  const uint64_t bytes = served == Served::kCopying ? 0 : header.body_len;
  if (link->incoming.size() >= kMaxWaitingPerLink ||
      link->incoming_bytes + bytes > kMaxWaitingBytesPerLink ||
      g_waiting_bytes.load(std::memory_order_relaxed) + bytes > kMaxWaitingBytes) {
    static std::atomic<bool> reported{false};
    if (!reported.exchange(true)) {
      std::fprintf(stderr,
                   "softrpma: fabric: a peer left more requests waiting for receives than this "
                   "NIC keeps (%zu, %llu bytes on its connection); its connection is ended "
                   "(later ones are not reported)\n",
                   link->incoming.size(), static_cast<unsigned long long>(link->incoming_bytes));
    }
    if (std::shared_ptr<Transport> conn = ServingConnLocked(link); conn != nullptr) {
      conn->Shutdown();
    }
    return;
  }
  IncomingRequest request{header, {}, served == Served::kCopying};
  if (bytes > 0) request.body.assign(body, body + bytes);
  link->incoming_bytes += bytes;
  g_waiting_bytes.fetch_add(bytes, std::memory_order_relaxed);
  link->incoming.push_back(std::move(request));
}

// A status from the peer, as one this side may report (untrusted input).
ibv_wc_status PeerStatus(int32_t status) {
  return status >= IBV_WC_SUCCESS && status <= IBV_WC_GENERAL_ERR
             ? static_cast<ibv_wc_status>(status)
             : IBV_WC_GENERAL_ERR;
}

// A response of the peer: completes the WR at the head of qp's send queue, if it is the one
// answered (a response to a WR that was flushed meanwhile is dropped).
void HandleResponseLocked(SimLink* link, SimQp* qp, const wire::Header& response,
                          const uint8_t* body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (qp == nullptr || qp->sq_sent == 0 || qp->sq.empty()) return;
  SendWqe& wqe = qp->sq.front();
  if (wqe.seq != response.seq) return;
  ibv_wc_status status = PeerStatus(response.status);
  const bool is_read = wqe.opcode == IBV_WR_RDMA_READ;
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
  if (qp->state == IBV_QPS_RTS) ProgressRemoteLocked(link, qp);  // a failing WR may be next
}

// Checks one send WR against the QP's limits. `extended`: built by the extended post API,
// the only way an atomic write is posted (mlx5's ibv_post_send rejects the opcode). Returns 0
// or EINVAL; sets *length.
int ValidateSend(const SimQp* qp, const ibv_send_wr* wr, bool extended, uint64_t* length) {
  const Opcode* op = FindOpcode(wr->opcode);
  if (op == nullptr) return EINVAL;
  // siw has no immediate data: its provider maps both opcodes to "unsupported" and fails the
  // post with EINVAL (docs/DEVICES.md).
  if (op->with_imm && !ActiveProfile().immediate_data) {
    return EINVAL;
  }
  if (wr->opcode == IBV_WR_ATOMIC_WRITE && !extended) return EINVAL;
  if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > qp->cap.max_send_sge) {
    return EINVAL;
  }
  if (wr->num_sge > 0 && wr->sg_list == nullptr) return EINVAL;
  uint64_t total = 0;
  for (int i = 0; i < wr->num_sge; ++i) total += wr->sg_list[i].length;
  if (total > kMaxMessageSize) return EINVAL;
  if ((wr->send_flags & IBV_SEND_INLINE) != 0) {
    if (wr->opcode == IBV_WR_RDMA_READ) return EINVAL;
    // An atomic write's 8 bytes always travel in the WQE (as with ibv_wr_atomic_write), so
    // they do not count against max_inline_data.
    if (total > qp->cap.max_inline_data && wr->opcode != IBV_WR_ATOMIC_WRITE) return EINVAL;
  }
  if (wr->opcode == IBV_WR_ATOMIC_WRITE && total != sizeof(uint64_t)) return EINVAL;
  *length = total;
  return 0;
}

int ValidateRecv(const ibv_recv_wr* wr, uint32_t max_sge) {
  if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > max_sge) return EINVAL;
  if (wr->num_sge > 0 && wr->sg_list == nullptr) return EINVAL;
  return 0;
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

}  // namespace

SimSrq::SimSrq(SimPd* sim_pd, const ibv_srq_init_attr& attr)
    : pd(sim_pd), max_wr(attr.attr.max_wr), max_sge(attr.attr.max_sge) {
  std::memset(&srq, 0, sizeof(srq));
  srq.context = sim_pd->pd.context;
  srq.srq_context = attr.srq_context;
  srq.pd = &sim_pd->pd;
  srq.handle = sim_pd->device->next_srq_handle.fetch_add(1, std::memory_order_relaxed);
  pthread_mutex_init(&srq.mutex, nullptr);
  pthread_cond_init(&srq.cond, nullptr);
  softrpma::MutexLock lock(&mu);
  const uint32_t sges = max_sge;
  rq.Init(max_wr, [sges] {
    RecvWqe wqe;
    wqe.sges.resize(sges);
    return wqe;
  });
}

SimSrq::~SimSrq() {
  pthread_cond_destroy(&srq.cond);
  pthread_mutex_destroy(&srq.mutex);
}

SimQp::SimQp(SimPd* sim_pd, const ibv_qp_init_attr& attr, std::shared_ptr<SimLink> qp_link,
             int qp_side)
    : device(sim_pd->device),
      pd(sim_pd),
      send_cq(to_sim(attr.send_cq)),
      recv_cq(to_sim(attr.recv_cq)),
      srq(attr.srq != nullptr ? to_sim(attr.srq) : nullptr),
      cap(attr.cap),
      sq_sig_all(attr.sq_sig_all != 0),
      link(std::move(qp_link)),
      side(qp_side) {
  std::memset(&qp_ex, 0, sizeof(qp_ex));
  qp.context = sim_pd->pd.context;
  qp.qp_context = attr.qp_context;
  qp.pd = &sim_pd->pd;
  qp.send_cq = attr.send_cq;
  qp.recv_cq = attr.recv_cq;
  qp.srq = attr.srq;
  qp.qp_num = device->next_qp_num.fetch_add(1, std::memory_order_relaxed);
  qp.handle = qp.qp_num;
  qp.state = IBV_QPS_INIT;
  qp.qp_type = IBV_QPT_RC;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  timer.Init(qp.qp_num);
  chooser.Init(qp.qp_num);
  const uint32_t send_sges = cap.max_send_sge;
  // Room for the inline data, and at least for the 8 bytes of an inline atomic write.
  const uint32_t inline_bytes =
      std::max<uint32_t>(cap.max_inline_data, static_cast<uint32_t>(sizeof(uint64_t)));
  sq.Init(cap.max_send_wr, [send_sges, inline_bytes] {
    SendWqe wqe;
    wqe.sges.resize(send_sges);
    wqe.inline_data.resize(inline_bytes);
    return wqe;
  });
  const uint32_t recv_sges = cap.max_recv_sge;
  rq.Init(cap.max_recv_wr, [recv_sges] {
    RecvWqe wqe;
    wqe.sges.resize(recv_sges);
    return wqe;
  });
}

SimQp::~SimQp() {
  pthread_cond_destroy(&qp.cond);
  pthread_mutex_destroy(&qp.mutex);
}

namespace {

// What the driver of `profile` makes of the capabilities asked for: the queues rounded as it
// rounds them, and (rxe) the SGE and inline space of one WQE shared. The QP then holds what is
// reported, as a real one does. REQUIRES: `cap` within the profile's limits.
void RoundQpCap(const DeviceProfile& profile, ibv_qp_cap* cap) {
  cap->max_send_wr = std::min(RoundQueueSize(profile.send_queue_rounding, cap->max_send_wr),
                              static_cast<uint32_t>(profile.max_qp_wr));
  cap->max_recv_wr = std::min(RoundQueueSize(profile.recv_queue_rounding, cap->max_recv_wr),
                              static_cast<uint32_t>(profile.max_qp_wr));
  if (profile.inline_shares_sge_space) {
    const uint32_t wqe_bytes = std::max<uint32_t>(
        cap->max_send_sge * static_cast<uint32_t>(sizeof(ibv_sge)), cap->max_inline_data);
    cap->max_inline_data = wqe_bytes;
    cap->max_send_sge = std::min(wqe_bytes / static_cast<uint32_t>(sizeof(ibv_sge)),
                                 static_cast<uint32_t>(profile.max_sge));
  }
}

// The fields ibv_qp_init_attr and ibv_qp_init_attr_ex share, from one to the other.
template <typename To, typename From>
void CopyCommonInitAttr(const From& from, To* to) {
  to->qp_context = from.qp_context;
  to->send_cq = from.send_cq;
  to->recv_cq = from.recv_cq;
  to->srq = from.srq;
  to->cap = from.cap;
  to->qp_type = from.qp_type;
  to->sq_sig_all = from.sq_sig_all;
}

// The send_ops_flags this device accepts: the RC ops, immediate data where the device has it,
// atomic write where it reports the capability.
uint64_t ModelledSendOps() {
  uint64_t ops = AllSendOpsFlags();
  if (!ActiveProfile().immediate_data) {
    ops &= ~uint64_t{IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND_WITH_IMM};
  }
  if (!AtomicWriteSupported()) ops &= ~uint64_t{IBV_QP_EX_WITH_ATOMIC_WRITE};
  return ops;
}

}  // namespace

int CreateQp(ibv_qp_init_attr_ex* attr_ex, const std::shared_ptr<SimLink>& join, SimQp** qp) {
  if (attr_ex == nullptr || (attr_ex->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 ||
      attr_ex->pd == nullptr) {
    return EINVAL;
  }
  if ((attr_ex->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) != 0) {
    return EINVAL;  // XRC, TSO, RSS, create flags...: not an RC QP of this device
  }
  uint64_t send_ops_flags = 0;
  if ((attr_ex->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0) {
    send_ops_flags = attr_ex->send_ops_flags;
    if (send_ops_flags == 0 || (send_ops_flags & ~ModelledSendOps()) != 0) return EOPNOTSUPP;
  }
  SimPd* pd = to_sim(attr_ex->pd);
  ibv_qp_init_attr plain;
  std::memset(&plain, 0, sizeof(plain));
  CopyCommonInitAttr(*attr_ex, &plain);
  ibv_qp_init_attr* attr = &plain;
  if (attr->qp_type != IBV_QPT_RC) return EINVAL;
  if (attr->send_cq == nullptr || attr->recv_cq == nullptr) return EINVAL;
  ibv_context* context = pd->pd.context;
  if (attr->send_cq->context != context || attr->recv_cq->context != context) return EINVAL;
  if (to_sim(attr->send_cq)->is_dummy || to_sim(attr->recv_cq)->is_dummy) return EINVAL;
  ibv_qp_cap& cap = attr->cap;
  const DeviceProfile& profile = ActiveProfile();
  const auto max_wr = static_cast<uint32_t>(profile.max_qp_wr);
  const auto max_sge = static_cast<uint32_t>(profile.max_sge);
  if (cap.max_send_wr > max_wr || cap.max_send_sge > max_sge ||
      cap.max_inline_data > static_cast<uint32_t>(profile.max_inline_data)) {
    return EINVAL;
  }
  if (attr->srq != nullptr) {
    if (to_sim(attr->srq)->pd != pd) return EINVAL;
    cap.max_recv_wr = 0;  // receives come from the SRQ
    cap.max_recv_sge = 0;
  } else if (cap.max_recv_wr > max_wr || cap.max_recv_sge > max_sge) {
    return EINVAL;
  }
  RoundQpCap(profile, &cap);

  // Join the peer's link when it has a free side, else start a new one.
  std::shared_ptr<SimLink> link;
  int side = 0;
  if (join != nullptr) {
    softrpma::MutexLock lock(&join->mu);
    if (join->side[0] == nullptr || join->side[1] == nullptr) {
      link = join;
      side = join->side[0] == nullptr ? 0 : 1;
    }
  }
  if (link == nullptr) link = std::make_shared<SimLink>();
  SimQp* sim_qp = New<SimQp>(pd, *attr, link, side);
  if (sim_qp == nullptr) return ENOMEM;
  {
    softrpma::MutexLock lock(&link->mu);
    if (link->side[side] != nullptr) side = 1 - side;  // the peer raced us; its other side
    if (link->side[side] != nullptr) {
      Delete(sim_qp);
      return EINVAL;
    }
    sim_qp->side = side;
    link->side[side] = sim_qp;
  }
  // Where the poll points of asynchronous execution find it.
  for (SimCq* cq : {sim_qp->send_cq, sim_qp->recv_cq}) {
    AddLink(&cq->links, link);
    if (cq->channel != nullptr) AddLink(&cq->channel->links, link);
  }
  pd->users.fetch_add(1, std::memory_order_acq_rel);
  sim_qp->send_cq->users.fetch_add(1, std::memory_order_acq_rel);
  sim_qp->recv_cq->users.fetch_add(1, std::memory_order_acq_rel);
  if (sim_qp->srq != nullptr) sim_qp->srq->users.fetch_add(1, std::memory_order_acq_rel);
  sim_qp->send_ops_flags = send_ops_flags;
  attr_ex->cap = plain.cap;
  *qp = sim_qp;
  return 0;
}

void DestroyQp(SimQp* qp) {
  {
    SimLink* link = qp->link.get();
    softrpma::MutexLock lock(&link->mu);
    link->side[qp->side] = nullptr;
    for (size_t i = 0; i < qp->sq.size(); ++i) MarkExecutedLocked(link, qp->sq.at(i));  // they vanish
    // A remote peer's requests that waited for a receive: nobody will serve them.
    for (const IncomingRequest& request : link->incoming) {
      RespondLocked(link, request.header, IBV_WC_RETRY_EXC_ERR, nullptr);
    }
    ClearIncomingLocked(link);
  }
  qp->send_cq->ForgetSlots(&qp->sq_in_use);
  qp->recv_cq->ForgetSlots(&qp->rq_in_use);
  if (qp->srq != nullptr) qp->recv_cq->ReleaseSlots(&qp->srq->in_use, qp->qp.qp_num);
  if (qp->srq != nullptr) qp->srq->users.fetch_sub(1, std::memory_order_acq_rel);
  qp->recv_cq->users.fetch_sub(1, std::memory_order_acq_rel);
  qp->send_cq->users.fetch_sub(1, std::memory_order_acq_rel);
  qp->pd->users.fetch_sub(1, std::memory_order_acq_rel);
  Delete(qp);
}

namespace {

// INIT -> RTS (any other state stays). REQUIRES: qp->link->mu held.
void EnterRtsLocked(SimQp* qp) {
  CheckOverflowLocked(qp);
  if (qp->state != IBV_QPS_INIT) return;
  SetStateLocked(qp, IBV_QPS_RTS);
}

}  // namespace

void AttachRemote(SimQp* qp, std::shared_ptr<Transport> conn) {
  qp->send_cq->AddRemote(conn);
  if (qp->recv_cq != qp->send_cq) qp->recv_cq->AddRemote(conn);
  softrpma::MutexLock lock(&qp->link->mu);
  qp->link->remote = std::move(conn);
}

void EnterRts(SimQp* qp) {
  SimLink* link = qp->link.get();
  softrpma::MutexLock lock(&link->mu);
  EnterRtsLocked(qp);
  ProgressLinkLocked(link);  // what the peer sent while this side was not ready
  KickLinkLocked(link);      // and what is still deferred now has a responder
}

void EstablishRemote(SimQp* qp, uint32_t remote_qp_num, int32_t remote_pid, bool we_reach_peer) {
  softrpma::MutexLock lock(&qp->link->mu);
  qp->link->remote_qp_num = remote_qp_num;
  qp->link->remote_pid = remote_pid;
  qp->link->we_reach_peer = we_reach_peer && remote_pid > 0 && remote_pid != getpid();
  EnterRtsLocked(qp);
  ProgressLinkLocked(qp->link.get());
}

void SetPeerReachesUs(SimQp* qp) {
  softrpma::MutexLock lock(&qp->link->mu);
  qp->link->peer_reaches_us = true;
  if (TraceOn()) TraceEvent("fabric_cma qp=%u", qp->qp.qp_num);
}

void RemotePeerGone(SimQp* qp) {
  SimLink* link = qp->link.get();
  softrpma::MutexLock lock(&link->mu);
  PeerGoneLocked(link);
}

void HandleRemoteMessage(const std::shared_ptr<SimLink>& link, const wire::Header& header,
                         const uint8_t* body) {
  softrpma::MutexLock lock(&link->mu);
  if (link->remote == nullptr) return;
  SimQp* qp = LocalSideLocked(link.get());
  switch (static_cast<wire::Type>(header.type)) {
    case wire::Type::kAck:
    case wire::Type::kReadResponse:
      HandleResponseLocked(link.get(), qp, header, body);
      return;
    case wire::Type::kWrite:
    case wire::Type::kSend:
    case wire::Type::kRead:
    case wire::Type::kAtomicWrite:
      // In order: behind any request that waits for a receive.
      ServeOrQueueLocked(link.get(), qp, header, body);
      return;
    default:
      return;  // connection management is the CM's
  }
}

bool ResponseFits(const std::shared_ptr<SimLink>& link, const wire::Header& header) {
  if (static_cast<wire::Type>(header.type) != wire::Type::kReadResponse) return true;
  softrpma::MutexLock lock(&link->mu);
  return header.body_len <= link->max_read_sent;
}

void ResumeRemoteLink(const std::shared_ptr<SimLink>& link) {
  softrpma::MutexLock lock(&link->mu);
  if (link->remote != nullptr) DrainIncomingLocked(link.get());
}

void DrainBeforeDisconnect(SimQp* qp) {
  SimLink* link = qp->link.get();
  softrpma::MutexLock lock(&link->mu);
  if (link->unexecuted.load(std::memory_order_acquire) == 0) return;
  qp->released_seq = qp->posted_seq;
  ProgressLinkLocked(link);
  if (CurrentExecutionMode() != ExecutionMode::kAsync || !RaceDetectorOn()) return;
  for (size_t i = 0; i < qp->sq.size(); ++i) {
    const SendWqe& wqe = qp->sq.at(i);
    if (wqe.forced_status != IBV_WC_SUCCESS) break;  // it and those behind it fail anyway
    if (!wqe.unexecuted) continue;
    const std::string opcode = NameOr(WrOpcodeName(wqe.opcode), wqe.opcode);
    std::fprintf(stderr,
                 "softrpma-sim: race: qp %u wr_id 0x%llx %s: flushed by rdma_disconnect before "
                 "it executed (it waited for a receive, or for its responder to be ready); "
                 "disconnect only after its completion\n",
                 qp->qp.qp_num, static_cast<unsigned long long>(wqe.wr_id), opcode.c_str());
    if (TraceOn()) {
      TraceEvent("race qp=%u wr_id=0x%llx opcode=%s len=%llu flushed_by_disconnect=1",
                 qp->qp.qp_num, static_cast<unsigned long long>(wqe.wr_id), opcode.c_str(),
                 static_cast<unsigned long long>(wqe.length));
    }
  }
}

void SetQpError(SimQp* qp) {
  softrpma::MutexLock lock(&qp->link->mu);
  EnterErrorLocked(qp);
}

int CreateSrq(SimPd* pd, ibv_srq_init_attr* attr, ibv_srq** srq) {
  if (attr == nullptr) return EINVAL;
  const DeviceProfile& profile = ActiveProfile();
  if (attr->attr.max_wr < 1 || attr->attr.max_wr > static_cast<uint32_t>(profile.max_srq_wr) ||
      attr->attr.max_sge < 1 || attr->attr.max_sge > static_cast<uint32_t>(profile.max_srq_sge)) {
    return EINVAL;
  }
  SimSrq* sim_srq = New<SimSrq>(pd, *attr);
  if (sim_srq == nullptr) return ENOMEM;
  pd->users.fetch_add(1, std::memory_order_acq_rel);
  *srq = &sim_srq->srq;
  return 0;
}

int DestroySrq(SimSrq* srq) {
  if (srq->users.load(std::memory_order_acquire) != 0) return EBUSY;
  srq->pd->users.fetch_sub(1, std::memory_order_acq_rel);
  Delete(srq);
  return 0;
}

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

}  // namespace

namespace {

// The links to another process that may hold deferred WRs: THE BACKSTOP (host::CallSoon)
// sends what they hold when the program gives the simulator no call to do it at, as a NIC
// puts a WR on the wire whatever its process does next (spins on memory, sleeps in poll(2)).
// Never destroyed (the fabric thread may use it at exit). A child of fork() starts a set of
// its own at its first look: the parent's links are not its to send on, and another thread of
// the parent may have held the set's lock, or a link's, at the fork.
// Whether a link to another process (or to this one, host transport) was ever listed: until
// then the process's progress points have nothing to look at.
std::atomic<bool> g_remote_links_listed{false};

struct OwnedLinkSet {
  pid_t owner;
  LinkSet set;
};

LinkSet& DeferredRemoteLinks() {
  static std::atomic<OwnedLinkSet*> current{nullptr};
  const pid_t self = getpid();
  OwnedLinkSet* seen = current.load(std::memory_order_acquire);
  while (seen == nullptr || seen->owner != self) {
    auto* fresh = new OwnedLinkSet{self, {}};
    if (current.compare_exchange_strong(seen, fresh, std::memory_order_acq_rel)) return fresh->set;
    delete fresh;  // another thread made one first: `seen` is now it (or the parent's)
  }
  return seen->set;
}

void RunDeferredSends() { RunPollPoint(&DeferredRemoteLinks()); }

// Lists `link` (to another process, or to this one on the host transport) where the process's
// progress points find it; `backstop`: and has the fabric thread send what it holds soon.
void ScheduleDeferredSends(const std::shared_ptr<SimLink>& link, bool backstop) {
  if (!link->backstop_listed.load(std::memory_order_acquire) &&
      !link->backstop_listed.exchange(true, std::memory_order_acq_rel)) {
    AddLink(&DeferredRemoteLinks(), link);
    g_remote_links_listed.store(true, std::memory_order_release);
  }
  if (backstop) host::CallSoon(&RunDeferredSends);
}

// What PostSendWrsLocked leaves for after the link's lock.
struct Unsent {
  bool any = false;       // a WR to another process (or this one, host transport) is deferred
  bool backstop = false;  // and the peer is another process
};

int PostSendWrsLocked(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault,
                      bool extended, Unsent* unsent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->link->mu);

}  // namespace

// ibv_post_send, and ibv_wr_complete's post of its batch (`extended`).
int PostSendWrs(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault,
                bool extended) {
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

namespace {

// PostSendWrs under the link's lock; *unsent: what it left deferred on a remote link.
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
    wqe.remote_addr = wr->wr.rdma.remote_addr;
    wqe.rkey = wr->wr.rdma.rkey;
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
  unsent->any = link->remote != nullptr && qp->sq_sent < qp->sq.size();
  unsent->backstop = unsent->any && !SelfOnHostTransportLocked(link);
  if (err != 0) {
    *bad_wr = wr;
    return err;
  }
  return 0;
}

}  // namespace

void RunProcessProgressPoint() {
  // (A process whose links are all inside it pays two loads.)
  if (!g_remote_links_listed.load(std::memory_order_acquire) ||
      g_unexecuted.load(std::memory_order_acquire) == 0) {
    return;
  }
  RunPollPoint(&DeferredRemoteLinks());
}

void AnswerForNoQp(Transport* conn, const wire::Header& message) {
  if (IsRequest(message.type)) Respond(conn, message, IBV_WC_RETRY_EXC_ERR, nullptr);
}

int PostSend(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault) {
  return PostSendWrs(qp, wr, bad_wr, fault, /*extended=*/false);
}

void WrStart(SimQp* qp) {
  qp->ex_mu.Lock();
  qp->ex_batch.clear();
  qp->ex_sge_pool.clear();
  qp->ex_inline_pool.clear();
  qp->ex_error = 0;
}

namespace {

// The first error of a batch is the one ibv_wr_complete reports.
void FailBatch(SimQp* qp, int err) {
  if (qp->ex_error == 0) qp->ex_error = err;
}

// The WR the setters give memory to: the last one built (nullptr, and the batch fails, when
// none is).
ExtendedWr* LastBuilt(SimQp* qp) {
  if (qp->ex_batch.empty()) {
    FailBatch(qp, EINVAL);
    return nullptr;
  }
  return &qp->ex_batch.back();
}

}  // namespace

void WrBuild(SimQp* qp, ibv_wr_opcode opcode, uint32_t rkey, uint64_t remote_addr,
             uint32_t imm_data) {
  // As mlx5 and rxe, an extended QP has the builder of every op the device has, not only of
  // those its send_ops_flags named.
  // (The extended post API has a builder for each row of the opcode table, opcodes.h.)
  const Opcode* op = FindOpcode(opcode);
  if (op == nullptr || (ModelledSendOps() & op->send_ops_flag) == 0) {
    FailBatch(qp, EINVAL);
    return;
  }
  if (qp->ex_batch.size() >= qp->cap.max_send_wr) {
    FailBatch(qp, ENOMEM);
    return;
  }
  ExtendedWr wr;
  wr.wr_id = qp->qp_ex.wr_id;
  wr.wr_flags = qp->qp_ex.wr_flags;
  wr.opcode = opcode;
  wr.rkey = rkey;
  wr.remote_addr = remote_addr;
  wr.imm_data = imm_data;
  qp->ex_batch.push_back(wr);
}

void WrAtomicWrite(SimQp* qp, uint32_t rkey, uint64_t remote_addr, const void* atomic_wr) {
  if (atomic_wr == nullptr) {
    FailBatch(qp, EINVAL);
    return;
  }
  const size_t built = qp->ex_batch.size();
  WrBuild(qp, IBV_WR_ATOMIC_WRITE, rkey, remote_addr);
  if (qp->ex_batch.size() == built) return;  // refused
  const ibv_data_buf value = {const_cast<void*>(atomic_wr), sizeof(uint64_t)};
  WrSetInlineDataList(qp, 1, &value);  // its 8 bytes travel in the WQE
}

void WrSetSgeList(SimQp* qp, size_t num_sge, const ibv_sge* sg_list) {
  ExtendedWr* wr = LastBuilt(qp);
  if (wr == nullptr) return;
  if (wr->opcode == IBV_WR_ATOMIC_WRITE || (num_sge > 0 && sg_list == nullptr)) {
    FailBatch(qp, EINVAL);
    return;
  }
  if (num_sge > qp->cap.max_send_sge) {
    FailBatch(qp, ENOMEM);  // mlx5's
    return;
  }
  wr->is_inline = false;
  wr->first_sge = qp->ex_sge_pool.size();
  wr->num_sge = static_cast<int>(num_sge);
  qp->ex_sge_pool.insert(qp->ex_sge_pool.end(), sg_list, sg_list + num_sge);
}

void WrSetInlineDataList(SimQp* qp, size_t num_buf, const ibv_data_buf* buf_list) {
  ExtendedWr* wr = LastBuilt(qp);
  if (wr == nullptr) return;
  if (num_buf > 0 && buf_list == nullptr) {
    FailBatch(qp, EINVAL);
    return;
  }
  size_t total = 0;
  for (size_t i = 0; i < num_buf; ++i) total += buf_list[i].length;
  // (The atomic write's 8 bytes do not count against max_inline_data; ibv_post_send checks
  // the rest when the batch is posted.)
  if (wr->opcode != IBV_WR_ATOMIC_WRITE && total > qp->cap.max_inline_data) {
    FailBatch(qp, ENOMEM);  // mlx5's
    return;
  }
  wr->is_inline = true;
  wr->num_sge = 0;
  wr->first_inline = qp->ex_inline_pool.size();
  wr->inline_length = total;
  for (size_t i = 0; i < num_buf; ++i) {
    const auto* bytes = static_cast<const uint8_t*>(buf_list[i].addr);
    qp->ex_inline_pool.insert(qp->ex_inline_pool.end(), bytes, bytes + buf_list[i].length);
  }
}

void WrUnsupported(SimQp* qp) { FailBatch(qp, EINVAL); }

namespace {

// The batch's WR `built` as ibv_post_send takes it; `inline_sge` is its one SGE when it is
// inline.
void ToSendWr(SimQp* qp, const ExtendedWr& built, ibv_sge* inline_sge, ibv_send_wr* wr) {
  std::memset(wr, 0, sizeof(*wr));
  wr->wr_id = built.wr_id;
  wr->opcode = built.opcode;
  // Inline is what the setter chose: IBV_SEND_INLINE in wr_flags means nothing here (mlx5).
  wr->send_flags = built.wr_flags & ~static_cast<unsigned int>(IBV_SEND_INLINE);
  wr->imm_data = built.imm_data;
  if (built.is_inline) {
    inline_sge->addr = reinterpret_cast<uint64_t>(qp->ex_inline_pool.data() + built.first_inline);
    inline_sge->length = static_cast<uint32_t>(built.inline_length);
    inline_sge->lkey = 0;
    wr->sg_list = inline_sge;
    wr->num_sge = built.inline_length > 0 ? 1 : 0;
    wr->send_flags |= IBV_SEND_INLINE;
  } else {
    wr->sg_list = built.num_sge > 0 ? qp->ex_sge_pool.data() + built.first_sge : nullptr;
    wr->num_sge = built.num_sge;
  }
  wr->wr.rdma.remote_addr = built.remote_addr;
  wr->wr.rdma.rkey = built.rkey;
}

}  // namespace

int WrComplete(SimQp* qp, const WrFault& fault) {
  int err = qp->ex_error;
  if (err == 0 && !qp->ex_batch.empty()) {
    std::vector<ibv_sge>& sges = qp->ex_sges;
    std::vector<ibv_send_wr>& wrs = qp->ex_wrs;
    sges.resize(qp->ex_batch.size());
    wrs.resize(qp->ex_batch.size());
    for (size_t i = 0; i < qp->ex_batch.size(); ++i) {
      ToSendWr(qp, qp->ex_batch[i], &sges[i], &wrs[i]);
      wrs[i].next = i + 1 < wrs.size() ? &wrs[i + 1] : nullptr;
    }
    ibv_send_wr* bad_wr = nullptr;
    err = PostSendWrs(qp, wrs.data(), &bad_wr, fault, /*extended=*/true);
  }
  qp->ex_batch.clear();
  qp->ex_sge_pool.clear();
  qp->ex_inline_pool.clear();
  qp->ex_error = 0;
  qp->ex_mu.Unlock();
  return err;
}

void WrAbort(SimQp* qp) {
  qp->ex_batch.clear();
  qp->ex_sge_pool.clear();
  qp->ex_inline_pool.clear();
  qp->ex_error = 0;
  qp->ex_mu.Unlock();
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
    if (watch) PoisonReceive(qp->pd, wr, qp->cap.max_recv_sge);
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

int PostSrqRecv(SimSrq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (RaceDetectorOn() && CurrentExecutionMode() == ExecutionMode::kAsync) {
    for (const ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
      PoisonReceive(srq->pd, w, srq->max_sge);
    }
  }
  int err = 0;
  std::vector<std::weak_ptr<SimLink>> waiters;
  {
    softrpma::MutexLock lock(&srq->mu);
    for (; wr != nullptr; wr = wr->next) {
      err = ValidateRecv(wr, srq->max_sge);
      if (err != 0) break;
      if (srq->in_use.load(std::memory_order_acquire) >= srq->max_wr) {
        err = ENOMEM;  // posted, or completed and not polled yet
        break;
      }
      srq->in_use.fetch_add(1, std::memory_order_acq_rel);
      if (TraceOn()) {
        TraceEvent("post_srq_recv srq=%u wr_id=0x%llx len=%llu", srq->srq.handle,
                   static_cast<unsigned long long>(wr->wr_id),
                   static_cast<unsigned long long>(RecvCapacity(wr)));
      }
      FillRecv(wr, &srq->rq.push_back());
    }
    waiters.swap(srq->waiters);
  }
  // Resume the senders that waited for a receive of this SRQ, in the order they began waiting.
  for (const std::weak_ptr<SimLink>& weak : waiters) {
    std::shared_ptr<SimLink> link = weak.lock();
    if (link == nullptr) continue;
    softrpma::MutexLock lock(&link->mu);
    ProgressLinkLocked(link.get());
    KickLinkLocked(link.get());
  }
  if (err != 0) {
    *bad_wr = wr;
    return err;
  }
  return 0;
}

void AddLink(LinkSet* set, const std::shared_ptr<SimLink>& link) {
  softrpma::MutexLock lock(&set->mu);
  auto& links = set->links;
  links.erase(std::remove_if(links.begin(), links.end(),
                             [](const std::weak_ptr<SimLink>& l) { return l.expired(); }),
              links.end());
  for (const std::weak_ptr<SimLink>& known : links) {
    if (known.lock() == link) return;
  }
  links.push_back(link);
}

void RunPollPoint(LinkSet* set) {
  softrpma::MutexLock lock(&set->mu);
  for (const std::weak_ptr<SimLink>& weak : set->links) {
    std::shared_ptr<SimLink> link = weak.lock();
    if (link == nullptr || link->unexecuted.load(std::memory_order_acquire) == 0) continue;
    softrpma::MutexLock link_lock(&link->mu);
    for (SimQp* qp : link->side) {
      if (qp != nullptr) qp->released_seq = qp->posted_seq;
    }
    ProgressLinkLocked(link.get());
  }
}

bool WouldCompleteOn(LinkSet* set, const SimCq* cq, bool* solicited) {
  bool any = false;
  *solicited = false;
  softrpma::MutexLock lock(&set->mu);
  for (const std::weak_ptr<SimLink>& weak : set->links) {
    std::shared_ptr<SimLink> link = weak.lock();
    if (link == nullptr || link->remote != nullptr ||
        link->unexecuted.load(std::memory_order_acquire) == 0) {
      continue;
    }
    softrpma::MutexLock link_lock(&link->mu);
    for (SimQp* qp : link->side) {
      if (qp == nullptr) continue;
      const WouldComplete would = WouldCompleteLocked(link.get(), qp);
      SimQp* peer = link->side[1 - qp->side];
      any = any || (would.send && qp->send_cq == cq);
      if (would.recv && peer != nullptr && peer->recv_cq == cq) {
        any = true;
        *solicited = *solicited || would.recv_solicited;
      }
    }
  }
  return any;
}


// ---- QPs of ibv_create_qp (qp.h, "QPs of ibv_create_qp") ---------------------------------

namespace {

// The verbs QPs of this process by QP number, and the process's endpoint (named after its GID).
struct VerbsQps {
  softrpma::Mutex mu;
  absl::flat_hash_map<uint32_t, std::weak_ptr<SimLink>> links ABSL_GUARDED_BY(mu);
  std::unique_ptr<host::Listener> listener ABSL_GUARDED_BY(mu);
  pid_t listener_pid ABSL_GUARDED_BY(mu) = 0;
};

VerbsQps& TheVerbsQps() {
  static VerbsQps* qps = new VerbsQps;  // never destroyed: the fabric thread may use it at exit
  return *qps;
}

std::shared_ptr<SimLink> FindVerbsLink(uint32_t qp_num) {
  VerbsQps& qps = TheVerbsQps();
  softrpma::MutexLock lock(&qps.mu);
  auto it = qps.links.find(qp_num);
  return it != qps.links.end() ? it->second.lock() : nullptr;
}

// The fabric endpoint of the process owning `gid`: "gid-" and its 32 hex digits.
std::string GidEndpoint(const uint8_t gid[16]) {
  std::string name = "gid-";
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    name += kHex[gid[i] >> 4];
    name += kHex[gid[i] & 15];
  }
  return name;
}

// A connection a peer dialed to this process's endpoint: a kQpBind, then the requests of one
// peer QP toward one QP of this process.
class ServeEnd final : public host::Conn::Handler {
 public:
  explicit ServeEnd(std::weak_ptr<host::Conn> conn) : conn_(std::move(conn)) {}

  // The first message must be the kQpBind: no other body is read before it.
  bool OnHeader(const wire::Header& header) override {
    return bound_ || static_cast<wire::Type>(header.type) == wire::Type::kQpBind;
  }
  // The peer read enough of our responses: its reads that waited are served.
  void OnDrained() override {
    if (!bound_) return;
    if (std::shared_ptr<SimLink> link = FindVerbsLink(dst_qp_num_); link != nullptr) {
      ResumeRemoteLink(link);
    }
  }

  void OnMessage(const wire::Header& header, const uint8_t* body) override {
    std::shared_ptr<host::Conn> conn = conn_.lock();
    if (conn == nullptr) return;
    if (!bound_) {
      wire::QpBindBody bind;
      if (static_cast<wire::Type>(header.type) != wire::Type::kQpBind) {
        conn->Close();  // a protocol violation ends this connection only
        return;
      }
      std::memcpy(&bind, body, sizeof(bind));
      uint8_t ours[16];
      ProcessGid(ours);
      // A bind meant for another GID (a stale name, a forked parent's) is not ours to serve.
      if (!wire::ValidateQpBindBody(bind) || std::memcmp(bind.dst_gid, ours, 16) != 0) {
        conn->Close();
        return;
      }
      // Who sends is the kernel's word (SO_PEERCRED): a bind naming another process (its pid,
      // or a GID that is not the sender's own) would let a third process speak for a QP's
      // peer. It ends the connection.
      int32_t gid_pid = 0;
      const pid_t peer_pid = conn->peer_pid();
      if (bind.pid != peer_pid) {
        wire::ReportPeerMismatch("pid", bind.pid, peer_pid);
        conn->Close();
        return;
      }
      if (!GidPid(bind.src_gid, &gid_pid) || gid_pid != (peer_pid & 0xffffff)) {
        wire::ReportPeerMismatch("the GID of pid", gid_pid, peer_pid);
        conn->Close();
        return;
      }
      bound_ = true;
      dst_qp_num_ = bind.dst_qp_num;
      src_qp_num_ = bind.src_qp_num;
      std::memcpy(src_gid_, bind.src_gid, 16);
      return;
    }
    if (!IsRequest(header.type)) return;  // nothing else travels this way
    if (std::shared_ptr<SimLink> link = FindVerbsLink(dst_qp_num_); link != nullptr) {
      softrpma::MutexLock lock(&link->mu);
      SimQp* qp = LocalSideLocked(link.get());
      // Bound back to the sender (RTR done), named by its GID and QP number both (every
      // process numbers its QPs from the same start): served as any remote link's requests are.
      if (qp != nullptr && link->remote != nullptr && link->remote_qp_num == src_qp_num_ &&
          std::memcmp(qp->verbs_attr.ah_attr.grh.dgid.raw, src_gid_, 16) == 0) {
        if (link->serve != conn) {
          link->serve = conn;
          // A busy-polling program serves the peer's requests itself (host.h, Progress).
          qp->send_cq->AddRemote(conn);
          if (qp->recv_cq != qp->send_cq) qp->recv_cq->AddRemote(conn);
        }
        ServeOrQueueLocked(link.get(), qp, header, body);
        return;
      }
    }
    // No such QP, or not connected to the sender (yet): a real responder drops the packet and
    // the requester's retries run out.
    Respond(conn.get(), header, IBV_WC_RETRY_EXC_ERR, nullptr);
  }
  void OnClosed() override {}

 private:
  std::weak_ptr<host::Conn> conn_;
  // The fabric runs a connection's handler one message at a time.
  bool bound_ = false;
  uint32_t dst_qp_num_ = 0;
  uint32_t src_qp_num_ = 0;
  uint8_t src_gid_[16] = {};
};

// The connection a QP's RTR dialed: the responses to its requests.
class DialEnd final : public host::Conn::Handler {
 public:
  explicit DialEnd(std::weak_ptr<SimLink> link) : link_(std::move(link)) {}
  // Only responses come this way, and no read response larger than a read this link asked
  // for: a peer cannot make this process buffer what it only announces.
  bool OnHeader(const wire::Header& header) override {
    const wire::Type type = static_cast<wire::Type>(header.type);
    if (type != wire::Type::kAck && type != wire::Type::kReadResponse) return false;
    std::shared_ptr<SimLink> link = link_.lock();
    return link == nullptr || ResponseFits(link, header);
  }
  void OnMessage(const wire::Header& header, const uint8_t* body) override {
    const wire::Type type = static_cast<wire::Type>(header.type);
    if (type != wire::Type::kAck && type != wire::Type::kReadResponse) return;
    if (std::shared_ptr<SimLink> link = link_.lock(); link != nullptr) {
      HandleRemoteMessage(link, header, body);
    }
  }
  void OnClosed() override {
    std::shared_ptr<SimLink> link = link_.lock();
    if (link == nullptr) return;
    softrpma::MutexLock lock(&link->mu);
    PeerGoneLocked(link.get());
  }

 private:
  std::weak_ptr<SimLink> link_;
};

// Listens on this process's endpoint, once per process (a child of fork() has a GID of its
// own and listens anew; the parent's listener object is left to the parent).
int EnsureListening() {
  VerbsQps& qps = TheVerbsQps();
  softrpma::MutexLock lock(&qps.mu);
  if (qps.listener != nullptr && qps.listener_pid == getpid()) return 0;
  if (qps.listener != nullptr) {
    static_cast<void>(qps.listener.release());  // the parent's
    qps.links.clear();  // and so are its QPs: a peer naming one must not reach the copies
  }
  uint8_t gid[16];
  ProcessGid(gid);
  const int err = host::ListenEndpoint(
      GidEndpoint(gid),
      [](const std::shared_ptr<host::Conn>& conn) {
        return std::static_pointer_cast<host::Conn::Handler>(std::make_shared<ServeEnd>(conn));
      },
      &qps.listener);
  if (err != 0) return err;
  qps.listener_pid = getpid();
  return 0;
}

// The kernel's ib_modify_qp_is_ok table, RC column: the attributes a transition needs and
// those it may take (besides IBV_QP_STATE). False: not a valid transition.
bool TransitionMasks(ibv_qp_state cur, ibv_qp_state next, int* required, int* optional) {
  *required = 0;
  *optional = 0;
  if (next == IBV_QPS_RESET) return true;
  if (next == IBV_QPS_ERR) return cur != IBV_QPS_RESET;  // the RESET row has RESET and INIT only
  switch (cur) {
    case IBV_QPS_RESET:
      if (next != IBV_QPS_INIT) return false;
      *required = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      return true;
    case IBV_QPS_INIT:
      if (next == IBV_QPS_INIT) {
        *optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        return true;
      }
      if (next != IBV_QPS_RTR) return false;
      *required = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      *optional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
      return true;
    case IBV_QPS_RTR:
      if (next != IBV_QPS_RTS) return false;
      *required = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                  IBV_QP_MAX_QP_RD_ATOMIC;
      *optional = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                  IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;
      return true;
    case IBV_QPS_RTS:
      if (next != IBV_QPS_RTS) return false;
      *optional = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
                  IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER;
      return true;
    default:
      return false;  // SQD, SQE: not modelled
  }
}

constexpr int kKnownAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
    IBV_ACCESS_REMOTE_ATOMIC;

// The values of the attributes in `mask`. REQUIRES: the mask passed TransitionMasks.
int CheckValues(const SimQp* qp, const ibv_qp_attr& attr, int mask) {
  const DeviceProfile& profile = ActiveProfile();
  if ((mask & IBV_QP_PORT) != 0 && attr.port_num != 1) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) != 0 && attr.pkey_index != 0) return EINVAL;  // one pkey
  if ((mask & IBV_QP_ACCESS_FLAGS) != 0 && (attr.qp_access_flags & ~kKnownAccess) != 0) {
    return EINVAL;
  }
  if ((mask & IBV_QP_PATH_MTU) != 0 && (attr.path_mtu < IBV_MTU_256 || attr.path_mtu > IBV_MTU_4096)) {
    return EINVAL;
  }
  if ((mask & IBV_QP_AV) != 0) {
    // RoCE: the AV names the peer by its GID (no GRH: mlx5 / rxe refuse, EINVAL).
    if (attr.ah_attr.is_global == 0 || attr.ah_attr.grh.sgid_index != 0) return EINVAL;
    if (attr.ah_attr.port_num != 0 && attr.ah_attr.port_num != 1) return EINVAL;
  }
  if ((mask & IBV_QP_DEST_QPN) != 0 && attr.dest_qp_num >= (1u << 24)) return EINVAL;
  if ((mask & IBV_QP_RQ_PSN) != 0 && attr.rq_psn >= (1u << 24)) return EINVAL;
  if ((mask & IBV_QP_SQ_PSN) != 0 && attr.sq_psn >= (1u << 24)) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) != 0 && attr.min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) != 0 && attr.timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) != 0 && attr.retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) != 0 && attr.rnr_retry > 7) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) != 0 &&
      attr.max_dest_rd_atomic > profile.max_qp_rd_atom) {
    return EINVAL;
  }
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) != 0 && attr.max_rd_atomic > profile.max_qp_init_rd_atom) {
    return EINVAL;
  }
  static_cast<void>(qp);
  return 0;
}

// Copies the attributes of `mask` into the QP's record. REQUIRES: link->mu held.
void RecordAttrs(SimQp* qp, const ibv_qp_attr& attr, int mask) {
  ibv_qp_attr& to = qp->verbs_attr;
  if (mask & IBV_QP_PKEY_INDEX) to.pkey_index = attr.pkey_index;
  if (mask & IBV_QP_PORT) to.port_num = attr.port_num;
  if (mask & IBV_QP_ACCESS_FLAGS) to.qp_access_flags = attr.qp_access_flags;
  if (mask & IBV_QP_AV) to.ah_attr = attr.ah_attr;
  if (mask & IBV_QP_ALT_PATH) {
    to.alt_ah_attr = attr.alt_ah_attr;
    to.alt_pkey_index = attr.alt_pkey_index;
    to.alt_port_num = attr.alt_port_num;
    to.alt_timeout = attr.alt_timeout;
  }
  if (mask & IBV_QP_PATH_MTU) to.path_mtu = attr.path_mtu;
  if (mask & IBV_QP_DEST_QPN) to.dest_qp_num = attr.dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) to.rq_psn = attr.rq_psn;
  if (mask & IBV_QP_SQ_PSN) to.sq_psn = attr.sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) to.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) to.max_rd_atomic = attr.max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) to.min_rnr_timer = attr.min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) to.timeout = attr.timeout;
  if (mask & IBV_QP_RETRY_CNT) to.retry_cnt = attr.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) to.rnr_retry = attr.rnr_retry;
  if (mask & IBV_QP_PATH_MIG_STATE) to.path_mig_state = attr.path_mig_state;
}

// To RESET: the queues empty without completions, the peer is forgotten. Returns the
// connection to close (outside the lock). REQUIRES: link->mu held.
std::shared_ptr<Transport> ResetLocked(SimQp* qp) {
  SimLink* link = qp->link.get();
  uint32_t popped = 0;
  while (!qp->sq.empty()) {
    PopSendLocked(qp);
    ++popped;
  }
  qp->sq_in_use.fetch_sub(std::min(popped + qp->unretired, qp->sq_in_use.load()),
                          std::memory_order_acq_rel);
  qp->unretired = 0;
  qp->sq_sent = 0;
  uint32_t recvs = 0;
  while (!qp->rq.empty()) {
    qp->rq.pop_front();
    ++recvs;
  }
  qp->rq_in_use.fetch_sub(std::min(recvs, qp->rq_in_use.load()), std::memory_order_acq_rel);
  std::shared_ptr<Transport> conn = std::move(link->remote);
  link->remote = nullptr;
  link->serve = nullptr;
  link->peer_gone = false;
  ClearIncomingLocked(link);
  link->remote_qp_num = 0;
  link->remote_pid = 0;
  link->we_reach_peer = false;
  std::memset(&qp->verbs_attr, 0, sizeof(qp->verbs_attr));
  SetStateLocked(qp, IBV_QPS_RESET);
  return conn;
}

// Moves `qp` (INIT) out of a link it shares with another QP into a new link of its own.
// Returns EINVAL when it left INIT meanwhile.
int LeaveSharedLink(SimQp* qp) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  VerbsQps& qps = TheVerbsQps();
  softrpma::MutexLock registry_lock(&qps.mu);
  std::shared_ptr<SimLink> old_link = qp->link;
  std::shared_ptr<SimLink> fresh;
  {
    softrpma::MutexLock lock(&old_link->mu);
    if (qp->state != IBV_QPS_INIT) return EINVAL;
    if (old_link->side[1 - qp->side] == nullptr) return 0;
    old_link->side[qp->side] = nullptr;
    fresh = std::make_shared<SimLink>();
    softrpma::MutexLock fresh_lock(&fresh->mu);
    fresh->side[0] = qp;
    qp->side = 0;
    qp->link = fresh;
    qps.links[qp->qp.qp_num] = fresh;
  }
  for (SimCq* cq : {qp->send_cq, qp->recv_cq}) {
    AddLink(&cq->links, fresh);
    if (cq->channel != nullptr) AddLink(&cq->channel->links, fresh);
  }
  return 0;
}

// INIT -> RTR toward QP `attr->dest_qp_num` of this process (qp.h). Returns 0 or EINVAL
// (the QP left INIT meanwhile).
int BindLocal(SimQp* qp, const ibv_qp_attr& attr, int mask) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  VerbsQps& qps = TheVerbsQps();
  softrpma::MutexLock registry_lock(&qps.mu);  // one binding at a time: two RTRs meet
  std::shared_ptr<SimLink> old_link = qp->link;
  std::shared_ptr<SimLink> partner_link;
  if (auto it = qps.links.find(attr.dest_qp_num); it != qps.links.end()) {
    partner_link = it->second.lock();
  }
  if (partner_link == old_link) partner_link = nullptr;
  // Both links, in address order.
  SimLink* locks[2] = {old_link.get(), partner_link.get()};
  if (locks[1] != nullptr && locks[1] < locks[0]) std::swap(locks[0], locks[1]);
  for (SimLink* l : locks) {
    if (l != nullptr) l->mu.Lock();
  }
  int err = 0;
  std::shared_ptr<SimLink> target;
  if (qp->state != IBV_QPS_INIT) {
    err = EINVAL;
  } else {
    uint8_t own_gid[16];
    ProcessGid(own_gid);
    SimQp* partner = nullptr;
    int free_side = -1;
    if (partner_link != nullptr && partner_link->remote == nullptr) {
      for (int i = 0; i < 2; ++i) {
        SimQp* side = partner_link->side[i];
        if (side != nullptr && side->qp.qp_num == attr.dest_qp_num) partner = side;
      }
      if (partner != nullptr) {
        free_side = 1 - partner->side;
        if (partner_link->side[free_side] != nullptr || !partner->verbs ||
            (partner->state != IBV_QPS_RTR && partner->state != IBV_QPS_RTS) ||
            partner->verbs_attr.dest_qp_num != qp->qp.qp_num ||
            std::memcmp(partner->verbs_attr.ah_attr.grh.dgid.raw, own_gid, 16) != 0) {
          partner = nullptr;  // not (yet) bound back to us: wait alone
        }
      }
    }
    const bool alone = old_link->side[1 - qp->side] == nullptr;
    if (partner != nullptr) {
      old_link->side[qp->side] = nullptr;
      partner_link->side[free_side] = qp;
      qp->side = free_side;
      target = partner_link;
    } else if (!alone) {
      // Still in the link of an earlier binding (RESET since): a link of its own.
      old_link->side[qp->side] = nullptr;
      target = std::make_shared<SimLink>();
      softrpma::MutexLock lock(&target->mu);
      target->side[0] = qp;
      qp->side = 0;
    } else {
      target = old_link;
    }
    qp->link = target;
    qps.links[qp->qp.qp_num] = target;
    if (TraceOn()) {
      TraceEvent("qp_bind qp=%u dest_qp=%u local=1 linked=%d", qp->qp.qp_num, attr.dest_qp_num,
                 partner != nullptr ? 1 : 0);
    }
  }
  for (SimLink* l : locks) {
    if (l != nullptr) l->mu.Unlock();
  }
  if (err != 0) return err;
  if (target != old_link) {
    // Where the poll points of asynchronous execution find it (no link lock held: AddLink
    // takes the set's lock, which RunPollPoint holds while it takes links' locks).
    for (SimCq* cq : {qp->send_cq, qp->recv_cq}) {
      AddLink(&cq->links, target);
      if (cq->channel != nullptr) AddLink(&cq->channel->links, target);
    }
  }
  softrpma::MutexLock lock(&target->mu);
  RecordAttrs(qp, attr, mask);
  SetStateLocked(qp, IBV_QPS_RTR);
  ProgressLinkLocked(target.get());
  return 0;
}

}  // namespace

int CreateVerbsQp(ibv_qp_init_attr_ex* attr, SimQp** qp) {
  if (attr == nullptr || qp == nullptr) return EINVAL;
  switch (attr->qp_type) {
    case IBV_QPT_RC:
      break;
    case IBV_QPT_UC:
    case IBV_QPT_UD:
    case IBV_QPT_RAW_PACKET:
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
    case IBV_QPT_DRIVER:
      return EOPNOTSUPP;  // types mlx5 has and the simulator does not model
    default:
      return EINVAL;
  }
  if (int err = EnsureListening(); err != 0) return err;
  SimQp* made = nullptr;
  if (int err = CreateQp(attr, nullptr, &made); err != 0) return err;
  made->verbs = true;
  std::memset(&made->verbs_init, 0, sizeof(made->verbs_init));
  CopyCommonInitAttr(*attr, &made->verbs_init);  // with the granted caps
  {
    softrpma::MutexLock lock(&made->link->mu);
    std::memset(&made->verbs_attr, 0, sizeof(made->verbs_attr));
    SetStateLocked(made, IBV_QPS_RESET);
  }
  {
    VerbsQps& qps = TheVerbsQps();
    softrpma::MutexLock lock(&qps.mu);
    qps.links[made->qp.qp_num] = made->link;
  }
  *qp = made;
  return 0;
}

int CreateVerbsQp(SimPd* pd, ibv_qp_init_attr* attr, SimQp** qp) {
  if (pd == nullptr || attr == nullptr) return EINVAL;
  ibv_qp_init_attr_ex ex;
  std::memset(&ex, 0, sizeof(ex));
  CopyCommonInitAttr(*attr, &ex);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = &pd->pd;
  const int err = CreateVerbsQp(&ex, qp);
  if (err == 0) attr->cap = ex.cap;
  return err;
}

int ModifyVerbsQp(SimQp* qp, const ibv_qp_attr* attr, int attr_mask) {
  if (attr == nullptr) return EINVAL;
  softrpma::MutexLock modify(&qp->modify_mu);
  SimLink* link = qp->link.get();
  ibv_qp_state cur;
  {
    softrpma::MutexLock lock(&link->mu);
    CheckOverflowLocked(qp);
    cur = qp->state;
  }
  if ((attr_mask & IBV_QP_CUR_STATE) != 0 && attr->cur_qp_state != cur) return EINVAL;
  const ibv_qp_state next = (attr_mask & IBV_QP_STATE) != 0 ? attr->qp_state : cur;
  if (!qp->verbs) {
    // A QP of rdma_create_qp: its states are the CM's; only the error state is the user's.
    if (attr_mask != IBV_QP_STATE || next != IBV_QPS_ERR) return EINVAL;
    SetQpError(qp);
    return 0;
  }
  if (next > IBV_QPS_ERR || next == IBV_QPS_SQD || next == IBV_QPS_SQE) return EINVAL;
  int required = 0;
  int optional = 0;
  if (!TransitionMasks(cur, next, &required, &optional)) return EINVAL;
  if ((attr_mask & required) != required) return EINVAL;
  if ((attr_mask & ~(required | optional | IBV_QP_STATE)) != 0) return EINVAL;
  if (int err = CheckValues(qp, *attr, attr_mask); err != 0) return err;

  // RTR: bind to the peer (outside the link's lock: dialing may wait for the peer's accept).
  std::shared_ptr<host::Conn> conn;
  if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
    const uint8_t* dgid = attr->ah_attr.grh.dgid.raw;
    uint8_t own_gid[16];
    ProcessGid(own_gid);
    if (std::memcmp(dgid, own_gid, sizeof(own_gid)) == 0 && attr->dest_qp_num != qp->qp.qp_num) {
      return BindLocal(qp, *attr, attr_mask);
    }
    // Still in the in-process link of an earlier binding (RESET since): a link of its own
    // first, which becomes a remote link below.
    if (int err = LeaveSharedLink(qp); err != 0) return err;
    link = qp->link.get();
    int32_t pid = 0;
    if (GidPid(dgid, &pid)) {
      auto end = std::make_shared<DialEnd>(qp->link);
      // The endpoint must be the process the GID names (the kernel says who listens there):
      // another process of the fabric may have taken a name that is not its own.
      if (host::DialEndpoint(GidEndpoint(dgid), end, &conn) == 0 &&
          (conn->peer_pid() & 0xffffff) != pid) {
        wire::ReportPeerMismatch("the endpoint of the GID of pid", pid, conn->peer_pid());
        conn->Close();
        conn = nullptr;
      }
      if (conn != nullptr) {
        wire::QpBindBody bind;
        std::memset(&bind, 0, sizeof(bind));
        bind.version = wire::kQpBindVersion;
        bind.src_qp_num = qp->qp.qp_num;
        bind.dst_qp_num = attr->dest_qp_num;
        bind.pid = static_cast<int32_t>(getpid());
        ProcessGid(bind.src_gid);
        std::memcpy(bind.dst_gid, dgid, sizeof(bind.dst_gid));
        wire::Header header = wire::MakeHeader(wire::Type::kQpBind);
        header.body_len = sizeof(bind);
        iovec iov{&bind, sizeof(bind)};
        conn->Send(header, &iov, 1);
      } else {
        conn = nullptr;  // nobody at that GID: sends time out (an in-process link, no peer)
      }
    }
    if (TraceOn()) {
      TraceEvent("qp_bind qp=%u dest_qp=%u reached=%d", qp->qp.qp_num, attr->dest_qp_num,
                 conn != nullptr ? 1 : 0);
    }
    if (conn != nullptr) AttachRemote(qp, conn);
  }

  std::shared_ptr<Transport> to_close;
  bool done;
  {
    softrpma::MutexLock lock(&link->mu);
    if (qp->state != cur) {  // moved meanwhile (an overflow: ERR)
      if (conn != nullptr) to_close = std::move(link->remote);
    } else {
      RecordAttrs(qp, *attr, attr_mask);
      if (next == IBV_QPS_RESET) {
        to_close = ResetLocked(qp);
      } else if (next == IBV_QPS_ERR) {
        EnterErrorLocked(qp);
      } else if (next != cur) {
        if (next == IBV_QPS_RTR && conn != nullptr) link->remote_qp_num = attr->dest_qp_num;
        SetStateLocked(qp, next);
        ProgressLinkLocked(link);  // RTS: sends may go; RTR: waiting requests may be served
      }
    }
    done = qp->state == next || next == IBV_QPS_ERR;
  }
  if (to_close != nullptr) to_close->Close();
  return done ? 0 : EINVAL;
}

int QueryVerbsQp(SimQp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  if (attr == nullptr || init_attr == nullptr) return EINVAL;
  static_cast<void>(attr_mask);  // as mlx5: everything is filled in
  softrpma::MutexLock modify(&qp->modify_mu);
  softrpma::MutexLock lock(&qp->link->mu);
  CheckOverflowLocked(qp);
  if (qp->verbs) {
    *attr = qp->verbs_attr;
    *init_attr = qp->verbs_init;
  } else {
    std::memset(attr, 0, sizeof(*attr));
    std::memset(init_attr, 0, sizeof(*init_attr));
    attr->port_num = 1;
    attr->path_mtu = IBV_MTU_1024;
    init_attr->qp_context = qp->qp.qp_context;
    init_attr->send_cq = qp->qp.send_cq;
    init_attr->recv_cq = qp->qp.recv_cq;
    init_attr->srq = qp->qp.srq;
    init_attr->qp_type = IBV_QPT_RC;
    init_attr->sq_sig_all = qp->sq_sig_all ? 1 : 0;
  }
  attr->qp_state = qp->state;
  attr->cur_qp_state = qp->state;
  attr->cap = qp->cap;
  init_attr->cap = qp->cap;
  return 0;
}

void DestroyVerbsQp(SimQp* qp) {
  {
    VerbsQps& qps = TheVerbsQps();
    softrpma::MutexLock lock(&qps.mu);
    qps.links.erase(qp->qp.qp_num);
  }
  std::shared_ptr<Transport> conn;
  std::shared_ptr<SimLink> link = qp->link;
  {
    softrpma::MutexLock lock(&link->mu);
    conn = link->remote;
  }
  DestroyQp(qp);
  if (conn != nullptr) conn->Close();
}

}  // namespace softrpma::sim
