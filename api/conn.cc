// conn.cc: connections (rpma_conn_*(3)): the connection manager side of a connected QP (its CM
// event channel, events and private data) and its completion queues.
//
// Thread safety: as librpma's, a connection's functions may be called from several threads
// except rpma_conn_delete(3), which must be the last call on it; rpma_conn_next_event(3) and
// rpma_conn_wait(3) are each called by one thread at a time.

#include <atomic>
#include <cerrno>

#include "api/internal/conn.h"
#include "api/internal/cq.h"
#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/mr.h"
#include "api/internal/peer.h"
#include "api/internal/private_data.h"
#include "api/internal/traced_call.h"
#include "librpma.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"

struct rpma_conn {
  softrpma::Backend* backend = nullptr;
  rpma_peer* peer = nullptr;
  rdma_cm_id* id = nullptr;
  rdma_event_channel* event_channel = nullptr;
  rpma_cq* cq = nullptr;
  rpma_cq* rcq = nullptr;
  ibv_comp_channel* shared_channel = nullptr;
  // Written only by rpma_conn_next_event (ESTABLISHED), read by rpma_conn_get_private_data.
  std::atomic<softrpma::api::PrivateData*> private_data{nullptr};
  std::atomic<bool> direct_write_to_pmem{false};
  // Where rpma_flush's RDMA READ lands (see ops.cc); made with the connection.
  softrpma::api::FlushScratch* flush_scratch = nullptr;
};

namespace softrpma::api {

int ConnNew(const ConnParts& parts, rpma_conn** conn_ptr) {
  rpma_conn* conn = New<rpma_conn>();
  if (conn == nullptr) return RPMA_E_NOMEM;
  int ret = FlushScratchNew(parts.peer, &conn->flush_scratch);
  if (ret != 0) {
    Delete(conn);
    return ret;
  }
  int err = parts.backend->RdmaCreateEventChannel(&conn->event_channel);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_create_event_channel");
    (void)FlushScratchDelete(&conn->flush_scratch);
    Delete(conn);
    return RpmaErrorFromBackend(err);
  }
  err = parts.backend->RdmaMigrateId(parts.id, conn->event_channel);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_migrate_id");
    parts.backend->RdmaDestroyEventChannel(conn->event_channel);
    (void)FlushScratchDelete(&conn->flush_scratch);
    Delete(conn);
    return RpmaErrorFromBackend(err);
  }
  conn->backend = parts.backend;
  conn->peer = parts.peer;
  conn->id = parts.id;
  conn->cq = parts.cq;
  conn->rcq = parts.rcq;
  conn->shared_channel = parts.shared_channel;
  conn->private_data.store(parts.private_data, std::memory_order_release);
  *conn_ptr = conn;
  return 0;
}

Backend* ConnBackend(const rpma_conn* conn) { return conn->backend; }
rdma_cm_id* ConnCmId(const rpma_conn* conn) { return conn->id; }
ibv_qp* ConnQp(const rpma_conn* conn) { return conn->id->qp; }
uint32_t ConnQpNum(const rpma_conn* conn) {
  return conn != nullptr && conn->id->qp != nullptr ? conn->id->qp->qp_num : 0;
}
bool ConnNativeAtomicWrite(const rpma_conn* conn) { return PeerNativeAtomicWrite(conn->peer); }
bool ConnDirectWriteToPmem(const rpma_conn* conn) {
  return conn->direct_write_to_pmem.load(std::memory_order_relaxed);
}
const FlushScratch* ConnFlushScratch(const rpma_conn* conn) { return conn->flush_scratch; }

}  // namespace softrpma::api

namespace {

// The rpma_conn_event an rdma_cm event means for an established or connecting connection, or
// RPMA_CONN_UNDEFINED for an event a connection does not expect.
rpma_conn_event ConnEventOf(rdma_cm_event_type type) {
  switch (type) {
    case RDMA_CM_EVENT_ESTABLISHED:
      return RPMA_CONN_ESTABLISHED;
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return RPMA_CONN_CLOSED;
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return RPMA_CONN_LOST;
    case RDMA_CM_EVENT_REJECTED:
      return RPMA_CONN_REJECTED;
    case RDMA_CM_EVENT_UNREACHABLE:
      return RPMA_CONN_UNREACHABLE;
    default:
      return RPMA_CONN_UNDEFINED;
  }
}

}  // namespace

