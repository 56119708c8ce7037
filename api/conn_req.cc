// conn_req.cc: connection requests (rpma_conn_req_new(3), rpma_conn_req_connect(3),
// rpma_conn_req_delete(3), rpma_conn_req_get_private_data(3), rpma_conn_req_recv(3)).
//
// A request is the part of a connection made before it is connected: CQs and an RC QP on an
// rdma_cm id. Outgoing (active side): made by rpma_conn_req_new() on an id resolved towards the
// server. Incoming (passive side): made by rpma_ep_next_conn_req() around the id of a
// CONNECT_REQUEST event, which the endpoint acknowledges as soon as the request is made (as
// librpma does), so that a pending request never holds up the listening id.
// rpma_conn_req_connect() turns either into an rpma_conn; rpma_conn_req_delete() drops it.
//
// Not thread-safe: a request is used by one thread at a time.

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "api/internal/conn.h"
#include "api/internal/conn_cfg.h"
#include "api/internal/conn_req.h"
#include "api/internal/cq.h"
#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/mr.h"
#include "api/internal/peer.h"
#include "api/internal/private_data.h"
#include "api/internal/srq.h"
#include "api/internal/traced_call.h"
#include "librpma.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"

struct rpma_conn_req {
  softrpma::Backend* backend = nullptr;
  rpma_peer* peer = nullptr;
  rdma_cm_id* id = nullptr;
  // An incoming request (made of a CONNECT_REQUEST) not yet answered by rdma_accept/rdma_reject.
  bool incoming = false;
  rpma_cq* cq = nullptr;
  rpma_cq* rcq = nullptr;
  ibv_comp_channel* shared_channel = nullptr;
  bool qp_created = false;
  softrpma::api::PrivateData* private_data = nullptr;
};

namespace softrpma::api {
namespace {

bool IsIncoming(const rpma_conn_req* req) { return req->incoming; }

// Makes the CQs, the optional shared channel and the QP of `req` on req->id, as `values` says.
// On failure releases what it made (never the id) and returns the RPMA_E_* code.
int SetUpQueues(rpma_conn_req* req, const ConnCfgValues& values) {
  Backend* backend = req->backend;
  ibv_context* ctx = req->id->verbs;
  rpma_cq* srq_rcq = values.srq != nullptr ? SrqRcq(values.srq) : nullptr;
  // As librpma (conn_req.c): the SRQ's receive CQ has a channel of its own, so the connection
  // cannot share one channel between its CQs and it.
  if (values.shared_comp_channel && srq_rcq != nullptr) {
    RPMA_LOG_ERROR("a shared completion channel cannot be used with a shared RQ that has its "
                   "own receive CQ");
    return RPMA_E_INVAL;
  }
  int ret = 0;
  if (values.shared_comp_channel) {
    int err = backend->IbvCreateCompChannel(ctx, &req->shared_channel);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "ibv_create_comp_channel");
      return RpmaErrorFromBackend(err);
    }
  }
  ret = CqNew(backend, ctx, values.cq_size, req->shared_channel, &req->cq);
  // With an SRQ that has a receive CQ, receives complete there: no RCQ of the connection's own
  // (it would never get a completion), and rpma_conn_get_rcq gives NULL, as in librpma.
  if (ret == 0 && values.rcq_size > 0 && srq_rcq == nullptr) {
    ret = CqNew(backend, ctx, values.rcq_size, req->shared_channel, &req->rcq);
  }
  if (ret == 0) {
    rpma_cq* recv_cq = srq_rcq != nullptr ? srq_rcq : (req->rcq != nullptr ? req->rcq : req->cq);
    // As librpma (peer.c): rdma_create_qp_ex on the peer's PD; an extended QP with the atomic
    // write builder where the device has one; 8 bytes of inline data for the emulated atomic
    // write where it has not (rpma_atomic_write).
    ibv_qp_init_attr_ex attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.comp_mask = IBV_QP_INIT_ATTR_PD;
    attr.pd = PeerPd(req->peer);
    if (PeerNativeAtomicWrite(req->peer)) {
      attr.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      attr.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
    }
    attr.send_cq = CqIbvCq(req->cq);
    attr.recv_cq = CqIbvCq(recv_cq);
    attr.srq = values.srq != nullptr ? SrqIbvSrq(values.srq) : nullptr;
    attr.cap.max_send_wr = values.sq_size;
    attr.cap.max_recv_wr = values.rq_size;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.cap.max_inline_data = kQpMaxInlineData;
    attr.qp_type = IBV_QPT_RC;
    attr.sq_sig_all = 0;
    int err = backend->RdmaCreateQpEx(req->id, &attr);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "rdma_create_qp_ex");
      ret = RpmaErrorFromBackend(err);
    } else {
      req->qp_created = true;
    }
  }
  if (ret != 0) {
    (void)CqDelete(&req->rcq);
    (void)CqDelete(&req->cq);
    if (req->shared_channel != nullptr) {
      int err = backend->IbvDestroyCompChannel(req->shared_channel);
      if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "ibv_destroy_comp_channel");
      req->shared_channel = nullptr;
    }
  }
  return ret;
}

