// peer.cc: the peer object (rpma_peer_new(3), rpma_peer_delete(3)): a protection domain on one
// device, and the backend that device came from.

#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/peer.h"
#include "librpma.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"
#include "simverbs/backend_registry.h"

struct rpma_peer {
  softrpma::Backend* backend;
  ibv_context* ctx;
  ibv_pd* pd;
};

namespace softrpma::api {

Backend* PeerBackend(const rpma_peer* peer) { return peer->backend; }
ibv_context* PeerContext(const rpma_peer* peer) { return peer->ctx; }
ibv_pd* PeerPd(const rpma_peer* peer) { return peer->pd; }

}  // namespace softrpma::api

extern "C" {

int rpma_peer_new(struct ibv_context* ibv_ctx, struct rpma_peer** peer_ptr) {
  if (ibv_ctx == nullptr || peer_ptr == nullptr) return RPMA_E_INVAL;
  softrpma::Backend* backend = softrpma::BackendForContext(ibv_ctx);
  if (backend == nullptr) {
    RPMA_LOG_ERROR("no backend serves this device context (was it opened by "
                   "rpma_utils_get_ibv_context()?)");
    return RPMA_E_PROVIDER;
  }
  ibv_pd* pd = nullptr;
  int err = backend->IbvAllocPd(ibv_ctx, &pd);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_alloc_pd");
    return softrpma::api::RpmaErrorFromBackend(
        err, softrpma::api::ErrorMapping{/*enomem_is_nomem=*/true, /*no_errno_is_unknown=*/true});
  }
  rpma_peer* peer = softrpma::New<rpma_peer>(rpma_peer{backend, ibv_ctx, pd});
  if (peer == nullptr) {
    err = backend->IbvDeallocPd(pd);
    if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "ibv_dealloc_pd");
    return RPMA_E_NOMEM;
  }
  *peer_ptr = peer;
  return 0;
}

int rpma_peer_delete(struct rpma_peer** peer_ptr) {
  // The man page is silent on a NULL peer_ptr; librpma rejects it, as every other delete does.
  if (peer_ptr == nullptr) return RPMA_E_INVAL;
  rpma_peer* peer = *peer_ptr;
  if (peer == nullptr) return 0;
  // As librpma: the peer is freed and *peer_ptr cleared even when the provider fails.
  int ret = 0;
  int err = peer->backend->IbvDeallocPd(peer->pd);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_dealloc_pd");
    ret = softrpma::api::RpmaErrorFromBackend(err);
  }
  softrpma::Delete(peer);
  *peer_ptr = nullptr;
  return ret;
}

}  // extern "C"
