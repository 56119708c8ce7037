// internal/cq.h: making, tearing down and waking up an rpma_cq, for the objects that own CQs
// (rpma_conn_req, then rpma_conn; rpma_srq). The struct is private to cq.cc.
//
// A CQ is not thread-safe by itself: the rules of rpma_cq_wait(3) / rpma_cq_get_wc(3) apply.

#ifndef SOFTRPMA_API_INTERNAL_CQ_H_
#define SOFTRPMA_API_INTERNAL_CQ_H_

#include <infiniband/verbs.h>

#include <cstdint>

#include "librpma.h"
#include "simverbs/backend.h"

namespace softrpma::api {

// Makes a CQ of `cq_size` entries on `ctx`, armed (ibv_req_notify_cq) for its first event. With
// `shared_channel` nullptr the CQ gets a completion channel of its own; otherwise it reports to
// `shared_channel`, which the caller keeps owning. Each failure is logged.
// Returns 0, RPMA_E_NOMEM, or RPMA_E_PROVIDER (a channel, the CQ or the arming failed); on
// failure whatever was made is released and *cq_ptr is untouched.
int CqNew(Backend* backend, ibv_context* ctx, uint32_t cq_size,
          ibv_comp_channel* shared_channel, rpma_cq** cq_ptr);

// Destroys *cq_ptr's CQ, then its own channel (if it has one), frees it and sets *cq_ptr to
// nullptr, whatever fails. Nothing to do when *cq_ptr is nullptr.
// Returns 0 or RPMA_E_PROVIDER (the first failure; each is logged).
int CqDelete(rpma_cq** cq_ptr);

// The verbs CQ. REQUIRES: cq != nullptr.
ibv_cq* CqIbvCq(const rpma_cq* cq);
// The CQ's handle, as the trace names the CQ (internal/traced_call.h); 0 for a NULL cq.
uint32_t CqHandle(const rpma_cq* cq);

// After IbvGetCqEvent reported an event of `cq`: acknowledges it and arms the CQ again.
// Returns 0 or RPMA_E_PROVIDER (ibv_req_notify_cq failed; logged).
int CqAckAndRearm(rpma_cq* cq);

// ibv_get_cq_event on `channel`, for rpma_cq_wait and rpma_conn_wait: 0 with the event's CQ in
// *ev_cq, or RPMA_E_NO_COMPLETION (logged at ERROR, or at DEBUG when a non-blocking channel
// simply had no event).
int CqGetEvent(Backend* backend, ibv_comp_channel* channel, ibv_cq** ev_cq);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_CQ_H_
