// rdmacm_shim.cc: librdmacm.so.1 of the verbs shim (shim.h has the model). Thin: every call goes
// to the Backend that the shim's libibverbs.so.1 hands out (softrpma_shim_backend), so that
// rdma_cm ids and the verbs objects of a program live on one simulated NIC. librdmacm's
// convention is put back on top of the Backend's: 0, or -1 with errno (NULL + errno for
// rdma_create_event_channel and rdma_get_devices).
//
// WHAT WORKS: rdma_getaddrinfo, rdma_freeaddrinfo, rdma_create_event_channel,
// rdma_destroy_event_channel, rdma_create_id, rdma_destroy_id, rdma_migrate_id, rdma_bind_addr,
// rdma_resolve_addr, rdma_resolve_route, rdma_listen, rdma_create_qp, rdma_create_qp_ex (a
// NULL PD is the device's, NULL CQs are made with the QP and destroyed with it),
// rdma_destroy_qp, rdma_create_ep, rdma_get_request, rdma_destroy_ep (the QP, then the id),
// rdma_connect, rdma_accept, rdma_reject (and rdma_reject_ece, ECE ignored), for RC ids and
// for RDMA_PS_UDP ids (UD QPs, SIDR: simverbs/sim/cm/cm.h, "UD IDS"),
// rdma_disconnect, rdma_get_cm_event, rdma_ack_cm_event, rdma_event_str, rdma_get_src_port,
// rdma_get_dst_port, rdma_get_devices, rdma_free_devices; rpoll (no fd is an rsocket here, so
// it is poll(2)).
// The synchronous helpers of rdma_verbs.h (rdma_reg_msgs, rdma_post_send, rdma_get_recv_comp,
// ...) are inline: they work on what rdma_create_qp put on the id (its PD, CQs, channels).
// SYNCHRONOUS IDS, as rdma-core's librdmacm/cma.c has them: an id made without an event channel
// (rdma_create_id with NULL, rdma_create_ep, rdma_migrate_id to NULL, and each request a
// synchronous listener gets) has a channel of its own, and rdma_resolve_addr,
// rdma_resolve_route, rdma_connect, rdma_accept and rdma_disconnect on it return when the
// event they cause has come: -1 with errno from its status (REJECTED: ECONNREFUSED), the event
// kept in id->event until the id's next such call or its destruction acknowledges it.
// rdma_get_request needs a synchronous listener (EINVAL otherwise), as there. rdma_accept of a
// UD id (RDMA_PS_UDP: SIDR) returns at once, as no event follows it there.
// rdma_create_ep with ai_route or ai_connect in the rdma_addrinfo (IB path records, AF_IB
// service data: never made by this rdma_getaddrinfo) fails with ENOSYS.
// WHAT FAILS CLEANLY (-1 + errno ENOSYS, or NULL + ENOSYS): rdma_create_srq(_ex),
// rdma_destroy_srq (nothing), rdma_establish, rdma_init_qp_attr, rdma_notify,
// rdma_set_option, multicast (rdma_join_multicast(_ex), rdma_leave_multicast),
// rdma_set_local_ece / rdma_get_remote_ece (EOPNOTSUPP), and the rsockets API but rpoll
// (rsocket, rbind, ..., riowrite).

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "simverbs/backend.h"
#include "simverbs/shim/shim.h"

// verbs.h's inline wrapper would call ibv_static_providers, which the shim has not.
#undef ibv_get_device_list

