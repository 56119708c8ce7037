#include "simverbs/sim/cm/cm.h"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "simverbs/alloc.h"
#include "simverbs/sim/cm/addr.h"
#include "simverbs/sim/cm/cm_peer.h"
#include "simverbs/sim/nic/cq.h"
#include "simverbs/sim/nic/qp.h"
#include "simverbs/sim/sched/sched.h"
#include "simverbs/sim/trace/trace.h"
#include "simverbs/sim/waits.h"

namespace softrpma::sim {
namespace {

using State = SimCmId::State;

// A held timer's waiter looks again at least this often (PendingCmEvent::hold_until_ns).
constexpr uint64_t kHoldSliceNs = 5'000'000;

// How much longer `event` is held for a peer process's answer at real time `real_ns`
// (host::NowNs); 0: not held.
uint64_t HeldForNs(const PendingCmEvent& event, uint64_t real_ns) {
  return event.until_drep && event.hold_until_ns > real_ns ? event.hold_until_ns - real_ns : 0;
}

// Sleeps until one of `watched` is readable (its index) or `ns` passed (-1).
int WaitOnWatches(const SleeperWatches& watched, uint64_t ns) {
  pollfd fds[SleeperWatches::kMax];
  for (int i = 0; i < watched.count(); ++i) {
    fds[i] = pollfd{watched.fds()[i], POLLIN | POLLRDHUP, 0};
  }
  const int ms = static_cast<int>((ns + 999'999) / 1'000'000);
  const int got = poll(fds, static_cast<nfds_t>(watched.count()), ms);
  for (int i = 0; got > 0 && i < watched.count(); ++i) {
    if (fds[i].revents != 0) return i;
  }
  return -1;
}

sockaddr* SrcOf(SimCmId* id) { return &id->id.route.addr.src_addr; }
sockaddr* DstOf(SimCmId* id) { return &id->id.route.addr.dst_addr; }

// Whether the active profile's CM is iWARP's (siw): the kernel's iw_cm under rdma_cm's
// cma_iw_handler (drivers/infiniband/core/cma.c) instead of the IB CM; docs/DEVICES.md.
bool IwarpCm() { return ActiveProfile().transport == IBV_TRANSPORT_IWARP; }

// The port space of `id`'s port: UD ids' apart from RC ids' (host.h, PortSpace), as the
// kernel's CMA keeps RDMA_PS_UDP's apart from RDMA_PS_TCP's.
host::PortSpace SpaceOf(const SimCmId* id) {
  return id->id.qp_type == IBV_QPT_UD ? host::PortSpace::kUdp : host::PortSpace::kRc;
}

bool ValidPrivateData(const void* data, int len, int max) {
  return len <= max && (len == 0 || data != nullptr);
}

// What the IB CM's REQ (or REP, `reply`) that `id` sends says of the connection, as the
// kernel's CMA fills it from the user's `param` (cma_connect_ib, cma_accept_ib): the QP number
// and SRQ use of id's QP, whatever `param` says of them; the retry counts cut to their 3-bit
// fields, flow control to its 1 bit; no retry count in a REP. The other end's event reports
// exactly this, whichever CmPeer carries it (cma_set_req_event_data, cma_set_rep_event_data).
rdma_conn_param CmMessageParam(const SimCmId* id, const rdma_conn_param* param, bool reply) {
  rdma_conn_param message;
  std::memset(&message, 0, sizeof(message));
  if (id->id.qp_type == IBV_QPT_UD) {
    // SIDR: the REQ names no QP; the REP the id's QP, or without one conn_param's qp_num (as
    // the kernel's rdma_accept takes it). No connection parameters.
    if (reply) {
      message.qp_num = id->id.qp != nullptr ? id->id.qp->qp_num
                       : param != nullptr   ? param->qp_num
                                            : 0;
    }
    if (param != nullptr) {
      message.private_data = param->private_data;
      message.private_data_len = param->private_data_len;
    }
    return message;
  }
  message.qp_num = id->id.qp->qp_num;
  message.srq = id->id.srq != nullptr ? 1 : 0;
  if (param == nullptr) return message;
  message.private_data = param->private_data;
  message.private_data_len = param->private_data_len;
  message.responder_resources = param->responder_resources;
  message.initiator_depth = param->initiator_depth;
  message.flow_control = param->flow_control & 1;
  if (!reply) message.retry_count = std::min(param->retry_count, wire::kMaxRetryCount);
  message.rnr_retry_count = std::min(param->rnr_retry_count, wire::kMaxRetryCount);
  return message;
}

}  // namespace

SimCmId::SimCmId() { std::memset(&id, 0, sizeof(id)); }

int ConnectionManager::CreateEventChannel(rdma_event_channel** channel) {
  return NewChannel<SimEventChannel>(channel);
}

void ConnectionManager::DestroyEventChannel(SimEventChannel* channel) {
  softrpma::MutexLock lock(&mu_);
  // librdmacm REQUIRES every id on the channel to be destroyed first. If some are not, they
  // become synchronous (their later events are dropped) rather than point at freed memory.
  for (auto& [serial, id] : ids_) {
    if (id->channel == channel) {
      id->channel = nullptr;
      id->id.channel = nullptr;
    }
  }
  std::deque<PendingCmEvent> events;
  bool has_callers = false;
  {
    softrpma::MutexLock channel_lock(&channel->mu);
    events.swap(channel->events);
    // Not only the threads asleep in the fd's read(2) (signal.waiters()): also those on their
    // way into it, counted as they entered rdma_get_cm_event and now waiting for this
    // function's locks (rping's CM thread, back for its next event as the main thread cleans
    // up). Freed now, the channel's lock would be taken in freed memory.
    has_callers = channel->callers.load(std::memory_order_seq_cst) > 0;
    channel->destroyed = has_callers;
  }
  for (const PendingCmEvent& event : events) {
    if (event.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      DropRequestLocked(event.id, kRejectConsumer, nullptr, 0, /*free_it=*/true);
    }
  }
  // A thread still inside rdma_get_cm_event on the channel sleeps on, as on rdma-core, whose
  // close(2) of the fd does not wake a read(2) blocked on it: the channel (its memory and fd)
  // is kept rather than freed under the sleeper, which would wake with EBADF or on a reused
  // fd; the last caller out frees it (GetEvent), else it stays until exit.
  if (has_callers) return;
  Delete(channel);
}

int ConnectionManager::CreateId(SimEventChannel* channel, rdma_cm_id** id, void* context,
                                rdma_port_space ps) {
  // RC ids, and UD ids of RDMA_PS_UDP (UD IDS; RDMA_PS_IPOIB's Q_Key needs an IPoIB group).
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_IB && ps != RDMA_PS_UDP) return EINVAL;
  SimCmId* sim_id = New<SimCmId>();
  if (sim_id == nullptr) return ENOMEM;
  sim_id->id.channel = channel != nullptr ? &channel->channel : nullptr;
  sim_id->id.context = context;
  sim_id->id.ps = ps;
  sim_id->id.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  softrpma::MutexLock lock(&mu_);
  sim_id->channel = channel;
  sim_id->serial = next_serial_++;
  ids_[sim_id->serial] = sim_id;
  *id = &sim_id->id;
  return 0;
}

int ConnectionManager::DestroyId(SimCmId* id) {
  softrpma::MutexLock lock(&mu_);
  std::vector<PendingCmEvent> undelivered;
  if (id->channel != nullptr) {
    softrpma::MutexLock channel_lock(&id->channel->mu);
    // Deliveries count under this mutex, so the check and the removal are one step.
    if (id->unacked_events.load(std::memory_order_acquire) != 0) return EBUSY;
    auto& events = id->channel->events;
    const bool had_events = !events.empty();
    for (auto it = events.begin(); it != events.end();) {
      if (it->owner == id) {
        undelivered.push_back(*it);
        it = events.erase(it);
      } else {
        ++it;
      }
    }
    if (had_events && events.empty()) id->channel->signal.Lower();
  } else if (id->unacked_events.load(std::memory_order_acquire) != 0) {
    return EBUSY;
  }

  // A listener: requests it never delivered are rejected and freed; delivered ones stay with
  // the user, without a listener.
  for (const PendingCmEvent& event : undelivered) {
    if (event.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      DropRequestLocked(event.id, kRejectConsumer, nullptr, 0, /*free_it=*/true);
    }
  }
  for (SimCmId* request : id->pending_requests) request->listener = nullptr;
  id->pending_requests.clear();

  switch (id->state) {
    case State::kConnecting:
      // Our request is pending at a listener: withdraw it. Not delivered yet: it vanishes;
      // delivered: its id stays with the user, and accepting it will report UNREACHABLE.
      if (id->peer != nullptr) id->peer->WithdrawRequest();
      break;
    case State::kRequestReceived:
      DropRequestLocked(id, kRejectConsumer, nullptr, 0, /*free_it=*/false);
      break;
    case State::kConnected:
      if (id->peer == nullptr) break;
      if (IwarpCm()) {
        // iWARP: the connection's stream closes; the peer's QP goes to ERROR (siw's
        // siw_qp_llp_close) and it gets DISCONNECTED (IW_CM_EVENT_CLOSE), no DREP owed.
        id->peer->Break(RDMA_CM_EVENT_DISCONNECTED, 0);
        break;
      }
      // As the kernel's IB CM: destroying a connected id sends a DREQ (its QP, if still
      // there, is left as it is, below).
      id->peer->SendDisconnectRequest();
      break;
    case State::kDisconnected:
      // A DREQ it got is answered as the id goes; no timewait for an id that is no more.
      if (id->owes_drep) SendDrepLocked(id, /*timewait=*/false);
      break;
    default:
      break;
  }
  if (id->id.qp != nullptr) {
    // As rdma-core's rdma_destroy_id: the id goes, its QP stays, in the state it is in, the
    // caller's to destroy with ibv_destroy_qp (perftest -R destroys the ids it failed to
    // connect with their QPs on them).
    SimQp* qp = to_sim(id->id.qp);
    qp->cm_orphan.store(true, std::memory_order_release);
    // The connection closes with the id (FreeIdLocked): what the QP has outstanding or posts
    // later reaches no one (to another process: IBV_WC_RETRY_EXC_ERR, as toward a vanished
    // peer).
    if (id->peer != nullptr) id->peer->OrphanQp(qp);
    id->id.qp = nullptr;
  }
  FreeIdLocked(id);
  return 0;
}

int ConnectionManager::MigrateId(SimCmId* id, SimEventChannel* channel) {
  if (channel == nullptr) return EINVAL;
  softrpma::MutexLock lock(&mu_);
  if (id->channel == channel) return 0;
  std::vector<PendingCmEvent> moving;
  if (id->channel != nullptr) moving = TakeEventsLocked(id);
  id->channel = channel;
  id->id.channel = &channel->channel;
  if (!moving.empty()) {
    softrpma::MutexLock channel_lock(&channel->mu);
    for (PendingCmEvent& event : moving) PushEventLocked(channel, event);
  }
  return 0;
}

int ConnectionManager::BindLocked(SimCmId* id, const sockaddr* addr) {
  if (!IsIpAddress(addr)) return EINVAL;
  const host::PortSpace space = SpaceOf(id);
  const bool wildcard = IsWildcard(addr);
  uint16_t port = PortOf(addr);
  if (port == 0) {
    // The next port from the counter that no id of this process holds, in a block of ports
    // this process holds on the fabric or can reserve now (host::ReservePort): another
    // process of the fabric counts from the same first port, and skips the blocks this one
    // took. (Deterministic in one process.)
    for (int tries = 0; tries < 65536 - kFirstEphemeralPort; ++tries) {
      const uint16_t candidate = next_ephemeral_port_;
      next_ephemeral_port_ =
          next_ephemeral_port_ == 65535 ? kFirstEphemeralPort : next_ephemeral_port_ + 1;
      if (bound_.contains(BindKey(space, candidate))) continue;
      const uint16_t first = BlockOf(candidate);
      auto block = port_blocks_.find(first);
      if (block == port_blocks_.end()) {
        std::unique_ptr<host::PortReservation> reservation;
        const int err = host::ReservePort(first, &reservation);
        if (err == EADDRINUSE) {  // another process of the fabric has the block: the next one
          const int next = first + kPortBlockSize;
          tries += next - 1 - candidate;
          next_ephemeral_port_ = next > 65535 ? kFirstEphemeralPort : static_cast<uint16_t>(next);
          continue;
        }
        if (err != 0) return err;
        block = port_blocks_.emplace(first, PortBlock{std::move(reservation), 0}).first;
      }
      ++block->second.in_use;
      port = candidate;
      break;
    }
    if (port == 0) return EADDRNOTAVAIL;
  } else {
    auto it = bound_.find(BindKey(space, port));
    if (it != bound_.end()) {
      for (SimCmId* other : it->second) {
        if (wildcard || IsWildcard(SrcOf(other)) || SameHost(SrcOf(other), addr)) {
          return EADDRINUSE;
        }
      }
    }
  }
  CopyAddress(addr, SrcOf(id));
  SetPort(SrcOf(id), port);
  bound_[BindKey(space, port)].push_back(id);
  id->ephemeral_port = PortOf(addr) == 0;
  id->bound = true;
  id->id.verbs = wildcard ? nullptr : &device_->context;
  id->id.port_num = wildcard ? 0 : 1;
  return 0;
}

void ConnectionManager::UnbindLocked(SimCmId* id) {
  if (!id->bound) return;
  const uint16_t port = PortOf(SrcOf(id));
  auto it = bound_.find(BindKey(SpaceOf(id), port));
  if (it != bound_.end()) {
    std::vector<SimCmId*>& ids = it->second;
    for (auto pos = ids.begin(); pos != ids.end(); ++pos) {
      if (*pos == id) {
        ids.erase(pos);
        break;
      }
    }
    if (ids.empty()) bound_.erase(it);
  }
  if (id->ephemeral_port) {
    auto block = port_blocks_.find(BlockOf(port));
    if (block != port_blocks_.end() && --block->second.in_use == 0) port_blocks_.erase(block);
    id->ephemeral_port = false;
  }
  id->bound = false;
}

int ConnectionManager::BindAddr(SimCmId* id, const sockaddr* addr) {
  softrpma::MutexLock lock(&mu_);
  if (id->bound || id->state != State::kIdle) return EINVAL;
  const int err = BindLocked(id, addr);
  if (err != 0) return err;
  id->state = State::kBound;
  return 0;
}

int ConnectionManager::ResolveAddr(SimCmId* id, const sockaddr* src_addr,
                                   const sockaddr* dst_addr) {
  if (!IsIpAddress(dst_addr)) return EINVAL;
  if (src_addr != nullptr && !IsIpAddress(src_addr)) return EINVAL;
  softrpma::MutexLock lock(&mu_);
  if (id->state != State::kIdle && id->state != State::kBound) return EINVAL;
  if (!id->bound) {
    // Every address is local: without a source, the source is the destination host itself.
    sockaddr_storage source;
    CopyAddress(src_addr != nullptr ? src_addr : dst_addr, reinterpret_cast<sockaddr*>(&source));
    if (src_addr == nullptr) SetPort(reinterpret_cast<sockaddr*>(&source), 0);
    const int err = BindLocked(id, reinterpret_cast<sockaddr*>(&source));
    if (err != 0) return err;
  }
  CopyAddress(dst_addr, DstOf(id));
  id->id.verbs = &device_->context;
  id->id.port_num = 1;
  id->state = State::kAddrResolved;
  QueueLocked(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, id, nullptr, nullptr, nullptr, 0);
  return 0;
}

int ConnectionManager::ResolveRoute(SimCmId* id) {
  softrpma::MutexLock lock(&mu_);
  if (id->state != State::kAddrResolved) return EINVAL;
  id->state = State::kRouteResolved;
  QueueLocked(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, id, nullptr, nullptr, nullptr, 0);
  return 0;
}

int ConnectionManager::Listen(SimCmId* id) {
  softrpma::MutexLock lock(&mu_);
  if (id->state != State::kBound || id->channel == nullptr) return EINVAL;
  // Processes of the same fabric connect to it through the host fabric.
  const uint32_t serial = id->serial;
  const int err = host::Listen(
      SrcOf(id),
      [this, serial](const std::shared_ptr<host::Conn>& conn) {
        auto end = std::make_shared<HostCmPeer>(this, serial);
        end->set_conn(conn);
        return std::static_pointer_cast<host::Conn::Handler>(end);
      },
      &id->host_listener, SpaceOf(id));
  if (err != 0) return err;  // EADDRINUSE: another process listens there
  id->state = State::kListening;
  return 0;
}

int ConnectionManager::DevicePdLocked(ibv_pd** pd) {
  if (device_pd_ == nullptr) {
    if (int err = AllocPd(device_, &device_pd_); err != 0) return err;
  }
  *pd = device_pd_;
  return 0;
}

void ConnectionManager::DestroyOwnCqsLocked(SimCmId* id) {
  for (ibv_cq** cq : {&id->own_send_cq, &id->own_recv_cq}) {
    if (*cq != nullptr) DestroyCq(to_sim(*cq));
    *cq = nullptr;
  }
  for (ibv_comp_channel** channel : {&id->own_send_channel, &id->own_recv_channel}) {
    if (*channel != nullptr) DestroyCompChannel(to_sim(*channel));
    *channel = nullptr;
  }
}

int ConnectionManager::CreateQp(SimCmId* id, ibv_qp_init_attr_ex* attr) {
  if (attr == nullptr) return EINVAL;
  softrpma::MutexLock lock(&mu_);
  if (id->id.verbs == nullptr) return EINVAL;
  if (id->id.qp != nullptr) return EINVAL;
  // An id of RDMA_PS_TCP connects RC QPs, one of RDMA_PS_UDP UD QPs (rdma-core's INIT of the
  // id's kind fails on a QP of another type).
  if (attr->qp_type != id->id.qp_type) return EINVAL;
  const bool ud = id->id.qp_type == IBV_QPT_UD;
  // As rdma-core's rdma_create_qp_ex: without a PD, the id's device's; a PD of another device
  // is EINVAL.
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
    ibv_pd* pd = nullptr;
    if (int err = DevicePdLocked(&pd); err != 0) return err;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = pd;
  } else if (attr->pd->context != id->id.verbs) {
    return EINVAL;
  }
  SimPd* pd = to_sim(attr->pd);
  // Without a send or receive CQ: one made here, on a completion channel of its own, with the
  // queue's max_wr entries (rdma-core's ucma_create_cqs; a queue of 0 WRs gets none, and the
  // QP then fails as without a CQ). Destroyed with the QP, or now if the QP fails.
  const auto make_cq = [this, id](uint32_t entries, ibv_comp_channel** channel, ibv_cq** cq) {
    if (entries == 0) return 0;
    if (int err = CreateCompChannel(device_, channel); err != 0) return err;
    return CreateCq(device_, static_cast<int>(std::min<uint32_t>(entries, INT32_MAX)), &id->id,
                    to_sim(*channel), 0, cq);
  };
  int err = 0;
  if (attr->send_cq == nullptr) {
    err = make_cq(attr->cap.max_send_wr, &id->own_send_channel, &id->own_send_cq);
    attr->send_cq = id->own_send_cq;
  }
  if (err == 0 && attr->recv_cq == nullptr) {
    err = make_cq(attr->cap.max_recv_wr, &id->own_recv_channel, &id->own_recv_cq);
    attr->recv_cq = id->own_recv_cq;
  }
  if (err == 0 && (attr->send_cq == nullptr || attr->recv_cq == nullptr)) err = EINVAL;
  // The passive QP of a connection request joins the active QP's link.
  std::shared_ptr<SimLink> join;
  if (!ud && id->state == State::kRequestReceived && id->peer != nullptr) {
    join = id->peer->LinkToJoin();
  }
  SimQp* qp = nullptr;
  if (err == 0) err = ud ? CreateUdQpLocked(id, attr, &qp) : sim::CreateQp(attr, join, &qp);
  if (err != 0) {
    DestroyOwnCqsLocked(id);
    return err;
  }
  if (TraceOn()) {
    TraceEvent("create_qp qp=%u id=%u send_cq=%u recv_cq=%u srq=%u", qp->qp.qp_num, id->serial,
               attr->send_cq->handle, attr->recv_cq->handle,
               attr->srq != nullptr ? attr->srq->handle : 0);
  }
  if (id->peer != nullptr && !ud) id->peer->AttachQp(qp);
  id->id.qp = &qp->qp;
  id->id.pd = &pd->pd;
  id->id.send_cq = attr->send_cq;
  id->id.recv_cq = attr->recv_cq;
  id->id.send_cq_channel = attr->send_cq->channel;
  id->id.recv_cq_channel = attr->recv_cq->channel;
  id->id.srq = attr->srq;
  return 0;
}

int ConnectionManager::CreateUdQpLocked(SimCmId* id, ibv_qp_init_attr_ex* attr, SimQp** qp) {
  SimQp* made = nullptr;
  if (int err = CreateVerbsQp(attr, &made); err != 0) return err;
  made->cm_ud = true;
  // ucma_init_ud_qp: INIT with what rdma_init_qp_attr gives (P_Key index, port, the CMA's
  // Q_Key), RTR with the state alone, RTS with SQ PSN 0.
  ibv_qp_attr qp_attr;
  std::memset(&qp_attr, 0, sizeof(qp_attr));
  qp_attr.qp_state = IBV_QPS_INIT;
  qp_attr.pkey_index = 0;
  qp_attr.port_num = 1;
  qp_attr.qkey = kUdpQkey;
  int err = ModifyVerbsQp(made, &qp_attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  if (err == 0) {
    qp_attr.qp_state = IBV_QPS_RTR;
    err = ModifyVerbsQp(made, &qp_attr, IBV_QP_STATE);
  }
  if (err == 0) {
    qp_attr.qp_state = IBV_QPS_RTS;
    qp_attr.sq_psn = 0;
    err = ModifyVerbsQp(made, &qp_attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
  }
  if (err != 0) {
    DestroyVerbsQp(made);
    return err;
  }
  *qp = made;
  return 0;
}

void ConnectionManager::DestroyQp(SimCmId* id) {
  softrpma::MutexLock lock(&mu_);
  if (id->id.qp == nullptr) return;
  if (TraceOn()) TraceEvent("destroy_qp qp=%u", id->id.qp->qp_num);
  if (to_sim(id->id.qp)->cm_ud) {
    DestroyVerbsQp(to_sim(id->id.qp));
  } else {
    sim::DestroyQp(to_sim(id->id.qp));
  }
  id->id.qp = nullptr;
  // The QP's CQs and SRQ are no longer the id's (rdma-core leaves them NULL too); those made
  // with the QP go with it.
  id->id.send_cq = nullptr;
  id->id.recv_cq = nullptr;
  id->id.send_cq_channel = nullptr;
  id->id.recv_cq_channel = nullptr;
  id->id.srq = nullptr;
  DestroyOwnCqsLocked(id);
}

int ConnectionManager::Connect(SimCmId* id, const rdma_conn_param* param, ConnFault fault) {
  // (qp_type is set at creation: read without the lock.)
  const bool ud = id->id.qp_type == IBV_QPT_UD;
  if (ud && IwarpCm()) return EOPNOTSUPP;  // iWARP has no SIDR (UD IDS)
  if (param != nullptr &&
      !ValidPrivateData(param->private_data, param->private_data_len,
                        ud ? kMaxSidrRequestPrivateData
                           : ActiveProfile().max_connect_private_data)) {
    return EINVAL;
  }
  softrpma::MutexLock lock(&mu_);
  // (A SIDR REQ names no QP: a UD id may connect without one.)
  if (id->state != State::kRouteResolved || id->channel == nullptr ||
      (id->id.qp == nullptr && !ud)) {
    return EINVAL;
  }
  if (ud && fault != ConnFault::kNone) {
    // The REQ is refused, or lost and never answered.
    SidrEndedLocked(id, fault == ConnFault::kReject ? kSidrReject : -ETIMEDOUT, nullptr, 0);
    return 0;
  }
  switch (fault) {
    case ConnFault::kReject:
      ExchangeEndedLocked(id, State::kRejected, RDMA_CM_EVENT_REJECTED, kRejectConsumer);
      return 0;
    case ConnFault::kUnreachable:
      ExchangeEndedLocked(id, State::kUnreachable, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      return 0;
    case ConnFault::kLost:
      ExchangeEndedLocked(id, State::kUnreachable, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
      return 0;
    default:
      break;
  }
  id->active = true;
  // A listener of this process is reached directly; any other through the host fabric.
  SimCmId* listener = CurrentTransport() == TransportKind::kLocal
                           ? FindListenerLocked(DstOf(id), SpaceOf(id))
                           : nullptr;
  std::shared_ptr<CmPeer> peer;
  if (listener != nullptr) {
    peer = std::make_shared<LocalCmPeer>(this, listener);
  } else {
    std::shared_ptr<HostCmPeer> host_peer;
    const int err = HostCmPeer::Dial(this, DstOf(id), SpaceOf(id), &host_peer);
    if (err == ECONNREFUSED) {  // nobody listens there, in any process of the fabric
      if (ud) {
        SidrEndedLocked(id, kSidrUnsupported, nullptr, 0);
        return 0;
      }
      ExchangeEndedLocked(id, State::kRejected, RDMA_CM_EVENT_REJECTED, kRejectNoListener);
      return 0;
    }
    if (err != 0) return err;
    peer = std::move(host_peer);
  }
  const rdma_conn_param request = CmMessageParam(id, param, /*reply=*/false);
  const int err = peer->SendRequest(id, &request);
  if (err != 0) return err;
  id->peer = std::move(peer);
  id->state = State::kConnecting;
  return 0;
}

SimCmId* ConnectionManager::RequestReceivedLocked(SimCmId* listener, bool sidr,
                                                  const sockaddr* local_addr,
                                                  const sockaddr* peer_addr,
                                                  const rdma_conn_param& conn,
                                                  const void* private_data,
                                                  uint8_t private_data_len,
                                                  std::shared_ptr<CmPeer> peer) {
  if (listener == nullptr || listener->state != State::kListening) return nullptr;
  if ((listener->id.qp_type == IBV_QPT_UD) != sidr) return nullptr;  // another service
  SimCmId* request = NewRequestIdLocked(listener, local_addr, peer_addr);
  if (request == nullptr) return nullptr;
  request->peer = std::move(peer);
  if (sidr) {
    // The SIDR REQ's private data field, whole (the kernel reports all of it); nothing else.
    rdma_ud_param ud;
    std::memset(&ud, 0, sizeof(ud));
    ud.private_data_len = kMaxSidrRequestPrivateData;
    QueueLocked(listener, RDMA_CM_EVENT_CONNECT_REQUEST, 0, request, listener, nullptr,
                private_data, private_data_len, /*connect_response=*/false, &ud);
    return request;
  }
  QueueLocked(listener, RDMA_CM_EVENT_CONNECT_REQUEST, 0, request, listener, &conn, private_data,
              private_data_len);
  return request;
}

SimCmId* ConnectionManager::NewRequestIdLocked(SimCmId* listener, const sockaddr* local_addr,
                                               const sockaddr* peer_addr) {
  SimCmId* request = New<SimCmId>();
  if (request == nullptr) return nullptr;
  request->id.verbs = &device_->context;
  request->id.channel = listener->id.channel;
  request->id.context = listener->id.context;
  request->id.ps = listener->id.ps;
  request->id.qp_type = listener->id.qp_type;
  request->id.port_num = 1;
  // The request's local address is the one the requester asked for; its peer the requester.
  CopyAddress(local_addr, SrcOf(request));
  CopyAddress(peer_addr, DstOf(request));
  request->channel = listener->channel;
  request->state = State::kRequestReceived;
  request->listener = listener;
  request->serial = next_serial_++;
  ids_[request->serial] = request;
  listener->pending_requests.push_back(request);
  return request;
}

void ConnectionManager::OnRemoteClosed(const std::shared_ptr<HostCmPeer>& end) {
  softrpma::MutexLock lock(&mu_);
  RemoteEndedLocked(end);
}

void ConnectionManager::OnRemoteBroken(const std::shared_ptr<HostCmPeer>& end) {
  if (std::shared_ptr<host::Conn> conn = end->conn(); conn != nullptr) conn->Close();
  softrpma::MutexLock lock(&mu_);
  RemoteEndedLocked(end);
}

void ConnectionManager::RemoteEndedLocked(const std::shared_ptr<HostCmPeer>& end) {
  SimCmId* id = end->id;
  if (id == nullptr) return;
  ClosePeerLocked(id);
  switch (id->state) {
    case State::kConnecting:  // the passive process went away before answering
      ExchangeEndedLocked(id, State::kUnreachable, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      break;
    case State::kConnected:
      if (id->established_pending) {
        // Our REP was never answered by an RTU (the active side refused it, or went away): it
        // times out, as an accept does whose active id of this process is gone.
        id->established_pending = false;
        if (id->id.qp != nullptr) SetQpError(to_sim(id->id.qp));
        ExchangeEndedLocked(id, State::kUnreachable, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
        break;
      }
      PeerGoneLocked(id);  // the peer process closed or died
      break;
    case State::kDisconnected:
      // After a DREQ: the peer's kernel answers ours when its id goes; what we still send
      // toward it times out.
      DrepReceivedLocked(id);
      if (id->id.qp != nullptr) RemotePeerGone(to_sim(id->id.qp));
      break;
    case State::kRequestReceived:
      // The requester went away: as when an active id of this process goes, a request not
      // delivered yet vanishes; a delivered one reports UNREACHABLE when accepted.
      RequestWithdrawnLocked(id);
      break;
    default:
      break;
  }
}

int ConnectionManager::Accept(SimCmId* id, const rdma_conn_param* param, ConnFault fault) {
  if (id->id.qp_type == IBV_QPT_UD) {
    if (param != nullptr &&
        !ValidPrivateData(param->private_data, param->private_data_len,
                          kMaxSidrReplyPrivateData)) {
      return EINVAL;
    }
    softrpma::MutexLock lock(&mu_);
    return AcceptSidrLocked(id, param, fault);
  }
  if (param != nullptr &&
      !ValidPrivateData(param->private_data, param->private_data_len,
                        ActiveProfile().max_accept_private_data)) {
    return EINVAL;
  }
  softrpma::MutexLock lock(&mu_);
  if (id->state != State::kRequestReceived || id->id.qp == nullptr) return EINVAL;
  LeaveListenerLocked(id);
  std::shared_ptr<CmPeer> peer = id->peer;
  switch (fault) {
    case ConnFault::kReject:  // the active side answers the REP with a REJ
      if (peer != nullptr) peer->SendReject(kRejectConsumer, nullptr, 0);
      ExchangeEndedLocked(id, State::kRejected, RDMA_CM_EVENT_REJECTED, kRejectConsumer);
      return 0;
    case ConnFault::kLost:  // the exchange breaks
      SetQpError(to_sim(id->id.qp));
      if (peer != nullptr) peer->AbortAccept(RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
      ExchangeEndedLocked(id, State::kDisconnected, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
      return 0;
    default:
      break;
  }
  if (fault == ConnFault::kUnreachable || peer == nullptr || !peer->CanAccept(id)) {
    // The active side went away: the passive side's REP would time out.
    id->state = State::kUnreachable;
    QueueLocked(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, id, nullptr, nullptr, nullptr, 0);
    if (peer != nullptr) peer->AbortAccept(RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
    ClosePeerLocked(id);
    return 0;
  }
  id->state = State::kConnected;
  const rdma_conn_param reply = CmMessageParam(id, param, /*reply=*/true);
  // As librdmacm on IB: the passive QP is ready once it accepted; the active one only when
  // its user gets the connect response (ProcessConnectResponse), which also sends the RTU on
  // which the passive side's ESTABLISHED comes.
  peer->EnterRts(to_sim(id->id.qp));
  if (fault == ConnFault::kDisconnect) {
    // Both see ESTABLISHED, then DISCONNECTED: the REP goes out as ever, and the DREQ on its
    // heels, so the active side's ESTABLISHED is the REP's connect response (its private
    // data, its parameters), after which its QP, in ERROR by then, stays there.
    peer->SendAccept(id, &reply);
    QueueLocked(id, RDMA_CM_EVENT_ESTABLISHED, 0, id, nullptr, nullptr, nullptr, 0);
    EndConnectionLocked(id, RDMA_CM_EVENT_DISCONNECTED, 0);
    return 0;
  }
  peer->SendAccept(id, &reply);
  if (IwarpCm()) {
    // iWARP: the passive side is established once its MPA reply is sent (siw_accept's
    // IW_CM_EVENT_ESTABLISHED upcall), not on an RTU: its ESTABLISHED comes now.
    QueueLocked(id, RDMA_CM_EVENT_ESTABLISHED, 0, id, nullptr, nullptr, nullptr, 0);
    return 0;
  }
  id->established_pending = true;
  return 0;
}

int ConnectionManager::AcceptSidrLocked(SimCmId* id, const rdma_conn_param* param,
                                        ConnFault fault) {
  // rdma-core reads conn_param->qp_num when the id has no QP.
  if (id->state != State::kRequestReceived || (id->id.qp == nullptr && param == nullptr)) {
    return EINVAL;
  }
  LeaveListenerLocked(id);
  // The SIDR REP ends the exchange; this side gets no event, whatever became of it.
  std::shared_ptr<CmPeer> peer = id->peer;
  if (fault == ConnFault::kReject) {
    if (peer != nullptr) peer->SendReject(kRejectConsumer, nullptr, 0);
    id->state = State::kRejected;
  } else {
    id->state = State::kConnected;
    if (peer != nullptr && peer->CanAccept(id)) {
      if (fault == ConnFault::kNone) {
        const rdma_conn_param reply = CmMessageParam(id, param, /*reply=*/true);
        peer->SendAccept(id, &reply);
      } else {  // the REP is lost: the requester's REQ times out
        peer->AbortAccept(RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      }
    }
  }
  ClosePeerLocked(id);
  return 0;
}

bool ConnectionManager::BreakConnection(const SimQp* qp, ConnFault fault) {
  softrpma::MutexLock lock(&mu_);
  for (const auto& [serial, id] : ids_) {
    if (id->id.qp != &qp->qp) continue;
    if (id->state != State::kConnected) return false;
    if (fault == ConnFault::kLost) {
      EndConnectionLocked(id, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
    } else {
      EndConnectionLocked(id, RDMA_CM_EVENT_DISCONNECTED, 0);
    }
    return true;
  }
  return false;
}

void ConnectionManager::EndConnectionLocked(SimCmId* id, rdma_cm_event_type type, int status) {
  std::shared_ptr<CmPeer> peer = id->peer;
  BrokenLocked(id, type, status);
  if (peer != nullptr) peer->Break(type, status);
  ClosePeerLocked(id);
}

void ConnectionManager::BrokenLocked(SimCmId* id, rdma_cm_event_type type, int status) {
  if (id->state != State::kConnected) return;
  if (id->id.qp != nullptr) SetQpError(to_sim(id->id.qp));
  id->state = State::kDisconnected;
  QueueLocked(id, type, status, id, nullptr, nullptr, nullptr, 0);
}

int ConnectionManager::Reject(SimCmId* id, const void* private_data, uint8_t private_data_len) {
  // A UD id's refusal is a SIDR REP (of status kSidrReject).
  if (!ValidPrivateData(private_data, private_data_len,
                        id->id.qp_type == IBV_QPT_UD ? kMaxSidrReplyPrivateData
                                                     : ActiveProfile().max_reject_private_data)) {
    return EINVAL;
  }
  softrpma::MutexLock lock(&mu_);
  if (id->state != State::kRequestReceived) return EINVAL;
  DropRequestLocked(id, kRejectConsumer, private_data, private_data_len, /*free_it=*/false);
  return 0;
}

int ConnectionManager::Disconnect(SimCmId* id) {
  softrpma::MutexLock lock(&mu_);
  switch (id->state) {
    case State::kIdle:
    case State::kBound:
    case State::kAddrResolved:
    case State::kRouteResolved:
    case State::kListening:
      return EINVAL;  // never took part in a connection
    case State::kConnected: {
      if (id->id.qp_type == IBV_QPT_UD) {
        // SIDR made no connection: the kernel's DREQ fails and nothing is sent; only the QP
        // goes to ERROR (librdmacm's rdma_disconnect).
        if (id->id.qp != nullptr) SetQpError(to_sim(id->id.qp));
        return 0;
      }
      if (IwarpCm()) {
        // iWARP: no DREQ / DREP. The stream closes; each side's QP goes to ERROR (flushing
        // its WRs: siw_qp_llp_close) and each gets DISCONNECTED (IW_CM_EVENT_CLOSE) at once,
        // with no timer and no TIMEWAIT_EXIT (cma_iw_handler has none).
        if (id->id.qp != nullptr) DrainBeforeDisconnect(to_sim(id->id.qp));
        EndConnectionLocked(id, RDMA_CM_EVENT_DISCONNECTED, 0);
        return 0;
      }
      // librdmacm moves our QP to ERROR, then the kernel sends the DREQ. Our DISCONNECTED
      // comes with the DREP, or when the DREQ times out (status -ETIMEDOUT, IB_CM_DREQ_ERROR).
      // What the QP posted before was on the wire by now on a NIC: it executes first.
      if (id->id.qp != nullptr) DrainBeforeDisconnect(to_sim(id->id.qp));
      if (id->id.qp != nullptr) SetQpError(to_sim(id->id.qp));
      id->state = State::kDisconnected;
      id->established_pending = false;
      const uint64_t timeout_ns = id->active ? kDreqTimeoutActiveNs : kDreqTimeoutPassiveNs;
      id->awaiting_drep = true;
      id->dreq_deadline_ns = GlobalClock().now_ns() + timeout_ns;
      // A peer in another process may be busy outside the simulator, its clock not ours: its
      // DREP gets a real-time bound before our timeout may be taken (PendingCmEvent).
      const uint64_t wait_ns = host::PeerAnswerWaitNs();
      const uint64_t hold_until_ns =
          id->peer != nullptr && id->peer->InAnotherProcess() && wait_ns > 0
              ? host::NowNs() + wait_ns
              : 0;
      QueueTimerLocked(id, RDMA_CM_EVENT_DISCONNECTED, -ETIMEDOUT, timeout_ns,
                       /*until_drep=*/true, hold_until_ns);
      QueueTimerLocked(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, timeout_ns + kTimewaitNs,
                       /*until_drep=*/true, hold_until_ns);
      if (id->peer != nullptr) id->peer->SendDisconnectRequest();
      return 0;
    }
    case State::kDisconnected:
      if (id->id.qp != nullptr) SetQpError(to_sim(id->id.qp));
      if (id->owes_drep) SendDrepLocked(id);  // we got the DREQ: the kernel answers it
      return 0;
    default:
      // Connecting, rejected, unreachable, or a request not answered yet: as in the kernel,
      // only the QP goes to ERROR; no event, no state change.
      if (id->id.qp != nullptr) SetQpError(to_sim(id->id.qp));
      return 0;
  }
}

void ConnectionManager::DreqReceivedLocked(SimCmId* id) {
  if (id->state != State::kConnected) return;
  id->state = State::kDisconnected;
  id->established_pending = false;
  id->owes_drep = true;
  QueueLocked(id, RDMA_CM_EVENT_DISCONNECTED, 0, id, nullptr, nullptr, nullptr, 0);
}

void ConnectionManager::DisconnectRequestReceivedLocked(SimCmId* id) {
  if (id->state == State::kConnected) {
    DreqReceivedLocked(id);
  } else {
    DrepReceivedLocked(id);  // DREQs crossed: the peer disconnects too
  }
}

void ConnectionManager::AcceptReceivedLocked(SimCmId* id, const rdma_conn_param& conn,
                                             const void* private_data, uint8_t private_data_len) {
  if (id->id.qp_type == IBV_QPT_UD) {
    if (id->state != State::kConnecting) return;
    // The SIDR REP: the peer's QP, the CMA's Q_Key, and the address of the peer's process as
    // the kernel builds it from the route (RoCE v2: a GRH to its GID).
    rdma_ud_param ud;
    std::memset(&ud, 0, sizeof(ud));
    ud.private_data_len = kMaxSidrReplyPrivateData;
    ud.qp_num = conn.qp_num;
    ud.qkey = kUdpQkey;
    ud.ah_attr.is_global = 1;
    if (id->peer != nullptr) id->peer->PeerGid(ud.ah_attr.grh.dgid.raw);
    ud.ah_attr.grh.sgid_index = 0;
    ud.ah_attr.grh.hop_limit = kSidrHopLimit;
    ud.ah_attr.port_num = 1;
    id->state = State::kConnected;
    ClosePeerLocked(id);
    QueueLocked(id, RDMA_CM_EVENT_ESTABLISHED, 0, id, nullptr, nullptr, private_data,
                private_data_len, /*connect_response=*/false, &ud);
    return;
  }
  id->state = State::kConnected;
  // The QP goes to RTS, and the RTU is sent, when the user gets this event (see
  // ProcessConnectResponse).
  QueueLocked(id, RDMA_CM_EVENT_ESTABLISHED, 0, id, nullptr, &conn, private_data,
              private_data_len, /*connect_response=*/true);
}

void ConnectionManager::RejectReceivedLocked(SimCmId* id, int status, const void* private_data,
                                             uint8_t private_data_len) {
  if (id->state != State::kConnecting) return;
  if (id->id.qp_type == IBV_QPT_UD) {
    SidrEndedLocked(id, status == kRejectNoListener ? kSidrUnsupported : kSidrReject,
                    private_data, private_data_len);
    return;
  }
  ExchangeEndedLocked(id, State::kRejected, RDMA_CM_EVENT_REJECTED, status, private_data,
                      private_data_len);
}

void ConnectionManager::SidrEndedLocked(SimCmId* id, int sidr_status, const void* private_data,
                                        uint8_t private_data_len) {
  rdma_ud_param ud;
  std::memset(&ud, 0, sizeof(ud));
  ud.private_data_len = sidr_status > 0 ? kMaxSidrReplyPrivateData : 0;  // a REP came, or none
  ClosePeerLocked(id);
  id->state = State::kUnreachable;
  QueueLocked(id, RDMA_CM_EVENT_UNREACHABLE, sidr_status, id, nullptr, nullptr, private_data,
              private_data_len, /*connect_response=*/false, &ud);
}

void ConnectionManager::ReadyReceivedLocked(SimCmId* id, bool peer_reaches_us) {
  if (id->state != State::kConnected) return;
  // (On iWARP the ESTABLISHED came at the accept; the RTU still says whether the active side
  // can reach our memory.)
  if (!id->established_pending && !IwarpCm()) return;
  if (peer_reaches_us && id->id.qp != nullptr) SetPeerReachesUs(to_sim(id->id.qp));
  if (!id->established_pending) return;
  id->established_pending = false;
  QueueLocked(id, RDMA_CM_EVENT_ESTABLISHED, 0, id, nullptr, nullptr, nullptr, 0);
}

void ConnectionManager::AcceptAbortedLocked(SimCmId* id, rdma_cm_event_type type, int status) {
  if (id->state != State::kConnecting) return;
  if (id->id.qp_type == IBV_QPT_UD) {  // a lost SIDR REP: the REQ times out
    SidrEndedLocked(id, -ETIMEDOUT, nullptr, 0);
    return;
  }
  const bool lost = type == RDMA_CM_EVENT_CONNECT_ERROR;
  if (lost && id->id.qp != nullptr) SetQpError(to_sim(id->id.qp));
  ExchangeEndedLocked(id, lost ? State::kDisconnected : State::kUnreachable, type, status);
}

void ConnectionManager::RequestWithdrawnLocked(SimCmId* request) {
  ClosePeerLocked(request);
  if (RemoveConnectRequestLocked(request)) {
    DropRequestLocked(request, kRejectConsumer, nullptr, 0, /*free_it=*/true);
  }
}

SimCmId* ConnectionManager::FindIdLocked(uint32_t serial) {
  auto it = ids_.find(serial);
  return it != ids_.end() ? it->second : nullptr;
}

void ConnectionManager::ClosePeerLocked(SimCmId* id) {
  std::shared_ptr<CmPeer> peer = std::move(id->peer);  // leaves id->peer empty
  if (peer != nullptr) peer->Close();
}

void ConnectionManager::ExchangeEndedLocked(SimCmId* id, State state, rdma_cm_event_type type,
                                            int status, const void* private_data,
                                            uint8_t private_data_len) {
  ClosePeerLocked(id);
  id->state = state;
  QueueLocked(id, type, status, id, nullptr, nullptr, private_data, private_data_len);
}

void ConnectionManager::DrepReceivedLocked(SimCmId* id) {
  if (!id->awaiting_drep) return;
  id->awaiting_drep = false;
  SimEventChannel* channel = id->channel;
  if (channel == nullptr) return;
  const uint64_t now_ns = GlobalClock().now_ns();
  softrpma::MutexLock channel_lock(&channel->mu);
  auto& events = channel->events;
  // A DREP inside a hold's real-time bound is in time, whatever this process's clock did
  // meanwhile (other ids' events may have moved it past the DREQ's deadline).
  const uint64_t real_ns = host::NowNs();
  const bool held = std::any_of(events.begin(), events.end(), [&](const PendingCmEvent& e) {
    return e.owner == id && HeldForNs(e, real_ns) > 0;
  });
  if (now_ns >= id->dreq_deadline_ns && !held) return;  // timed out already
  std::vector<PendingCmEvent> moved;
  for (auto it = events.begin(); it != events.end();) {
    if (it->owner == id && it->until_drep) {
      moved.push_back(*it);
      it = events.erase(it);
    } else {
      ++it;
    }
  }
  for (PendingCmEvent& event : moved) {
    event.until_drep = false;
    if (event.type == RDMA_CM_EVENT_DISCONNECTED) {
      event.status = 0;
      event.due_ns = now_ns;
    } else {
      event.due_ns = now_ns + kTimewaitNs;
    }
    PushEventLocked(channel, event);
  }
  if (TraceOn()) TraceEvent("cm_drep id=%u", id->serial);
}

void ConnectionManager::SendDrepLocked(SimCmId* id, bool timewait) {
  id->owes_drep = false;
  if (id->peer != nullptr) id->peer->SendDisconnectReply();
  ClosePeerLocked(id);
  if (timewait) {
    QueueTimerLocked(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, kTimewaitNs, /*until_drep=*/false);
  }
}

void ConnectionManager::PeerGoneLocked(SimCmId* id) {
  if (id->state != State::kConnected) return;
  if (id->id.qp != nullptr) SetQpError(to_sim(id->id.qp));
  id->state = State::kDisconnected;
  QueueLocked(id, RDMA_CM_EVENT_DISCONNECTED, 0, id, nullptr, nullptr, nullptr, 0);
}

void ConnectionManager::DropRequestLocked(SimCmId* request, int status, const void* private_data,
                                          uint8_t private_data_len, bool free_it) {
  if (request->peer != nullptr) request->peer->SendReject(status, private_data, private_data_len);
  ClosePeerLocked(request);
  LeaveListenerLocked(request);
  request->state = State::kRejected;
  if (free_it) FreeIdLocked(request);
}

void ConnectionManager::LeaveListenerLocked(SimCmId* request) {
  if (request->listener == nullptr) return;
  auto& pending = request->listener->pending_requests;
  pending.erase(std::remove(pending.begin(), pending.end(), request), pending.end());
  request->listener = nullptr;
}

bool ConnectionManager::RemoveConnectRequestLocked(SimCmId* request) {
  SimCmId* listener = request->listener;
  if (listener == nullptr || listener->channel == nullptr) return false;
  SimEventChannel* channel = listener->channel;
  softrpma::MutexLock channel_lock(&channel->mu);
  auto& events = channel->events;
  for (auto it = events.begin(); it != events.end(); ++it) {
    if (it->type == RDMA_CM_EVENT_CONNECT_REQUEST && it->id == request) {
      events.erase(it);
      if (events.empty()) channel->signal.Lower();
      return true;
    }
  }
  return false;
}

void ConnectionManager::FreeIdLocked(SimCmId* id) {
  ClosePeerLocked(id);
  UnbindLocked(id);
  TakeEventsLocked(id);  // (DestroyId took them before; what its last steps queued goes too)
  ids_.erase(id->serial);
  Delete(id);
}

SimCmId* ConnectionManager::FindListenerLocked(const sockaddr* dst, host::PortSpace space) {
  auto it = bound_.find(BindKey(space, PortOf(dst)));
  if (it == bound_.end()) return nullptr;
  SimCmId* wildcard = nullptr;
  for (SimCmId* id : it->second) {
    if (id->state != State::kListening) continue;
    if (SameHost(SrcOf(id), dst)) return id;
    if (wildcard == nullptr && IsWildcard(SrcOf(id))) wildcard = id;
  }
  return wildcard;
}

void ConnectionManager::QueueLocked(SimCmId* owner, rdma_cm_event_type type, int status,
                                    SimCmId* event_id, SimCmId* listen_id,
                                    const rdma_conn_param* conn, const void* private_data,
                                    uint8_t private_data_len, bool connect_response,
                                    const rdma_ud_param* ud) {
  SimEventChannel* channel = owner->channel;
  if (channel == nullptr) return;  // a synchronous id: nobody to tell
  PendingCmEvent event;
  std::memset(&event, 0, sizeof(event));
  event.owner = owner;
  event.id = event_id;
  event.listen_id = listen_id;
  event.type = type;
  event.status = status;
  if (conn != nullptr) event.conn = *conn;
  event.conn.private_data = nullptr;
  event.conn.private_data_len = 0;
  event.private_data_len = private_data_len;
  if (private_data_len > 0) std::memcpy(event.private_data, private_data, private_data_len);
  if (ud != nullptr) {
    event.is_ud = true;
    event.ud = *ud;
    event.ud.private_data = nullptr;
  }
  event.connect_response = connect_response;
  event.due_ns = GlobalClock().now_ns();
  softrpma::MutexLock channel_lock(&channel->mu);
  PushEventLocked(channel, event);
  if (TraceOn()) {
    TraceEvent("cm_event id=%u type=%s status=%d", event_id->serial,
               NameOr(CmEventName(type), type).c_str(), status);
  }
}

void ConnectionManager::QueueTimerLocked(SimCmId* id, rdma_cm_event_type type, int status,
                                         uint64_t delay_ns, bool until_drep,
                                         uint64_t hold_until_ns) {
  SimEventChannel* channel = id->channel;
  if (channel == nullptr) return;
  PendingCmEvent event;
  std::memset(&event, 0, sizeof(event));
  event.owner = id;
  event.id = id;
  event.type = type;
  event.status = status;
  event.due_ns = GlobalClock().now_ns() + delay_ns;
  event.until_drep = until_drep;
  event.hold_until_ns = until_drep ? hold_until_ns : 0;
  softrpma::MutexLock channel_lock(&channel->mu);
  PushEventLocked(channel, event);
  if (TraceOn()) {
    TraceEvent("cm_event id=%u type=%s status=%d at=%llu", id->serial,
               NameOr(CmEventName(type), type).c_str(), status,
               static_cast<unsigned long long>(event.due_ns));
  }
}

void ConnectionManager::PushEventLocked(SimEventChannel* channel, PendingCmEvent event) {
  auto& events = channel->events;
  if (events.empty()) {
    channel->signal.Raise();
  } else {
    channel->signal.Wake();
  }
  auto pos = events.end();
  while (pos != events.begin() && std::prev(pos)->due_ns > event.due_ns) --pos;
  events.insert(pos, event);
}

std::vector<PendingCmEvent> ConnectionManager::TakeEventsLocked(SimCmId* owner) {
  std::vector<PendingCmEvent> taken;
  SimEventChannel* channel = owner->channel;
  if (channel == nullptr) return taken;
  softrpma::MutexLock channel_lock(&channel->mu);
  auto& events = channel->events;
  const bool had_events = !events.empty();
  for (auto it = events.begin(); it != events.end();) {
    if (it->owner == owner) {
      taken.push_back(*it);
      it = events.erase(it);
    } else {
      ++it;
    }
  }
  if (had_events && events.empty()) channel->signal.Lower();
  return taken;
}

std::shared_ptr<CmPeer> ConnectionManager::DrepToSettle(SimEventChannel* channel) {
  softrpma::MutexLock lock(&mu_);
  softrpma::MutexLock channel_lock(&channel->mu);
  if (channel->events.empty()) return nullptr;
  const PendingCmEvent& next = channel->events.front();
  if (!next.until_drep || next.due_ns <= GlobalClock().now_ns() || !next.owner->awaiting_drep) {
    return nullptr;
  }
  return next.owner->peer;
}

int ConnectionManager::GetEvent(SimEventChannel* channel, rdma_cm_event** event) {
  // Counted before any lock is taken: DestroyEventChannel keeps the channel for us. Left
  // also when a pthread_cancel of a sleeper unwinds this frame (see SignalFd::Wait).
  channel->callers.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    SimEventChannel* channel;
    ~Leave() {
      bool last_of_destroyed;
      {
        softrpma::MutexLock lock(&channel->mu);
        last_of_destroyed =
            channel->callers.fetch_sub(1, std::memory_order_seq_cst) == 1 && channel->destroyed;
      }
      if (last_of_destroyed) Delete(channel);
    }
  };
  SimCmId* connect_response = nullptr;
  int err;
  {
    Leave leave{channel};
    // A DREP that reached this process beats the DREQ's timeout whatever the fabric thread's
    // timing: whether it came is decided by what arrived, not by who read it first.
    if (std::shared_ptr<CmPeer> peer = DrepToSettle(channel); peer != nullptr) peer->Settle();
    waits::ScopedWait wait("rdma_get_cm_event",
                           waits::On() ? DescribeChannel(channel) : std::string());
    err = TakeEvent(channel, event, &connect_response);
  }
  if (err == 0 && connect_response != nullptr) ProcessConnectResponse(connect_response);
  return err;
}

std::string ConnectionManager::DescribeChannel(SimEventChannel* channel) {
  static const char* const kStates[] = {"idle",      "bound",         "address resolved",
                                        "route resolved", "listening", "connecting",
                                        "connect request received", "connected",
                                        "disconnected", "rejected", "unreachable"};
  softrpma::MutexLock lock(&mu_);
  std::string ids;
  for (const auto& [serial, id] : ids_) {
    if (id->channel != channel) continue;
    absl::StrAppend(&ids, ids.empty() ? "" : "; ", "id ", serial, " ",
                    kStates[static_cast<int>(id->state)]);
    if (id->state == SimCmId::State::kListening) {
      absl::StrAppend(&ids, " on ", AddressToString(&id->id.route.addr.src_addr));
    } else if (id->id.qp != nullptr) {
      absl::StrAppend(&ids, ", QP ", id->id.qp->qp_num);
    }
    if (!id->pending_requests.empty()) {
      absl::StrAppend(&ids, ", ", id->pending_requests.size(), " requests not yet taken");
    }
  }
  return absl::StrCat("a CM event on the channel of ", ids.empty() ? "no id" : ids);
}

void ConnectionManager::ProcessConnectResponse(SimCmId* id) {
  // The event is delivered and unacknowledged: `id` cannot be destroyed under us (EBUSY).
  softrpma::MutexLock lock(&mu_);
  // A DREQ that came meanwhile leaves the QP alone: it still goes to RTS.
  const bool dreq_received = id->state == State::kDisconnected && id->owes_drep;
  if ((id->state != State::kConnected && !dreq_received) || id->id.qp == nullptr) {
    return;  // ended meanwhile
  }
  SimQp* qp = to_sim(id->id.qp);
  if (TraceOn()) TraceEvent("cm_connect_response id=%u qp=%u", id->serial, qp->qp.qp_num);
  std::shared_ptr<CmPeer> peer = id->peer;
  if (peer == nullptr) {  // the passive side went away
    EnterRts(qp);
    return;
  }
  peer->EnterRts(qp);
  peer->SendReady();
}

namespace {

// The private data length an event reports, as the kernel's CM does: on IB / RoCE the whole
// private data field of the CM message (the REQ's 56 bytes after the rdma_cm header, the REP's
// 196, the REJ's 148), zero-padded past what was sent, also when nothing was; on iWARP exactly
// what was sent.
uint8_t ReportedPrivateDataLength(const PendingCmEvent& pending) {
  if (pending.is_ud) return pending.ud.private_data_len;  // set when queued (UD IDS)
  const DeviceProfile& device = ActiveProfile();
  if (device.transport == IBV_TRANSPORT_IWARP) return pending.private_data_len;
  switch (pending.type) {
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return static_cast<uint8_t>(device.max_connect_private_data);
    case RDMA_CM_EVENT_ESTABLISHED:
      return pending.connect_response ? static_cast<uint8_t>(device.max_accept_private_data)
                                      : pending.private_data_len;
    case RDMA_CM_EVENT_REJECTED:
      return static_cast<uint8_t>(device.max_reject_private_data);
    default:
      return pending.private_data_len;
  }
}

}  // namespace

int ConnectionManager::CarriersOf(SimEventChannel* channel, std::shared_ptr<Transport>* out,
                                  int max) {
  softrpma::MutexLock lock(&mu_);
  int count = 0;
  for (const auto& [serial, id] : ids_) {
    if (count == max) break;
    if (id->channel != channel || id->peer == nullptr) continue;
    if (std::shared_ptr<Transport> carrier = id->peer->Carrier(); carrier != nullptr) {
      out[count++] = std::move(carrier);
    }
  }
  return count;
}

int ConnectionManager::TakeEvent(SimEventChannel* channel, rdma_cm_event** event,
                                 SimCmId** connect_response) {
  bool watch = true;  // off for the one Wait after the counter woke a watch
  while (true) {
    // Ended when this iteration ends, however it ends, after the lock is let go.
    SleeperWatches watched;
    if (watch) {
      std::shared_ptr<Transport> found[SleeperWatches::kMax];
      const int n = CarriersOf(channel, found, SleeperWatches::kMax);
      for (int i = 0; i < n; ++i) watched.Add(std::move(found[i]));
    }
    int ready = -1;
    uint64_t held_ns = 0;  // the front event is a timer held for a peer's answer this long
    {
      softrpma::MutexLock lock(&channel->mu);
      if (!channel->events.empty() && channel->events.front().hold_until_ns != 0) {
        const PendingCmEvent& front = channel->events.front();
        held_ns = HeldForNs(front, host::NowNs());
        if (held_ns > 0) {
          channel->signal.Raise();  // (if a Wait took the counter) for other readers
          if ((fcntl(channel->signal.fd(), F_GETFL) & O_NONBLOCK) != 0) return EAGAIN;
        } else if (front.until_drep && TraceOn() && front.type == RDMA_CM_EVENT_DISCONNECTED) {
          // Real time decided: the peer process did not answer within the bound.
          TraceEvent("cm_peer_silent id=%u", front.id->serial);
        }
      }
      if (held_ns == 0 && !channel->events.empty()) {
        SimCmEvent* sim_event = New<SimCmEvent>();
        if (sim_event == nullptr) return ENOMEM;  // the event stays queued
        const PendingCmEvent& pending = channel->events.front();
        std::memset(&sim_event->event, 0, sizeof(sim_event->event));
        sim_event->owner = pending.owner;
        sim_event->event.id = &pending.id->id;
        sim_event->event.listen_id =
            pending.listen_id != nullptr ? &pending.listen_id->id : nullptr;
        sim_event->event.event = pending.type;
        sim_event->event.status = pending.status;
        const uint8_t reported = ReportedPrivateDataLength(pending);
        if (reported > 0) {
          std::memcpy(sim_event->private_data, pending.private_data, reported);  // zero-padded
        }
        const void* private_data = reported > 0 ? sim_event->private_data : nullptr;
        if (pending.is_ud) {
          sim_event->event.param.ud = pending.ud;
          sim_event->event.param.ud.private_data = private_data;
          sim_event->event.param.ud.private_data_len = reported;
        } else {
          sim_event->event.param.conn = pending.conn;
          sim_event->event.param.conn.private_data = private_data;
          sim_event->event.param.conn.private_data_len = reported;
        }
        sim_event->id_serial = pending.id->serial;
        if (pending.connect_response) *connect_response = pending.id;
        GlobalClock().AdvanceTo(pending.due_ns);  // the program waited for it
        if (TraceOn()) {
          TraceEvent("cm_event_got id=%u type=%s", pending.id->serial,
                     NameOr(CmEventName(pending.type), pending.type).c_str());
        }
        pending.owner->unacked_events.fetch_add(1, std::memory_order_acq_rel);
        __atomic_store_n(&pending.owner->id.event, &sim_event->event, __ATOMIC_RELEASE);
        channel->events.pop_front();
        if (channel->events.empty()) {
          channel->signal.Lower();
        } else {
          channel->signal.Raise();  // (after a Wait took the counter) for the next reader
        }
        *event = &sim_event->event;
        return 0;
      }
      if (held_ns == 0) {
        const int err =
            channel->signal.Wait(&channel->mu, watched.fds(), watched.count(), &ready);
        if (err != 0) return err;
      }
    }
    if (held_ns > 0) {
      // The channel's fd stays readable (the event is there): sleep on the connections
      // instead, a few milliseconds at a time (the fabric thread may take the DREP first).
      // (Never kRaised: the watch stays on for the next round.)
      ready = WaitOnWatches(watched, std::min<uint64_t>(held_ns, kHoldSliceNs));
    }
    // Handled with no lock held (the carrier's handlers take the CM's locks); an event it
    // queues here is this thread's to take next (SignalFd, THE LOOKER'S OWN NEWS).
    {
      SignalFd::ScopedLooking looking(&channel->signal);
      watched.Serve(ready);
    }
    watch = ready != SignalFd::kRaised;
  }
}

int ConnectionManager::AckEvent(SimCmEvent* event) {
  SimCmId* owner = event->owner;
  rdma_cm_event* expected = &event->event;
  __atomic_compare_exchange_n(&owner->id.event, &expected, nullptr, false, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
  owner->unacked_events.fetch_sub(1, std::memory_order_acq_rel);
  if (TraceOn()) {
    TraceEvent("cm_event_ack id=%u type=%s", event->id_serial,
               NameOr(CmEventName(event->event.event), event->event.event).c_str());
  }
  Delete(event);
  return 0;
}

}  // namespace softrpma::sim
