// ep.cc: listening endpoints (rpma_ep_listen(3), rpma_ep_next_conn_req(3), rpma_ep_get_fd(3),
// rpma_ep_shutdown(3)): an rdma_cm id listening on an address, with the event channel its
// connection requests arrive on.
//
// Not thread-safe: one thread at a time takes requests from an endpoint.

#include <cerrno>
#include <cstring>

#include "api/internal/conn_req.h"
#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/peer.h"
#include "librpma.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"

struct rpma_ep {
  softrpma::Backend* backend = nullptr;
  rpma_peer* peer = nullptr;
  rdma_event_channel* event_channel = nullptr;
  rdma_cm_id* id = nullptr;
};

namespace softrpma::api {
namespace {

// Binds ep->id to addr:port and listens. Returns 0 or an RPMA_E_* code (logged).
int BindAndListen(rpma_ep* ep, const char* addr, const char* port) {
  rdma_addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_flags = RAI_PASSIVE;
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
void DropConnectRequest(Backend* backend, rdma_cm_event* event) {
  rdma_cm_id* id = event->id;
  int err = backend->RdmaReject(id, nullptr, 0);
  if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "rdma_reject");
  err = backend->RdmaAckCmEvent(event);
  if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "rdma_ack_cm_event");
  err = backend->RdmaDestroyId(id);
  if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "rdma_destroy_id");
}

}  // namespace
}  // namespace softrpma::api

extern "C" {

int rpma_ep_listen(struct rpma_peer* peer, const char* addr, const char* port,
                   struct rpma_ep** ep_ptr) {
  using softrpma::api::RpmaErrorFromBackend;
  if (peer == nullptr || addr == nullptr || port == nullptr || ep_ptr == nullptr) {
    return RPMA_E_INVAL;
  }
  rpma_ep* ep = softrpma::New<rpma_ep>();
  if (ep == nullptr) return RPMA_E_NOMEM;
  ep->backend = softrpma::api::PeerBackend(peer);
  ep->peer = peer;
  int err = ep->backend->RdmaCreateEventChannel(&ep->event_channel);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_create_event_channel");
    softrpma::Delete(ep);
    return RpmaErrorFromBackend(err);
  }
  err = ep->backend->RdmaCreateId(ep->event_channel, &ep->id, nullptr, RDMA_PS_TCP);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_create_id");
    ep->backend->RdmaDestroyEventChannel(ep->event_channel);
    softrpma::Delete(ep);
    return RpmaErrorFromBackend(err);
  }
  int ret = softrpma::api::BindAndListen(ep, addr, port);
  if (ret != 0) {
    err = ep->backend->RdmaDestroyId(ep->id);
    if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "rdma_destroy_id");
    ep->backend->RdmaDestroyEventChannel(ep->event_channel);
    softrpma::Delete(ep);
    return ret;
  }
  *ep_ptr = ep;
  return 0;
}

int rpma_ep_shutdown(struct rpma_ep** ep_ptr) {
  if (ep_ptr == nullptr) return RPMA_E_INVAL;
  rpma_ep* ep = *ep_ptr;
  if (ep == nullptr) return 0;
  int err = ep->backend->RdmaDestroyId(ep->id);
  if (err != 0) {
    // The endpoint stays whole: the caller may try again.
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_destroy_id");
    return softrpma::api::RpmaErrorFromBackend(err);
  }
  ep->backend->RdmaDestroyEventChannel(ep->event_channel);
  softrpma::Delete(ep);
  *ep_ptr = nullptr;
  return 0;
}

int rpma_ep_get_fd(const struct rpma_ep* ep, int* fd) {
  if (ep == nullptr || fd == nullptr) return RPMA_E_INVAL;
  *fd = ep->event_channel->fd;
  return 0;
}

int rpma_ep_next_conn_req(struct rpma_ep* ep, const struct rpma_conn_cfg* cfg,
                          struct rpma_conn_req** req_ptr) {
  if (ep == nullptr || req_ptr == nullptr) return RPMA_E_INVAL;
  rdma_cm_event* event = nullptr;
  int err = ep->backend->RdmaGetCmEvent(ep->event_channel, &event);
  if (err != 0) {
    if (err == EAGAIN || err == ENODATA) return RPMA_E_NO_EVENT;
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_get_cm_event");
    return softrpma::api::RpmaErrorFromBackend(err);
  }
  if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    RPMA_LOG_ERROR("rdma_get_cm_event() returned event %d, not a connection request",
                   static_cast<int>(event->event));
    err = ep->backend->RdmaAckCmEvent(event);
    if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "rdma_ack_cm_event");
    return RPMA_E_INVAL;
  }
  int ret = softrpma::api::ConnReqFromCmEvent(ep->peer, event, cfg, req_ptr);
  if (ret != 0) softrpma::api::DropConnectRequest(ep->backend, event);
  return ret;
}

}  // extern "C"
