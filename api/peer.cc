// peer.cc: the peer object (rpma_peer_new(3), rpma_peer_delete(3)): a protection domain on one
// device, and the backend that device came from.

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/mr.h"
#include "api/internal/peer.h"
#include "api/internal/traced_call.h"
#include "librpma.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"
#include "simverbs/backend_registry.h"

struct rpma_peer {
  softrpma::Backend* backend;
  ibv_context* ctx;
  ibv_pd* pd;
  bool odp_capable;  // the device supports on-demand paging (ibv_query_device_ex)
  bool iwarp;        // the device's transport is iWARP
  bool native_atomic_write;  // the device has ibv_wr_atomic_write (ibv_query_device_ex)
};

namespace softrpma::api {

Backend* PeerBackend(const rpma_peer* peer) { return peer->backend; }
ibv_context* PeerContext(const rpma_peer* peer) { return peer->ctx; }
ibv_pd* PeerPd(const rpma_peer* peer) { return peer->pd; }
bool PeerNativeAtomicWrite(const rpma_peer* peer) { return peer->native_atomic_write; }

bool DeviceIsOdpCapable(const ibv_device_attr_ex& attr) {
  const uint32_t general = attr.odp_caps.general_caps;
  const uint32_t rc = attr.odp_caps.per_transport_caps.rc_odp_caps;
  return (general & IBV_ODP_SUPPORT) != 0 && (rc & IBV_ODP_SUPPORT_WRITE) != 0 &&
         (rc & IBV_ODP_SUPPORT_READ) != 0;
}

int PeerRegMr(const rpma_peer* peer, void* addr, size_t length, int usage, ibv_mr** mr) {
  const int access = MrUsageToAccess(usage, peer->iwarp);
  int err = peer->backend->IbvRegMr(peer->pd, addr, length, access, mr);
  if (err == 0) return 0;
  if (err != EOPNOTSUPP) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_reg_mr");
    return RpmaErrorFromBackend(err);
  }
  // As librpma: memory the device cannot pin (e.g. FSDAX) may still register with on-demand
  // paging when the device supports it.
  if (!peer->odp_capable) {
    RPMA_LOG_ERROR("ibv_reg_mr(addr=%p, length=%zu, access=0x%x) failed: %s; the device does not "
                   "support on-demand paging",
                   addr, length, access, DescribeBackendError(err).text);
    return RpmaErrorFromBackend(err);
  }
  err = peer->backend->IbvRegMr(peer->pd, addr, length, access | IBV_ACCESS_ON_DEMAND, mr);
  if (err != 0) {
    RPMA_LOG_ERROR("memory registration with on-demand paging failed: ibv_reg_mr(addr=%p, "
                   "length=%zu, access=0x%x|IBV_ACCESS_ON_DEMAND): %s",
                   addr, length, access, DescribeBackendError(err).text);
    return RpmaErrorFromBackend(err);
  }
  return 0;
}

}  // namespace softrpma::api

extern "C" {

int rpma_peer_new(struct ibv_context* ibv_ctx, struct rpma_peer** peer_ptr) {
  softrpma::api::TracedCall call("rpma_peer_new");
  if (ibv_ctx == nullptr || peer_ptr == nullptr) return call.Return(RPMA_E_INVAL);
  softrpma::Backend* backend = softrpma::BackendForContext(ibv_ctx);
  if (backend == nullptr) {
    RPMA_LOG_ERROR("no backend serves this device context (was it opened by "
                   "rpma_utils_get_ibv_context()?)");
    return call.Return(RPMA_E_PROVIDER);
  }
  // As librpma: the device's capabilities first, one query each: native atomic write (which
  // decides how rpma_atomic_write posts, and how the connections' QPs are made), then
  // on-demand paging (whether a failed registration is retried with IBV_ACCESS_ON_DEMAND, see
  // PeerRegMr).
  ibv_device_attr_ex attr;
  std::memset(&attr, 0, sizeof(attr));
  int err = backend->IbvQueryDeviceEx(ibv_ctx, &attr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_query_device_ex");
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  const bool native_atomic_write =
      (attr.device_cap_flags_ex & softrpma::kDeviceCapAtomicWrite) != 0;
  if (!native_atomic_write) {
    RPMA_LOG_INFO("the device has no native atomic write: rpma_atomic_write posts an 8-byte "
                  "inline, fenced RDMA write instead");
  }
  std::memset(&attr, 0, sizeof(attr));
  err = backend->IbvQueryDeviceEx(ibv_ctx, &attr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_query_device_ex");
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  const bool odp_capable = softrpma::api::DeviceIsOdpCapable(attr);
  const bool iwarp =
      ibv_ctx->device != nullptr && ibv_ctx->device->transport_type == IBV_TRANSPORT_IWARP;
  RPMA_LOG_INFO("device capabilities: on-demand paging %s, transport %s",
                odp_capable ? "supported" : "not supported", iwarp ? "iWARP" : "not iWARP");
  ibv_pd* pd = nullptr;
  err = backend->IbvAllocPd(ibv_ctx, &pd);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_alloc_pd");
    return call.Return(softrpma::api::RpmaErrorFromBackend(
        err, softrpma::api::ErrorMapping{/*enomem_is_nomem=*/true, /*no_errno_is_unknown=*/true}));
  }
  rpma_peer* peer = softrpma::New<rpma_peer>(
      rpma_peer{backend, ibv_ctx, pd, odp_capable, iwarp, native_atomic_write});
  if (peer == nullptr) {
    err = backend->IbvDeallocPd(pd);
    if (err != 0) RPMA_LOG_PROVIDER_ERROR(err, "ibv_dealloc_pd");
    return call.Return(RPMA_E_NOMEM);
  }
  *peer_ptr = peer;
  return call.Return(0);
}

int rpma_peer_delete(struct rpma_peer** peer_ptr) {
  softrpma::api::TracedCall call("rpma_peer_delete");
  // The man page is silent on a NULL peer_ptr; librpma rejects it, as every other delete does.
  if (peer_ptr == nullptr) return call.Return(RPMA_E_INVAL);
  rpma_peer* peer = *peer_ptr;
  if (peer == nullptr) return call.Return(0);
  // As librpma: the peer is freed and *peer_ptr cleared even when the provider fails.
  int ret = 0;
  int err = peer->backend->IbvDeallocPd(peer->pd);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_dealloc_pd");
    ret = softrpma::api::RpmaErrorFromBackend(err);
  }
  softrpma::Delete(peer);
  *peer_ptr = nullptr;
  return call.Return(ret);
}

}  // extern "C"