extern "C" {

int rpma_conn_get_event_fd(const struct rpma_conn* conn, int* fd) {
  if (conn == nullptr || fd == nullptr) return RPMA_E_INVAL;
  *fd = conn->event_channel->fd;
  return 0;
}

int rpma_conn_next_event(struct rpma_conn* conn, enum rpma_conn_event* event) {
  softrpma::api::TracedCall call("rpma_conn_next_event", "qp=%u", softrpma::api::ConnQpNum(conn));
  using softrpma::api::RpmaErrorFromBackend;
  if (conn == nullptr || event == nullptr) return call.Return(RPMA_E_INVAL);
  rdma_cm_event* cm_event = nullptr;
  int err = conn->backend->RdmaGetCmEvent(conn->event_channel, &cm_event);
  if (err != 0) {
    if (err == EAGAIN || err == ENODATA) {
      // A non-blocking event channel with nothing in it (see docs/STATUS.md).
      return call.Return(RPMA_E_NO_EVENT);
    }
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_get_cm_event");
    return call.Return(RpmaErrorFromBackend(err));
  }
  const rdma_cm_event_type type = cm_event->event;
  const rpma_conn_event conn_event = ConnEventOf(type);
  int ret = 0;
  if (conn_event == RPMA_CONN_UNDEFINED) {
    // A WARNING, as in librpma: the provider reported an event librpma has no meaning for.
    RPMA_LOG_WARNING("unexpected rdma_cm event %d on a connection", static_cast<int>(type));
    ret = RPMA_E_UNKNOWN;
  } else if (conn_event == RPMA_CONN_ESTABLISHED &&
             conn->private_data.load(std::memory_order_acquire) == nullptr) {
    // The active side learns the server's private data here; the passive side got the
    // client's with the connection request and keeps it.
    softrpma::api::PrivateData* copy = nullptr;
    ret = softrpma::api::PrivateDataCopy(cm_event->param.conn.private_data,
                                         cm_event->param.conn.private_data_len, &copy);
    if (ret == 0) conn->private_data.store(copy, std::memory_order_release);
  }
  err = conn->backend->RdmaAckCmEvent(cm_event);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_ack_cm_event");
    softrpma::api::KeepFirstError(&ret, RpmaErrorFromBackend(err));
  }
  if (ret != 0) return call.Return(ret);
  RPMA_LOG_NOTICE("%s", rpma_utils_conn_event_2str(conn_event));
  *event = conn_event;
  return call.Return(0);
}

int rpma_conn_get_private_data(const struct rpma_conn* conn,
                               struct rpma_conn_private_data* pdata) {
  if (conn == nullptr || pdata == nullptr) return RPMA_E_INVAL;
  *pdata = softrpma::api::PrivateDataView(conn->private_data.load(std::memory_order_acquire));
  return 0;
}

int rpma_conn_apply_remote_peer_cfg(struct rpma_conn* conn, const struct rpma_peer_cfg* pcfg) {
  if (conn == nullptr || pcfg == nullptr) return RPMA_E_INVAL;
  bool supported = false;
  int ret = rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &supported);
  if (ret != 0) return ret;
  conn->direct_write_to_pmem.store(supported, std::memory_order_relaxed);
  return 0;
}

int rpma_conn_get_qp_num(const struct rpma_conn* conn, uint32_t* qp_num) {
  if (conn == nullptr || qp_num == nullptr) return RPMA_E_INVAL;
  *qp_num = conn->id->qp->qp_num;
  return 0;
}

int rpma_conn_get_cq(const struct rpma_conn* conn, struct rpma_cq** cq_ptr) {
  if (conn == nullptr || cq_ptr == nullptr) return RPMA_E_INVAL;
  *cq_ptr = conn->cq;
  return 0;
}

int rpma_conn_get_rcq(const struct rpma_conn* conn, struct rpma_cq** rcq_ptr) {
  if (conn == nullptr || rcq_ptr == nullptr) return RPMA_E_INVAL;
  *rcq_ptr = conn->rcq;
  return 0;
}

