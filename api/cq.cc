// cq.cc: completion queues (rpma_cq_wait(3), rpma_cq_get_wc(3), rpma_cq_get_fd(3)) and their
// life cycle for the objects that own them (internal/cq.h).
//
// Each CQ is made with its rpma_cq as the verbs cq_context and is kept armed: every event taken
// from its channel is acknowledged at once and followed by a new ibv_req_notify_cq(), as librpma
// does, so one event means "there may be completions to poll".

#include <cerrno>
#include <climits>

#include "api/internal/cq.h"
#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/traced_call.h"
#include "librpma.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"

struct rpma_cq {
  softrpma::Backend* backend = nullptr;
  ibv_cq* cq = nullptr;
  ibv_comp_channel* channel = nullptr;
  bool shared_channel = false;  // true: the channel belongs to the connection, not to this CQ
};

namespace softrpma::api {

int CqNew(Backend* backend, ibv_context* ctx, uint32_t cq_size,
          ibv_comp_channel* shared_channel, rpma_cq** cq_ptr) {
  rpma_cq* cq = New<rpma_cq>();
  if (cq == nullptr) return RPMA_E_NOMEM;
  cq->backend = backend;
  cq->shared_channel = shared_channel != nullptr;
  cq->channel = shared_channel;

  int err = 0;
  if (!cq->shared_channel) {
    err = backend->IbvCreateCompChannel(ctx, &cq->channel);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "ibv_create_comp_channel");
      Delete(cq);
      return RpmaErrorFromBackend(err);
    }
  }
  const int cqe = cq_size > static_cast<uint32_t>(INT_MAX) ? INT_MAX : static_cast<int>(cq_size);
  err = backend->IbvCreateCq(ctx, cqe, cq, cq->channel, 0, &cq->cq);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_create_cq");
  } else {
    err = backend->IbvReqNotifyCq(cq->cq, 0);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "ibv_req_notify_cq");
      int destroy_err = backend->IbvDestroyCq(cq->cq);
      if (destroy_err != 0) RPMA_LOG_PROVIDER_ERROR(destroy_err, "ibv_destroy_cq");
    }
  }
  if (err != 0) {
    if (!cq->shared_channel) {
      int destroy_err = backend->IbvDestroyCompChannel(cq->channel);
      if (destroy_err != 0) RPMA_LOG_PROVIDER_ERROR(destroy_err, "ibv_destroy_comp_channel");
    }
    Delete(cq);
    return RpmaErrorFromBackend(err);
  }
  *cq_ptr = cq;
  return 0;
}

int CqDelete(rpma_cq** cq_ptr) {
  rpma_cq* cq = *cq_ptr;
  if (cq == nullptr) return 0;
  int ret = 0;
  int err = cq->backend->IbvDestroyCq(cq->cq);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_destroy_cq");
    KeepFirstError(&ret, RpmaErrorFromBackend(err));
  }
  if (!cq->shared_channel) {
    err = cq->backend->IbvDestroyCompChannel(cq->channel);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "ibv_destroy_comp_channel");
      KeepFirstError(&ret, RpmaErrorFromBackend(err));
    }
  }
  Delete(cq);
  *cq_ptr = nullptr;
  return ret;
}

ibv_cq* CqIbvCq(const rpma_cq* cq) { return cq->cq; }
uint32_t CqHandle(const rpma_cq* cq) { return cq != nullptr ? cq->cq->handle : 0; }

int CqAckAndRearm(rpma_cq* cq) {
  cq->backend->IbvAckCqEvents(cq->cq, 1);
  int err = cq->backend->IbvReqNotifyCq(cq->cq, 0);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_req_notify_cq");
    return RpmaErrorFromBackend(err);
  }
  return 0;
}

int CqGetEvent(Backend* backend, ibv_comp_channel* channel, ibv_cq** ev_cq) {
  void* ev_ctx = nullptr;
  int err = backend->IbvGetCqEvent(channel, ev_cq, &ev_ctx);
  if (err == 0) return 0;
  // Not an error line, as in librpma (which does not log it at all): RPMA_E_NO_COMPLETION is an
  // outcome the caller handles (a non-blocking channel with no event, an interrupted wait).
  // The errno, which librpma loses, is kept at DEBUG.
  if (err == EAGAIN) {
    RPMA_LOG_DEBUG("ibv_get_cq_event() found no event (non-blocking channel)");
  } else {
    RPMA_LOG_DEBUG("ibv_get_cq_event() failed: %s", DescribeBackendError(err).text);
  }
  return RPMA_E_NO_COMPLETION;
}

}  // namespace softrpma::api

extern "C" {

int rpma_cq_get_fd(const struct rpma_cq* cq, int* fd) {
  if (cq == nullptr || fd == nullptr) return RPMA_E_INVAL;
  *fd = cq->channel->fd;
  return 0;
}

int rpma_cq_wait(struct rpma_cq* cq) {
  softrpma::api::TracedCall call("rpma_cq_wait", "cq=%u", softrpma::api::CqHandle(cq));
  if (cq == nullptr) return call.Return(RPMA_E_INVAL);
  if (cq->shared_channel) return call.Return(RPMA_E_SHARED_CHANNEL);
  ibv_cq* ev_cq = nullptr;
  int ret = softrpma::api::CqGetEvent(cq->backend, cq->channel, &ev_cq);
  if (ret != 0) return call.Return(ret);
  if (ev_cq != cq->cq) {
    RPMA_LOG_ERROR("ibv_get_cq_event() returned an event of another CQ");
    cq->backend->IbvAckCqEvents(ev_cq, 1);
    return call.Return(RPMA_E_UNKNOWN);
  }
  return call.Return(softrpma::api::CqAckAndRearm(cq));
}

int rpma_cq_get_wc(struct rpma_cq* cq, int num_entries, struct ibv_wc* wc,
                   int* num_entries_got) {
  softrpma::api::TracedCall call("rpma_cq_get_wc", "cq=%u num_entries=%d",
                                 softrpma::api::CqHandle(cq), num_entries);
  if (cq == nullptr || wc == nullptr || num_entries < 1) return call.Return(RPMA_E_INVAL);
  if (num_entries > 1 && num_entries_got == nullptr) return call.Return(RPMA_E_INVAL);
  int polled = 0;
  int err = cq->backend->IbvPollCq(cq->cq, num_entries, wc, &polled);
  if (err != 0) {
    // Every failed poll is RPMA_E_PROVIDER, with or without an errno, as in librpma (cq.c):
    // ibv_poll_cq(3) reports no errno, so "no provider error available" is its normal failure
    // on a real NIC, and both backends must answer the same.
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_poll_cq");
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  if (polled == 0) {
    // There may be an event with no completion behind it (as librpma notes, at DEBUG).
    RPMA_LOG_DEBUG("no completion in the CQ");
    return call.Return(RPMA_E_NO_COMPLETION);
  }
  if (polled > num_entries) {
    RPMA_LOG_ERROR("ibv_poll_cq() returned %d completions, more than the %d asked for", polled,
                   num_entries);
    return call.Return(RPMA_E_UNKNOWN);
  }
  if (num_entries_got != nullptr) *num_entries_got = polled;
  return call.Return(0);
}

}  // extern "C"