// Releases the QP, the CQs and the shared channel of `req`, in the order verbs requires.
// Returns 0 or the first RPMA_E_* code (every failure is logged; the rest is still released).
int ReleaseQueues(rpma_conn_req* req) {
  int ret = 0;
  if (req->qp_created) {
    req->backend->RdmaDestroyQp(req->id);
    req->qp_created = false;
  }
  KeepFirstError(&ret, CqDelete(&req->rcq));
  KeepFirstError(&ret, CqDelete(&req->cq));
  if (req->shared_channel != nullptr) {
    int err = req->backend->IbvDestroyCompChannel(req->shared_channel);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "ibv_destroy_comp_channel");
      KeepFirstError(&ret, RpmaErrorFromBackend(err));
    }
    req->shared_channel = nullptr;
  }
  return ret;
}

// Destroys req->id. Returns 0 or RPMA_E_PROVIDER (logged).
int DestroyId(rpma_conn_req* req) {
  int err = req->backend->RdmaDestroyId(req->id);
  req->id = nullptr;
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_destroy_id");
    return RpmaErrorFromBackend(err);
  }
  return 0;
}

// Releases the queues of `req`, rejects it when it is incoming and not yet answered, and frees
// its private data; the id stays. Returns 0 or the first RPMA_E_* code (each failure logged).
int ReleaseAllButId(rpma_conn_req* req) {
  int ret = ReleaseQueues(req);
  if (req->incoming) {
    int err = req->backend->RdmaReject(req->id, nullptr, 0);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "rdma_reject");
      KeepFirstError(&ret, RpmaErrorFromBackend(err));
    }
    req->incoming = false;
  }
  PrivateDataDelete(req->private_data);
  req->private_data = nullptr;
  return ret;
}

// Tears a request down completely and frees it: queues; for an incoming request not yet
// answered, reject; then the id. Returns the first error.
int ReleaseRequest(rpma_conn_req* req) {
  int ret = ReleaseAllButId(req);
  if (req->id != nullptr) KeepFirstError(&ret, DestroyId(req));
  Delete(req);
  return ret;
}

// After a failed connect of a request whose peer may already see it: disconnects (best effort)
// and releases everything. Returns nothing: the caller reports its own first error.
void AbandonAfterConnectFailure(rpma_conn_req* req) {
  int err = req->backend->RdmaDisconnect(req->id);
  if (err != 0) RPMA_LOG_DEBUG("rdma_disconnect() while abandoning a connection: errno %d", err);
  (void)ReleaseRequest(req);
}

// At NOTICE, as librpma: the source and destination GIDs of the route `id` resolved.
void LogGids(const rdma_cm_id* id) {
  if (!LogEnabled(RPMA_LOG_LEVEL_NOTICE)) return;
  const ibv_sa_path_rec* path = id->route.path_rec;
  const ibv_gid* gids[2] = {path != nullptr ? &path->sgid : nullptr,
                            path != nullptr ? &path->dgid : nullptr};
  const char* names[2] = {"source", "destination"};
  for (int i = 0; i < 2; ++i) {
    if (gids[i] == nullptr) {
      RPMA_LOG_NOTICE("%s GID is not available", names[i]);
      continue;
    }
    const uint8_t* raw = gids[i]->raw;
    char text[40];
    std::snprintf(text, sizeof(text),
                  "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
                  raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9],
                  raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]);
    RPMA_LOG_NOTICE("%s GID %s", names[i], text);
  }
}

