// ep.cc: listening endpoints (rpma_ep_listen(3), rpma_ep_next_conn_req(3), rpma_ep_get_fd(3),
// rpma_ep_shutdown(3)): an rdma_cm id listening on an address, with the event channel its
// connection requests arrive on.
//
// Each CONNECT_REQUEST event is acknowledged in rpma_ep_next_conn_req(), once the request is
// made (as librpma does): a request the program has not connected or deleted yet then holds no
// event, and the listening id can be destroyed. An acknowledgement that fails is not forgotten:
// the endpoint keeps the event (and its id, which rdma_destroy_id cannot release before the
// event is acknowledged) and acknowledges it again at rpma_ep_shutdown().
//
// Not thread-safe: one thread at a time takes requests from an endpoint.

#include <cerrno>
#include <cstring>

#include "api/internal/conn_req.h"
#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/peer.h"
#include "api/internal/traced_call.h"
#include "librpma.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"

namespace softrpma::api {
namespace {

// An event of the listening channel whose rdma_ack_cm_event failed and, for a CONNECT_REQUEST,
// the id it brought (destroyed only after the event is acknowledged).
struct UnackedRequest {
  rdma_cm_event* event = nullptr;
  rdma_cm_id* id = nullptr;  // nullptr: nothing to destroy
  UnackedRequest* next = nullptr;
};

}  // namespace
}  // namespace softrpma::api

struct rpma_ep {
  softrpma::Backend* backend = nullptr;
  rpma_peer* peer = nullptr;
  rdma_event_channel* event_channel = nullptr;
  rdma_cm_id* id = nullptr;
  softrpma::api::UnackedRequest* unacked = nullptr;  // to acknowledge again at shutdown
};

namespace softrpma::api {
namespace {

// Keeps `event`, whose acknowledgement failed, and its `id` (or nullptr) for rpma_ep_shutdown.
void KeepUnacked(rpma_ep* ep, rdma_cm_event* event, rdma_cm_id* id) {
  UnackedRequest* unacked = New<UnackedRequest>();
  if (unacked == nullptr) {
    RPMA_LOG_ERROR("out of memory: a connection request event stays unacknowledged");
    return;
  }
  unacked->event = event;
  unacked->id = id;
  unacked->next = ep->unacked;
  ep->unacked = unacked;
}

// Acknowledges `event`, then destroys `id` (unless nullptr). On a failed acknowledgement the
// endpoint keeps both (they are tried again at rpma_ep_shutdown). Returns 0 or the Backend error
// of the first failure (logged).
int AckThenDestroyId(rpma_ep* ep, rdma_cm_event* event, rdma_cm_id* id) {
  int err = ep->backend->RdmaAckCmEvent(event);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_ack_cm_event");
    KeepUnacked(ep, event, id);
    return err;
  }
  if (id == nullptr) return 0;
  err = ep->backend->RdmaDestroyId(id);
  if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "rdma_destroy_id");
  return err;
}

// Acknowledges again every event whose acknowledgement failed, and destroys its id. Those whose
// acknowledgement fails again stay. Returns 0 or the first RPMA_E_* code (logged).
int FinishUnacked(rpma_ep* ep) {
  int ret = 0;
  UnackedRequest* pending = ep->unacked;
  ep->unacked = nullptr;
  while (pending != nullptr) {
    UnackedRequest* next = pending->next;
    int err = AckThenDestroyId(ep, pending->event, pending->id);  // re-queued when it fails
    if (err != 0) KeepFirstError(&ret, RpmaErrorFromBackend(err));
    Delete(pending);
    pending = next;
  }
  return ret;
}

// Binds ep->id to addr:port and listens. Returns 0 or an RPMA_E_* code (logged).
int BindAndListen(rpma_ep* ep, const char* addr, const char* port) {
  rdma_addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_qp_type = IBV_QPT_RC;  // as librpma asks
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* rai = nullptr;
  int err = ep->backend->RdmaGetaddrinfo(addr, port, &hints, &rai);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_getaddrinfo");
    return RpmaErrorFromBackend(err);
  }
  err = ep->backend->RdmaBindAddr(ep->id, rai->ai_src_addr);
  ep->backend->RdmaFreeaddrinfo(rai);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_bind_addr");
    return RpmaErrorFromBackend(err);
  }
  err = ep->backend->RdmaListen(ep->id, 0 /* backlog: the provider's default */);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_listen");
    return RpmaErrorFromBackend(err);
  }
  return 0;
}

// Rejects, acknowledges and destroys the id of a connection request the endpoint cannot take.
void DropConnectRequest(rpma_ep* ep, rdma_cm_event* event) {
  rdma_cm_id* id = event->id;
  int err = ep->backend->RdmaReject(id, nullptr, 0);
  if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "rdma_reject");
  (void)AckThenDestroyId(ep, event, id);
}

// Forgets the events FinishUnacked could not acknowledge (logged): the endpoint goes away.
void DropUnacked(rpma_ep* ep) {
  while (ep->unacked != nullptr) {
    UnackedRequest* next = ep->unacked->next;
    RPMA_LOG_ERROR("a connection request event could not be acknowledged; it is abandoned");
    Delete(ep->unacked);
    ep->unacked = next;
  }
}

}  // namespace
}  // namespace softrpma::api