namespace {

using softrpma::Backend;

// -1 with errno from a Backend error (a getaddrinfo failure keeps its EAI_* code in errno, as
// librdmacm has it; kNoErrno becomes EIO).
int Fail(int err) {
  if (softrpma::IsGaiError(err)) {
    errno = softrpma::GaiCode(err);
  } else {
    errno = err == softrpma::kNoErrno ? EIO : err;
  }
  return -1;
}
int Result(int err) { return err == 0 ? 0 : Fail(err); }

// NULL when the simulator cannot start (errno EINVAL, its message on stderr).
Backend* B() { return softrpma_shim_backend(); }

int NotSupported(int err = ENOSYS) {
  errno = err;
  return -1;
}

// ---- Synchronous ids (the model is at the top) ------------------------------------------------

// What librdmacm keeps beside a synchronous id: the QP attributes of a passive endpoint of
// rdma_create_ep, for the QPs rdma_get_request makes.
struct SyncId {
  bool has_qp_attr = false;
  ibv_qp_init_attr qp_attr = {};
};

std::mutex g_sync_mu;
// Never destroyed: ids may be destroyed by atexit handlers after static destructors.
auto* const g_sync = new std::unordered_map<const rdma_cm_id*, SyncId>;
// Held across fork(), so that a child never inherits it locked by a thread it does not have.
const int g_sync_fork_handlers = pthread_atfork([] { g_sync_mu.lock(); },
                                                [] { g_sync_mu.unlock(); },
                                                [] { g_sync_mu.unlock(); });

bool IsSync(const rdma_cm_id* id) {
  std::lock_guard<std::mutex> lock(g_sync_mu);
  return g_sync->count(id) != 0;
}

// Gives `id` (now on a channel of its own) the synchronous model.
void MarkSync(const rdma_cm_id* id) {
  std::lock_guard<std::mutex> lock(g_sync_mu);
  (*g_sync)[id];
}

// Forgets `id` as synchronous; true when it was.
bool ForgetSync(const rdma_cm_id* id) {
  std::lock_guard<std::mutex> lock(g_sync_mu);
  return g_sync->erase(id) != 0;
}

// The event a synchronous id holds (the result of its last call) is acknowledged.
void AckHeldEvent(Backend* backend, rdma_cm_id* id) {
  if (id->event == nullptr) return;
  backend->RdmaAckCmEvent(id->event);
  id->event = nullptr;
}

// Moves `id` (not synchronous) to a channel of its own, made for it (its fd is pollable, as
// rdma-core's), and makes it synchronous; on failure it stays where it was.
int MakeSync(Backend* backend, rdma_cm_id* id) {
  rdma_event_channel* own = nullptr;
  if (int err = backend->RdmaCreateEventChannel(&own); err != 0) return err;
  if (int err = backend->RdmaMigrateId(id, own); err != 0) {
    backend->RdmaDestroyEventChannel(own);
    return err;
  }
  MarkSync(id);
  return 0;
}

// rdma-core's ucma_complete: on a synchronous id, waits for the event its call caused and keeps
// it in id->event; its status is the call's result.
int Complete(rdma_cm_id* id);

}  // namespace

extern "C" {

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                     rdma_addrinfo** res) {
  Backend* backend = B();
  return backend == nullptr ? -1 : Result(backend->RdmaGetaddrinfo(node, service, hints, res));
}

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  if (Backend* backend = B()) backend->RdmaFreeaddrinfo(res);
}

rdma_event_channel* rdma_create_event_channel(void) {
  Backend* backend = B();
  if (backend == nullptr) return nullptr;
  rdma_event_channel* channel = nullptr;
  const int err = backend->RdmaCreateEventChannel(&channel);
  if (err != 0) {
    Fail(err);
    return nullptr;
  }
  return channel;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (Backend* backend = B()) backend->RdmaDestroyEventChannel(channel);
}

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  if (channel != nullptr) return Result(backend->RdmaCreateId(channel, id, context, ps));
  if (id == nullptr) return Fail(EINVAL);
  rdma_event_channel* own = nullptr;
  if (int err = backend->RdmaCreateEventChannel(&own); err != 0) return Fail(err);
  if (int err = backend->RdmaCreateId(own, id, context, ps); err != 0) {
    backend->RdmaDestroyEventChannel(own);
    return Fail(err);
  }
  MarkSync(*id);
  return 0;
}

int rdma_destroy_id(rdma_cm_id* id) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  // A synchronous id's held event is acknowledged, and its channel goes with it. Forgotten
  // before the id goes (a new id may take its address at once), again if it stays.
  const bool sync = id != nullptr && ForgetSync(id);
  rdma_event_channel* own = sync ? id->channel : nullptr;
  if (sync) AckHeldEvent(backend, id);
  // A QP left on the id is the caller's now, for ibv_destroy_qp, as on rdma-core: forgotten
  // before the id goes (an ibv_destroy_qp meanwhile must not find the id), again if it stays.
  ibv_qp* qp = id != nullptr ? id->qp : nullptr;
  if (qp != nullptr) softrpma_shim_qp_gone(qp);
  const int err = backend->RdmaDestroyId(id);
  if (err != 0) {
    if (qp != nullptr) softrpma_shim_qp_made(qp, id);
    if (sync) MarkSync(id);
    return Fail(err);
  }
  if (sync) backend->RdmaDestroyEventChannel(own);
  return 0;
}