// The parts of `req` that its connection takes over.
ConnParts PartsOf(const rpma_conn_req* req) {
  ConnParts parts;
  parts.backend = req->backend;
  parts.peer = req->peer;
  parts.id = req->id;
  parts.cq = req->cq;
  parts.rcq = req->rcq;
  parts.shared_channel = req->shared_channel;
  parts.private_data = req->private_data;
  return parts;
}

// Frees `req` after its connection took every part over.
void FreeHandedOver(rpma_conn_req* req) { Delete(req); }

rdma_conn_param ConnParam(const rpma_conn_private_data* pdata) {
  rdma_conn_param param;
  std::memset(&param, 0, sizeof(param));
  if (pdata != nullptr) {
    param.private_data = pdata->ptr;
    param.private_data_len = pdata->len;
  }
  param.responder_resources = RDMA_MAX_RESP_RES;
  param.initiator_depth = RDMA_MAX_INIT_DEPTH;
  param.flow_control = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  return param;
}

int ConnectActive(rpma_conn_req* req, const rpma_conn_private_data* pdata, rpma_conn** conn_ptr) {
  rpma_conn* conn = nullptr;
  int ret = ConnNew(PartsOf(req), &conn);
  if (ret != 0) {
    (void)ReleaseRequest(req);
    return ret;
  }
  FreeHandedOver(req);  // the connection owns the parts now
  rdma_conn_param param = ConnParam(pdata);
  int err = ConnBackend(conn)->RdmaConnect(ConnCmId(conn), &param);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_connect");
    (void)rpma_conn_delete(&conn);
    return RpmaErrorFromBackend(err);
  }
  *conn_ptr = conn;
  return 0;
}

int ConnectPassive(rpma_conn_req* req, const rpma_conn_private_data* pdata,
                   rpma_conn** conn_ptr) {
  rdma_conn_param param = ConnParam(pdata);
  int err = req->backend->RdmaAccept(req->id, &param);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_accept");
    (void)ReleaseRequest(req);  // rejects the request
    return RpmaErrorFromBackend(err);
  }
  req->incoming = false;  // answered
  rpma_conn* conn = nullptr;
  int ret = ConnNew(PartsOf(req), &conn);
  if (ret != 0) {
    AbandonAfterConnectFailure(req);
    return ret;
  }
  FreeHandedOver(req);
  *conn_ptr = conn;
  return 0;
}

}  // namespace

int ConnReqFromCmEvent(rpma_peer* peer, rdma_cm_event* event, const rpma_conn_cfg* cfg,
                       rpma_conn_req** req_ptr) {
  rpma_conn_req* req = New<rpma_conn_req>();
  if (req == nullptr) return RPMA_E_NOMEM;
  req->backend = PeerBackend(peer);
  req->peer = peer;
  req->id = event->id;
  int ret = PrivateDataCopy(event->param.conn.private_data, event->param.conn.private_data_len,
                            &req->private_data);
  if (ret == 0) ret = SetUpQueues(req, GetConnCfgValues(cfg));
  if (ret != 0) {
    PrivateDataDelete(req->private_data);
    Delete(req);
    return ret;
  }
  req->incoming = true;
  *req_ptr = req;
  return 0;
}

rdma_cm_id* ConnReqDeleteKeepingId(rpma_conn_req* req) {
  (void)ReleaseAllButId(req);
  rdma_cm_id* id = req->id;
  Delete(req);
  return id;
}

}  // namespace softrpma::api

