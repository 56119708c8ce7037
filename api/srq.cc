// srq.cc: shared receive queues (rpma_srq_new(3), rpma_srq_delete(3), rpma_srq_recv(3),
// rpma_srq_get_rcq(3)): one verbs SRQ on a peer's protection domain that several connections
// receive through (rpma_conn_cfg_set_srq(3)), with an optional receive CQ they share.
//
// Thread-safe as ibv_post_srq_recv(3) is; rpma_srq_delete(3) must be the last call.

#include <cstring>

#include "api/internal/cq.h"
#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/mr.h"
#include "api/internal/peer.h"
#include "api/internal/srq.h"
#include "api/internal/srq_cfg.h"
#include "api/internal/traced_call.h"
#include "librpma.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"

struct rpma_srq {
  softrpma::Backend* backend = nullptr;
  ibv_srq* srq = nullptr;
  rpma_cq* rcq = nullptr;
};

namespace softrpma::api {

ibv_srq* SrqIbvSrq(const rpma_srq* srq) { return srq->srq; }
rpma_cq* SrqRcq(const rpma_srq* srq) { return srq->rcq; }

}  // namespace softrpma::api

extern "C" {

int rpma_srq_new(struct rpma_peer* peer, struct rpma_srq_cfg* cfg, struct rpma_srq** srq_ptr) {
  softrpma::api::TracedCall call("rpma_srq_new");
  if (peer == nullptr || srq_ptr == nullptr) return call.Return(RPMA_E_INVAL);
  const softrpma::api::SrqCfgValues values = softrpma::api::GetSrqCfgValues(cfg);
  rpma_srq* srq = softrpma::New<rpma_srq>();
  if (srq == nullptr) return call.Return(RPMA_E_NOMEM);
  srq->backend = softrpma::api::PeerBackend(peer);

  ibv_srq_init_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.attr.max_wr = values.rq_size;
  attr.attr.max_sge = 1;
  int err = srq->backend->IbvCreateSrq(softrpma::api::PeerPd(peer), &attr, &srq->srq);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_create_srq");
    softrpma::Delete(srq);
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  if (values.rcq_size > 0) {
    int ret = softrpma::api::CqNew(srq->backend, softrpma::api::PeerContext(peer),
                                   values.rcq_size, nullptr, &srq->rcq);
    if (ret != 0) {
      err = srq->backend->IbvDestroySrq(srq->srq);
      if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "ibv_destroy_srq");
      softrpma::Delete(srq);
      return call.Return(ret);
    }
  }
  *srq_ptr = srq;
  return call.Return(0);
}

int rpma_srq_delete(struct rpma_srq** srq_ptr) {
  softrpma::api::TracedCall call("rpma_srq_delete");
  if (srq_ptr == nullptr) return call.Return(RPMA_E_INVAL);
  rpma_srq* srq = *srq_ptr;
  if (srq == nullptr) return call.Return(0);
  int ret = softrpma::api::CqDelete(&srq->rcq);
  int err = srq->backend->IbvDestroySrq(srq->srq);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_destroy_srq");
    softrpma::api::KeepFirstError(&ret, softrpma::api::RpmaErrorFromBackend(err));
  }
  softrpma::Delete(srq);
  *srq_ptr = nullptr;
  return call.Return(ret);
}

int rpma_srq_recv(struct rpma_srq* srq, struct rpma_mr_local* dst, size_t offset, size_t len,
                  const void* op_context) {
  softrpma::api::TracedCall call("rpma_srq_recv", "offset=%zu len=%zu op_context=%p", offset, len,
                                 op_context);
  if (srq == nullptr) return call.Return(RPMA_E_INVAL);
  if (dst == nullptr && (offset != 0 || len != 0)) return call.Return(RPMA_E_INVAL);
  ibv_sge sge = {};
  ibv_recv_wr wr;
  int ret = softrpma::api::MrRecvWr(dst, offset, len, op_context, &sge, &wr);
  if (ret != 0) return call.Return(ret);
  ibv_recv_wr* bad_wr = nullptr;
  int err = srq->backend->IbvPostSrqRecv(srq->srq, &wr, &bad_wr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_post_srq_recv");
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  return call.Return(0);
}

int rpma_srq_get_rcq(const struct rpma_srq* srq, struct rpma_cq** rcq_ptr) {
  if (srq == nullptr || rcq_ptr == nullptr) return RPMA_E_INVAL;
  *rcq_ptr = srq->rcq;
  return 0;
}

}  // extern "C"