int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  if (id == nullptr) return Fail(EINVAL);
  const bool was_sync = IsSync(id);
  if (channel == nullptr) {
    // To a channel of its own: the id becomes synchronous (it is one already: EINVAL).
    return was_sync ? Fail(EINVAL) : Result(MakeSync(backend, id));
  }
  if (!was_sync) return Result(backend->RdmaMigrateId(id, channel));
  // A synchronous id to the user's channel: its own channel (empty now: pending events move
  // with the id) and its held event go.
  rdma_event_channel* own = id->channel;
  if (int err = backend->RdmaMigrateId(id, channel); err != 0) return Fail(err);
  AckHeldEvent(backend, id);
  ForgetSync(id);
  backend->RdmaDestroyEventChannel(own);
  return 0;
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  Backend* backend = B();
  return backend == nullptr ? -1 : Result(backend->RdmaBindAddr(id, addr));
}

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  if (int err = backend->RdmaResolveAddr(id, src_addr, dst_addr, timeout_ms); err != 0) {
    return Fail(err);
  }
  return Complete(id);
}

int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  if (int err = backend->RdmaResolveRoute(id, timeout_ms); err != 0) return Fail(err);
  return Complete(id);
}

int rdma_listen(rdma_cm_id* id, int backlog) {
  Backend* backend = B();
  return backend == nullptr ? -1 : Result(backend->RdmaListen(id, backlog));
}

int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* qp_init_attr) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  const int err = backend->RdmaCreateQpEx(id, qp_init_attr);
  if (err != 0) return Fail(err);
  softrpma_shim_qp_made(id->qp, id);
  return 0;
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (id == nullptr || qp_init_attr == nullptr) return Fail(EINVAL);
  ibv_qp_init_attr_ex attr_ex = {};
  attr_ex.qp_context = qp_init_attr->qp_context;
  attr_ex.send_cq = qp_init_attr->send_cq;
  attr_ex.recv_cq = qp_init_attr->recv_cq;
  attr_ex.srq = qp_init_attr->srq;
  attr_ex.cap = qp_init_attr->cap;
  attr_ex.qp_type = qp_init_attr->qp_type;
  attr_ex.sq_sig_all = qp_init_attr->sq_sig_all;
  attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr_ex.pd = pd;
  if (rdma_create_qp_ex(id, &attr_ex) != 0) return -1;
  qp_init_attr->cap = attr_ex.cap;  // the granted capabilities, as librdmacm writes them back
  return 0;
}

void rdma_destroy_qp(rdma_cm_id* id) {
  Backend* backend = B();
  if (backend == nullptr || id == nullptr) return;
  if (id->qp != nullptr) softrpma_shim_qp_gone(id->qp);
  backend->RdmaDestroyQp(id);
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  if (int err = backend->RdmaConnect(id, conn_param); err != 0) return Fail(err);
  return Complete(id);
}

int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  if (int err = backend->RdmaAccept(id, conn_param); err != 0) return Fail(err);
  if (id->qp_type == IBV_QPT_UD) {
    // A SIDR REP: no event follows on this side. As rdma-core, a synchronous id's held event
    // (its request) is acknowledged, and the call returns.
    if (IsSync(id)) AckHeldEvent(backend, id);
    return 0;
  }
  return Complete(id);
}

int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  Backend* backend = B();
  return backend == nullptr ? -1
                            : Result(backend->RdmaReject(id, private_data, private_data_len));
}

int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return rdma_reject(id, private_data, private_data_len);
}

int rdma_disconnect(rdma_cm_id* id) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  if (int err = backend->RdmaDisconnect(id); err != 0) return Fail(err);
  return Complete(id);
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  if (int err = backend->RdmaGetCmEvent(channel, event); err != 0) return Fail(err);
  rdma_cm_event* got = *event;
  if (got->event != RDMA_CM_EVENT_CONNECT_REQUEST || got->listen_id == nullptr ||
      !IsSync(got->listen_id)) {
    return 0;
  }
  // A request of a synchronous listener is synchronous (rdma-core's ucma_process_conn_req).
  // When it cannot be, the request is refused (its id destroyed: the requester is rejected)
  // and the call fails, as there.
  const int err = MakeSync(backend, got->id);
  if (err == 0) return 0;
  rdma_cm_id* request = got->id;
  backend->RdmaAckCmEvent(got);
  backend->RdmaDestroyId(request);
  *event = nullptr;
  return Fail(err);
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  Backend* backend = B();
  return backend == nullptr ? -1 : Result(backend->RdmaAckCmEvent(event));
}

