// internal/conn.h: how a connection request becomes an rpma_conn, and what the data path
// (ops.cc) needs from a connection. The struct rpma_conn is private to conn.cc.

#ifndef SOFTRPMA_API_INTERNAL_CONN_H_
#define SOFTRPMA_API_INTERNAL_CONN_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "api/internal/mr.h"
#include "api/internal/private_data.h"
#include "librpma.h"
#include "simverbs/backend.h"

namespace softrpma::api {

// The inline data a connection's QP takes (max_inline_data): the 8 bytes of rpma_atomic_write's
// emulation, as librpma.
inline constexpr uint32_t kQpMaxInlineData = RPMA_ATOMIC_WRITE_ALIGNMENT;

// Everything a connection request made, handed over to the connection it becomes.
struct ConnParts {
  Backend* backend = nullptr;
  rpma_peer* peer = nullptr;
  rdma_cm_id* id = nullptr;                     // with its QP (id->qp)
  rpma_cq* cq = nullptr;                        // the main CQ
  rpma_cq* rcq = nullptr;                       // the receive CQ, or nullptr
  ibv_comp_channel* shared_channel = nullptr;   // the channel CQ and RCQ share, or nullptr
  PrivateData* private_data = nullptr;          // what the other side sent, or nullptr
};

// Makes a connection of `parts`: its flush scratch (an 8-byte region registered on the peer's
// PD, see internal/mr.h), a new CM event channel, to which `parts.id` migrates, so that the
// connection's events (ESTABLISHED, DISCONNECTED, ...) arrive on rpma_conn_get_event_fd(3).
// On success the connection owns every part; on failure the caller still owns them all and
// nothing was changed. Returns 0, RPMA_E_NOMEM or RPMA_E_PROVIDER (logged).
int ConnNew(const ConnParts& parts, rpma_conn** conn_ptr);

// The backend, the rdma_cm id and the QP of a connection. REQUIRES: conn != nullptr.
Backend* ConnBackend(const rpma_conn* conn);
rdma_cm_id* ConnCmId(const rpma_conn* conn);
ibv_qp* ConnQp(const rpma_conn* conn);
// The connection's QP number, as the trace names the connection (internal/traced_call.h); 0 for
// a NULL conn.
uint32_t ConnQpNum(const rpma_conn* conn);
// Whether the connection's QP was made for native atomic write (PeerNativeAtomicWrite).
bool ConnNativeAtomicWrite(const rpma_conn* conn);
// Whether the other side declared direct write to PMem (rpma_conn_apply_remote_peer_cfg(3)).
bool ConnDirectWriteToPmem(const rpma_conn* conn);
// The connection's flush scratch (internal/mr.h), the target of rpma_flush's RDMA READ.
const FlushScratch* ConnFlushScratch(const rpma_conn* conn);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_CONN_H_