extern "C" {

int rpma_conn_req_new(struct rpma_peer* peer, const char* addr, const char* port,
                      const struct rpma_conn_cfg* cfg, struct rpma_conn_req** req_ptr) {
  softrpma::api::TracedCall call("rpma_conn_req_new", "addr=%s port=%s",
                                 softrpma::api::TraceWord(addr).c_str(),
                                 softrpma::api::TraceWord(port).c_str());
  using softrpma::api::RpmaErrorFromBackend;
  if (peer == nullptr || addr == nullptr || port == nullptr || req_ptr == nullptr) {
    return call.Return(RPMA_E_INVAL);
  }
  const softrpma::api::ConnCfgValues values = softrpma::api::GetConnCfgValues(cfg);
  softrpma::Backend* backend = softrpma::api::PeerBackend(peer);
  rpma_conn_req* req = softrpma::New<rpma_conn_req>();
  if (req == nullptr) return call.Return(RPMA_E_NOMEM);
  req->backend = backend;
  req->peer = peer;

  rdma_addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_qp_type = IBV_QPT_RC;  // as librpma asks
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* rai = nullptr;
  int err = backend->RdmaGetaddrinfo(addr, port, &hints, &rai);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_getaddrinfo");
    softrpma::Delete(req);
    return call.Return(RpmaErrorFromBackend(err));
  }
  err = backend->RdmaCreateId(nullptr, &req->id, nullptr, RDMA_PS_TCP);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_create_id");
    backend->RdmaFreeaddrinfo(rai);
    softrpma::Delete(req);
    return call.Return(RpmaErrorFromBackend(err));
  }
  int ret = 0;
  err = backend->RdmaResolveAddr(req->id, rai->ai_src_addr, rai->ai_dst_addr, values.timeout_ms);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_resolve_addr");
    ret = RpmaErrorFromBackend(err);
  } else {
    err = backend->RdmaResolveRoute(req->id, values.timeout_ms);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "rdma_resolve_route");
      ret = RpmaErrorFromBackend(err);
    }
  }
  backend->RdmaFreeaddrinfo(rai);
  if (ret == 0) ret = softrpma::api::SetUpQueues(req, values);
  if (ret != 0) {
    (void)softrpma::api::DestroyId(req);
    softrpma::Delete(req);
    return call.Return(ret);
  }
  *req_ptr = req;
  softrpma::api::LogGids(req->id);
  RPMA_LOG_NOTICE("requesting a connection to %s:%s", addr, port);
  return call.Return(0);
}

int rpma_conn_req_connect(struct rpma_conn_req** req_ptr,
                          const struct rpma_conn_private_data* pdata,
                          struct rpma_conn** conn_ptr) {
  softrpma::api::TracedCall call("rpma_conn_req_connect");
  if (req_ptr == nullptr || *req_ptr == nullptr) return call.Return(RPMA_E_INVAL);
  rpma_conn_req* req = *req_ptr;
  if (conn_ptr == nullptr || (pdata != nullptr && (pdata->ptr == nullptr || pdata->len == 0))) {
    // The request is consumed on every failure but a missing request (rpma_conn_req_connect(3)).
    (void)softrpma::api::ReleaseRequest(req);
    *req_ptr = nullptr;
    return call.Return(RPMA_E_INVAL);
  }
  *req_ptr = nullptr;
  return call.Return(softrpma::api::IsIncoming(req)
                         ? softrpma::api::ConnectPassive(req, pdata, conn_ptr)
                         : softrpma::api::ConnectActive(req, pdata, conn_ptr));
}

int rpma_conn_req_delete(struct rpma_conn_req** req_ptr) {
  softrpma::api::TracedCall call("rpma_conn_req_delete");
  if (req_ptr == nullptr) return call.Return(RPMA_E_INVAL);
  rpma_conn_req* req = *req_ptr;
  if (req == nullptr) return call.Return(0);
  *req_ptr = nullptr;
  return call.Return(softrpma::api::ReleaseRequest(req));
}

int rpma_conn_req_get_private_data(const struct rpma_conn_req* req,
                                   struct rpma_conn_private_data* pdata) {
  if (req == nullptr || pdata == nullptr) return RPMA_E_INVAL;
  *pdata = softrpma::api::PrivateDataView(req->private_data);
  return 0;
}

int rpma_conn_req_recv(struct rpma_conn_req* req, struct rpma_mr_local* dst, size_t offset,
                       size_t len, const void* op_context) {
  softrpma::api::TracedCall call("rpma_conn_req_recv", "offset=%zu len=%zu op_context=%p", offset,
                                 len, op_context);
  // rpma_conn_req_recv(3) also names a NULL op_context as RPMA_E_INVAL, but librpma accepts it
  // (its wr_id is then 0) and servers rely on that: so do we (docs/STATUS.md).
  if (req == nullptr || dst == nullptr) return call.Return(RPMA_E_INVAL);
  ibv_sge sge = {};
  ibv_recv_wr wr;
  int ret = softrpma::api::MrRecvWr(dst, offset, len, op_context, &sge, &wr);
  if (ret != 0) return call.Return(ret);
  ibv_recv_wr* bad_wr = nullptr;
  int err = req->backend->IbvPostRecv(req->id->qp, &wr, &bad_wr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_post_recv");
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  return call.Return(0);
}

}  // extern "C"