extern "C" {

int rpma_ep_listen(struct rpma_peer* peer, const char* addr, const char* port,
                   struct rpma_ep** ep_ptr) {
  softrpma::api::TracedCall call("rpma_ep_listen", "addr=%s port=%s",
                                 softrpma::api::TraceWord(addr).c_str(),
                                 softrpma::api::TraceWord(port).c_str());
  using softrpma::api::RpmaErrorFromBackend;
  if (peer == nullptr || addr == nullptr || port == nullptr || ep_ptr == nullptr) {
    return call.Return(RPMA_E_INVAL);
  }
  rpma_ep* ep = softrpma::New<rpma_ep>();
  if (ep == nullptr) return call.Return(RPMA_E_NOMEM);
  ep->backend = softrpma::api::PeerBackend(peer);
  ep->peer = peer;
  int err = ep->backend->RdmaCreateEventChannel(&ep->event_channel);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_create_event_channel");
    softrpma::Delete(ep);
    return call.Return(RpmaErrorFromBackend(err));
  }
  err = ep->backend->RdmaCreateId(ep->event_channel, &ep->id, nullptr, RDMA_PS_TCP);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_create_id");
    ep->backend->RdmaDestroyEventChannel(ep->event_channel);
    softrpma::Delete(ep);
    return call.Return(RpmaErrorFromBackend(err));
  }
  int ret = softrpma::api::BindAndListen(ep, addr, port);
  if (ret != 0) {
    err = ep->backend->RdmaDestroyId(ep->id);
    if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "rdma_destroy_id");
    ep->backend->RdmaDestroyEventChannel(ep->event_channel);
    softrpma::Delete(ep);
    return call.Return(ret);
  }
  *ep_ptr = ep;
  RPMA_LOG_NOTICE("waiting for incoming connections on %s:%s", addr, port);
  return call.Return(0);
}

int rpma_ep_shutdown(struct rpma_ep** ep_ptr) {
  softrpma::api::TracedCall call("rpma_ep_shutdown");
  if (ep_ptr == nullptr) return call.Return(RPMA_E_INVAL);
  rpma_ep* ep = *ep_ptr;
  if (ep == nullptr) return call.Return(0);
  int ret = softrpma::api::FinishUnacked(ep);
  // Events whose acknowledgement failed twice are given up with the endpoint.
  softrpma::api::DropUnacked(ep);
  // As librpma: the endpoint is released and *ep_ptr cleared even when the provider fails.
  int err = ep->backend->RdmaDestroyId(ep->id);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_destroy_id");
    softrpma::api::KeepFirstError(&ret, softrpma::api::RpmaErrorFromBackend(err));
  }
  ep->backend->RdmaDestroyEventChannel(ep->event_channel);
  softrpma::Delete(ep);
  *ep_ptr = nullptr;
  return call.Return(ret);
}

int rpma_ep_get_fd(const struct rpma_ep* ep, int* fd) {
  if (ep == nullptr || fd == nullptr) return RPMA_E_INVAL;
  *fd = ep->event_channel->fd;
  return 0;
}

int rpma_ep_next_conn_req(struct rpma_ep* ep, const struct rpma_conn_cfg* cfg,
                          struct rpma_conn_req** req_ptr) {
  softrpma::api::TracedCall call("rpma_ep_next_conn_req");
  if (ep == nullptr || req_ptr == nullptr) return call.Return(RPMA_E_INVAL);
  rdma_cm_event* event = nullptr;
  int err = ep->backend->RdmaGetCmEvent(ep->event_channel, &event);
  if (err != 0) {
    if (err == EAGAIN || err == ENODATA) return call.Return(RPMA_E_NO_EVENT);
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_get_cm_event");
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    RPMA_LOG_ERROR("rdma_get_cm_event() returned event %d, not a connection request",
                   static_cast<int>(event->event));
    // Kept for rpma_ep_shutdown when its acknowledgement fails; its id is no one's to destroy.
    (void)softrpma::api::AckThenDestroyId(ep, event, nullptr);
    return call.Return(RPMA_E_INVAL);
  }
  rpma_conn_req* req = nullptr;
  int ret = softrpma::api::ConnReqFromCmEvent(ep->peer, event, cfg, &req);
  if (ret != 0) {
    softrpma::api::DropConnectRequest(ep, event);
    return call.Return(ret);
  }
  // Acknowledged here, as librpma does: the request keeps a copy of the private data.
  err = ep->backend->RdmaAckCmEvent(event);
  if (err != 0) {
    // As librpma, the request is deleted (rejected) and the call fails; the event and the id
    // are kept, to be acknowledged and destroyed at rpma_ep_shutdown().
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_ack_cm_event");
    softrpma::api::KeepUnacked(ep, event, softrpma::api::ConnReqDeleteKeepingId(req));
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  *req_ptr = req;
  return call.Return(0);
}

}  // extern "C"