const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
    default: return "UNKNOWN EVENT";
  }
}

namespace {
__be16 PortOf(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(addr)->sin_port;
  if (addr->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port;
  return 0;
}
}  // namespace

__be16 rdma_get_src_port(rdma_cm_id* id) {
  return id != nullptr ? PortOf(&id->route.addr.src_addr) : 0;
}
__be16 rdma_get_dst_port(rdma_cm_id* id) {
  return id != nullptr ? PortOf(&id->route.addr.dst_addr) : 0;
}

ibv_context** rdma_get_devices(int* num_devices) {
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  if (devices == nullptr) return nullptr;
  ibv_context** list = static_cast<ibv_context**>(calloc(static_cast<size_t>(count) + 1,
                                                         sizeof(ibv_context*)));
  if (list == nullptr) {
    ibv_free_device_list(devices);
    errno = ENOMEM;
    return nullptr;
  }
  for (int i = 0; i < count; ++i) list[i] = ibv_open_device(devices[i]);
  ibv_free_device_list(devices);
  if (num_devices != nullptr) *num_devices = count;
  return list;
}

void rdma_free_devices(ibv_context** list) { free(list); }

// ---- Endpoints: synchronous ids with their QP (rdma-core's rdma_create_ep) ---------------

// A synchronous id for `res`: a passive one is bound to ai_src_addr and keeps `pd` and a copy
// of `qp_init_attr` for the requests rdma_get_request hands out; an active one has its address
// and route resolved (2 s each, as rdma-core asks) and, with `qp_init_attr`, its QP of type
// ai_qp_type. On failure nothing is left and errno says why.
int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                   ibv_qp_init_attr* qp_init_attr) {
  if (B() == nullptr) return -1;
  if (id == nullptr || res == nullptr) return Fail(EINVAL);
  if (res->ai_route_len != 0 || res->ai_connect_len != 0) return NotSupported();
  constexpr int kResolveTimeoutMs = 2000;
  rdma_cm_id* cm_id = nullptr;
  if (rdma_create_id(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space)) !=
      0) {
    return -1;
  }
  int failed = 0;
  if ((res->ai_flags & RAI_PASSIVE) != 0) {
    if (rdma_bind_addr(cm_id, res->ai_src_addr) != 0) {
      failed = errno;
    } else {
      if (pd != nullptr) cm_id->pd = pd;
      if (qp_init_attr != nullptr) {
        std::lock_guard<std::mutex> lock(g_sync_mu);
        SyncId& state = (*g_sync)[cm_id];
        state.has_qp_attr = true;
        state.qp_attr = *qp_init_attr;
        state.qp_attr.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
      }
    }
  } else if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, kResolveTimeoutMs) !=
                 0 ||
             rdma_resolve_route(cm_id, kResolveTimeoutMs) != 0) {
    failed = errno;
  } else if (qp_init_attr != nullptr) {
    qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    if (rdma_create_qp(cm_id, pd, qp_init_attr) != 0) failed = errno;
  }
  if (failed != 0) {
    rdma_destroy_ep(cm_id);
    return Fail(failed);
  }
  *id = cm_id;
  return 0;
}

// As rdma-core's: the id's QP (with the CQs rdma_create_qp made for it), its SRQ (an id has
// none here: rdma_create_srq is not modelled), then the id (and what a passive endpoint kept).
void rdma_destroy_ep(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->qp != nullptr) rdma_destroy_qp(id);
  rdma_destroy_id(id);
}

