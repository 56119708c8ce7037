// internal/conn_req.h: how a listening endpoint (ep.cc) turns a CONNECT_REQUEST event into an
// incoming rpma_conn_req. The struct is private to conn_req.cc.

#ifndef SOFTRPMA_API_INTERNAL_CONN_REQ_H_
#define SOFTRPMA_API_INTERNAL_CONN_REQ_H_

#include <rdma/rdma_cma.h>

#include "librpma.h"

namespace softrpma::api {

// Makes an incoming connection request of `event` (an RDMA_CM_EVENT_CONNECT_REQUEST got from an
// endpoint of `peer`): CQs and a QP on event->id as `cfg` says (nullptr: defaults), and a copy of
// the event's private data. On success the request owns event->id (accepted by
// rpma_conn_req_connect, rejected by rpma_conn_req_delete); the event stays the caller's, to
// acknowledge before the request is handed out (as librpma does). On failure the event and its
// id are untouched and still the caller's. Returns 0, RPMA_E_NOMEM or RPMA_E_PROVIDER (logged).
int ConnReqFromCmEvent(rpma_peer* peer, rdma_cm_event* event, const rpma_conn_cfg* cfg,
                       rpma_conn_req** req_ptr);

// Deletes an incoming request as rpma_conn_req_delete does (queues, rdma_reject, private data;
// failures logged) but its id, which it returns: the caller destroys the id once the request's
// CONNECT_REQUEST event is acknowledged (rdma_destroy_id waits for its events).
rdma_cm_id* ConnReqDeleteKeepingId(rpma_conn_req* req);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_CONN_REQ_H_