int rpma_conn_get_compl_fd(const struct rpma_conn* conn, int* fd) {
  if (conn == nullptr || fd == nullptr) return RPMA_E_INVAL;
  if (conn->shared_channel == nullptr) return RPMA_E_NOT_SHARED_CHNL;
  *fd = conn->shared_channel->fd;
  return 0;
}

int rpma_conn_wait(struct rpma_conn* conn, int flags, struct rpma_cq** cq, bool* is_rcq) {
  softrpma::api::TracedCall call("rpma_conn_wait", "qp=%u flags=0x%x",
                                 softrpma::api::ConnQpNum(conn), flags);
  if (conn == nullptr || cq == nullptr) return call.Return(RPMA_E_INVAL);
  if (conn->shared_channel == nullptr) return call.Return(RPMA_E_NOT_SHARED_CHNL);
  // flags are reserved for later use: as upstream (conn.c), every value waits for a completion
  // event (the man page names no flags error).
  (void)flags;
  ibv_cq* ev_cq = nullptr;
  int ret = softrpma::api::CqGetEvent(conn->backend, conn->shared_channel, &ev_cq);
  if (ret != 0) return call.Return(ret);
  rpma_cq* event_cq = nullptr;
  if (ev_cq == softrpma::api::CqIbvCq(conn->cq)) {
    event_cq = conn->cq;
  } else if (conn->rcq != nullptr && ev_cq == softrpma::api::CqIbvCq(conn->rcq)) {
    event_cq = conn->rcq;
  } else {
    RPMA_LOG_ERROR("ibv_get_cq_event() returned an event of a CQ that is not this "
                   "connection's");
    conn->backend->IbvAckCqEvents(ev_cq, 1);
    *cq = nullptr;
    return call.Return(RPMA_E_UNKNOWN);
  }
  ret = softrpma::api::CqAckAndRearm(event_cq);
  if (ret != 0) {
    *cq = nullptr;
    return call.Return(ret);
  }
  *cq = event_cq;
  if (is_rcq != nullptr) *is_rcq = (event_cq == conn->rcq);
  return call.Return(0);
}

int rpma_conn_disconnect(struct rpma_conn* conn) {
  softrpma::api::TracedCall call("rpma_conn_disconnect", "qp=%u", softrpma::api::ConnQpNum(conn));
  if (conn == nullptr) return call.Return(RPMA_E_INVAL);
  int err = conn->backend->RdmaDisconnect(conn->id);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_disconnect");
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  RPMA_LOG_NOTICE("requesting disconnection");
  return call.Return(0);
}

int rpma_conn_delete(struct rpma_conn** conn_ptr) {
  softrpma::api::TracedCall call(
      "rpma_conn_delete", "qp=%u",
      softrpma::api::ConnQpNum(conn_ptr != nullptr ? *conn_ptr : nullptr));
  using softrpma::api::KeepFirstError;
  using softrpma::api::RpmaErrorFromBackend;
  if (conn_ptr == nullptr) return call.Return(RPMA_E_INVAL);
  rpma_conn* conn = *conn_ptr;
  if (conn == nullptr) return call.Return(0);
  softrpma::Backend* backend = conn->backend;
  int ret = 0;
  // The QP goes first (it uses the CQs and reads into the flush scratch), the CQs before their
  // channel, the id after its QP, the event channel after the id that reports to it.
  backend->RdmaDestroyQp(conn->id);
  KeepFirstError(&ret, softrpma::api::FlushScratchDelete(&conn->flush_scratch));
  KeepFirstError(&ret, softrpma::api::CqDelete(&conn->rcq));
  KeepFirstError(&ret, softrpma::api::CqDelete(&conn->cq));
  if (conn->shared_channel != nullptr) {
    int err = backend->IbvDestroyCompChannel(conn->shared_channel);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "ibv_destroy_comp_channel");
      KeepFirstError(&ret, RpmaErrorFromBackend(err));
    }
  }
  int err = backend->RdmaDestroyId(conn->id);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_destroy_id");
    KeepFirstError(&ret, RpmaErrorFromBackend(err));
  }
  backend->RdmaDestroyEventChannel(conn->event_channel);
  softrpma::api::PrivateDataDelete(conn->private_data.load(std::memory_order_acquire));
  softrpma::Delete(conn);
  *conn_ptr = nullptr;
  return call.Return(ret);
}

}  // extern "C"