// The next connection request of a synchronous listener (EINVAL for another), as a
// synchronous id holding its CONNECT_REQUEST in id->event, with a QP made from what
// rdma_create_ep kept (on the listener's PD, else the device's). Another event, or an error
// status, fails the call and stays in listen->event.
int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  Backend* backend = B();
  if (backend == nullptr) return -1;
  if (listen == nullptr || id == nullptr || !IsSync(listen)) return Fail(EINVAL);
  AckHeldEvent(backend, listen);
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(listen->channel, &event) != 0) return -1;
  int err = 0;
  if (event->event == RDMA_CM_EVENT_REJECTED) {
    err = ECONNREFUSED;
  } else if (event->status != 0) {
    err = event->status < 0 ? -event->status : event->status;
  } else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    err = EINVAL;
  } else {
    SyncId state;
    {
      std::lock_guard<std::mutex> lock(g_sync_mu);
      if (auto it = g_sync->find(listen); it != g_sync->end()) state = it->second;
    }
    if (state.has_qp_attr && rdma_create_qp(event->id, listen->pd, &state.qp_attr) != 0) {
      err = errno;
    }
  }
  if (err != 0) {
    listen->event = event;
    return Fail(err);
  }
  *id = event->id;
  (*id)->event = event;
  return 0;
}

// ---- Not modelled ---------------------------------------------------------------------------

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  return NotSupported();
}
int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) { return NotSupported(); }
void rdma_destroy_srq(rdma_cm_id* id) {}
int rdma_establish(rdma_cm_id* id) { return NotSupported(); }
int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  return NotSupported();
}
int rdma_notify(rdma_cm_id* id, ibv_event_type event) { return NotSupported(); }
int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  return NotSupported();
}
int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) { return NotSupported(); }
int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* mc_join_attr, void* context) {
  return NotSupported();
}
int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) { return NotSupported(); }
int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) { return NotSupported(EOPNOTSUPP); }
int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) { return NotSupported(EOPNOTSUPP); }

}  // extern "C"

namespace {

int Complete(rdma_cm_id* id) {
  if (id == nullptr || !IsSync(id)) return 0;
  AckHeldEvent(B(), id);
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(id->channel, &event) != 0) return -1;
  id->event = event;
  if (event->status == 0) return 0;
  if (event->event == RDMA_CM_EVENT_REJECTED) return Fail(ECONNREFUSED);
  return Fail(event->status < 0 ? -event->status : event->status);
}

}  // namespace

extern "C" {

// ---- rsockets: none; rpoll on plain fds is poll(2) -----------------------------------------

int rpoll(pollfd* fds, nfds_t nfds, int timeout) { return poll(fds, nfds, timeout); }
int rsocket(int domain, int type, int protocol) { return NotSupported(); }
int rbind(int socket, const sockaddr* addr, socklen_t addrlen) { return NotSupported(); }
int rlisten(int socket, int backlog) { return NotSupported(); }
int raccept(int socket, sockaddr* addr, socklen_t* addrlen) { return NotSupported(); }
int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) { return NotSupported(); }
int rshutdown(int socket, int how) { return NotSupported(); }
int rclose(int socket) { return NotSupported(); }
ssize_t rrecv(int socket, void* buf, size_t len, int flags) { return NotSupported(); }
ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr,
                  socklen_t* addrlen) {
  return NotSupported();
}
ssize_t rrecvmsg(int socket, msghdr* msg, int flags) { return NotSupported(); }
ssize_t rsend(int socket, const void* buf, size_t len, int flags) { return NotSupported(); }
ssize_t rsendto(int socket, const void* buf, size_t len, int flags, const sockaddr* dest_addr,
                socklen_t addrlen) {
  return NotSupported();
}
ssize_t rsendmsg(int socket, const msghdr* msg, int flags) { return NotSupported(); }
ssize_t rread(int socket, void* buf, size_t count) { return NotSupported(); }
ssize_t rreadv(int socket, const iovec* iov, int iovcnt) { return NotSupported(); }
ssize_t rwrite(int socket, const void* buf, size_t count) { return NotSupported(); }
ssize_t rwritev(int socket, const iovec* iov, int iovcnt) { return NotSupported(); }
int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  return NotSupported();
}
int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) { return NotSupported(); }
int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) { return NotSupported(); }
int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
  return NotSupported();
}
int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  return NotSupported();
}
int rfcntl(int socket, int cmd, ...) { return NotSupported(); }
off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  return NotSupported();
}
int riounmap(int socket, void* buf, size_t len) { return NotSupported(); }
size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  errno = ENOSYS;
  return 0;
}

}  // extern "C"
