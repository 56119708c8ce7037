// qp.cc: the QPs of the simulated NIC: creation and destruction, their states (the CM's
// transitions, ERROR and its flushes) and the entry points through which a link's carrier
// hands over what arrived from the peer (HandleRemoteMessage). The data path is in the
// files nic_internal.h lists.

#include "simverbs/sim/nic/qp.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "simverbs/alloc.h"
#include "simverbs/sim/nic/nic_internal.h"
#include "simverbs/sim/trace/trace.h"
#include "simverbs/sim/waits.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace nic_internal {

// THE QP STATE SETTER: the state of the model and the one the QP's struct shows, and its
// trace event. REQUIRES: qp->link->mu held.
void SetStateLocked(SimQp* qp, ibv_qp_state state) {
  qp->state = state;
  qp->qp.state = state;
  PublishGrantLocked(qp);
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
    PopAndCompleteSendLocked(qp, IBV_WC_WR_FLUSH_ERR, 0, /*force_signaled=*/true, 0);
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

}  // namespace nic_internal

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
  qp.qp_type = attr.qp_type;
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
  InitReceiveQueue(&rq, cap.max_recv_wr, cap.max_recv_sge);
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

}  // namespace

namespace nic_internal {

// The send_ops_flags this device accepts: the RC ops, immediate data where the device has it,
// atomic write where it reports the capability, the 64-bit atomics where atomic_cap says so.
uint64_t ModelledSendOps() {
  uint64_t ops = AllSendOpsFlags();
  if (!ActiveProfile().immediate_data) {
    ops &= ~uint64_t{IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND_WITH_IMM};
  }
  if (!AtomicWriteSupported()) ops &= ~uint64_t{IBV_QP_EX_WITH_ATOMIC_WRITE};
  if (ActiveProfile().atomic_cap == IBV_ATOMIC_NONE) {
    ops &= ~uint64_t{IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD};
  }
  return ops;
}

void CleanCqs(SimQp* qp) {
  if (!qp->cq_cleaned_at_destroy) return;
  qp->recv_cq->Clean(qp->qp.qp_num);
  if (qp->send_cq != qp->recv_cq) qp->send_cq->Clean(qp->qp.qp_num);
}

}  // namespace nic_internal

int CreateQp(ibv_qp_init_attr_ex* attr_ex, const std::shared_ptr<SimLink>& join, SimQp** qp) {
  if (attr_ex == nullptr || (attr_ex->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 ||
      attr_ex->pd == nullptr) {
    return EINVAL;
  }
  constexpr uint32_t kModelledMask =
      IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  if ((attr_ex->comp_mask & ~kModelledMask) != 0) {
    return EINVAL;  // XRC, TSO, RSS...: not an RC QP of this device
  }
  // Create flags present but 0 is a plain QP, as with every provider (libfabric's verbs provider
  // sends them so); a flag (scatter FCS, loopback blocking...) is not modelled.
  if ((attr_ex->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) != 0 && attr_ex->create_flags != 0) {
    return EINVAL;
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
  if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UD) return EINVAL;
  // A UD QP's extended post API has the send builders only (mlx5's
  // MLX5_SUPPORTED_SEND_OPS_FLAGS_UD, rxe's RXE_SUP_UD_QP_SEND_OPS_FLAGS), and
  // ibv_wr_set_ud_addr.
  if (attr->qp_type == IBV_QPT_UD &&
      (send_ops_flags & ~uint64_t{IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM}) != 0) {
    return EOPNOTSUPP;
  }
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
  sim_qp->slots_freed_at_poll = profile.slots_freed_at_poll;
  sim_qp->cq_cleaned_at_destroy = profile.cq_cleaned_at_destroy_qp;
  attr_ex->cap = plain.cap;
  waits::AddQp({&sim_qp->qp, &sim_qp->sq_in_use, &sim_qp->rq_in_use, sim_qp->cap.max_send_wr,
                sim_qp->cap.max_recv_wr, sim_qp->send_cq->cq.handle, sim_qp->recv_cq->cq.handle});
  *qp = sim_qp;
  return 0;
}

void DestroyQp(SimQp* qp) {
  waits::RemoveQp(&qp->qp);
  {
    SimLink* link = qp->link.get();
    softrpma::MutexLock lock(&link->mu);
    // No push lands for a QP that is gone (its responder would answer none).
    if (link->remote != nullptr) WithdrawGrantLocked(link);
    link->side[qp->side] = nullptr;
    for (size_t i = 0; i < qp->sq.size(); ++i) {  // they vanish
      MarkExecutedLocked(link, qp->sq.at(i));
      ForgetPeerCopy(qp->sq.at(i));
    }
    // A remote peer's requests that waited for a receive: nobody will serve them.
    for (const IncomingRequest& request : link->incoming) {
      RespondLocked(link, request.header, IBV_WC_RETRY_EXC_ERR, nullptr);
    }
    ClearIncomingLocked(link);
  }
  CleanCqs(qp);
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
  NoteRemoteLink();
  qp->send_cq->AddRemote(conn);
  if (qp->recv_cq != qp->send_cq) qp->recv_cq->AddRemote(conn);
  softrpma::MutexLock lock(&qp->link->mu);
  qp->link->remote = std::move(conn);
  qp->link->carrier = &HostCarrier();
}

namespace nic_internal {

// The link's HOST carrier ends (carrier.h): the link is LOCAL again, and its connection is the
// caller's to close, outside the lock. REQUIRES: link->mu held.
std::shared_ptr<Transport> DetachRemoteLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  WithdrawGrantLocked(link);  // pushes end with the carrier
  link->carrier = &LocalCarrier();
  std::shared_ptr<Transport> conn = std::move(link->remote);
  link->remote = nullptr;
  return conn;
}

}  // namespace nic_internal

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
    case wire::Type::kCompareSwap:
    case wire::Type::kFetchAdd:
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
  link->carrier->DrainLocked(link.get());
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

}  // namespace softrpma::sim
