// utils.cc: rpma_utils_get_ibv_context(3), rpma_utils_ibv_context_is_odp_capable(3) and
// rpma_utils_conn_event_2str(3).
//
// rpma_utils_get_ibv_context() is where a process meets its backend: it asks the registry for the
// selected one (RPMA_BACKEND), finds the device the way librpma does on rdma_cm, and records which
// backend handed out the context so that every later object (rpma_peer_new) finds it again.

#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/peer.h"
#include "api/internal/traced_call.h"
#include "librpma.h"
#include "simverbs/backend.h"
#include "simverbs/backend_registry.h"

namespace softrpma::api {
namespace {

// Finds the device of `addr` through `backend`: an id bound to (LOCAL) or resolved towards
// (REMOTE) the address tells which device serves it. Returns 0 or an RPMA_E_* code.
int FindDevice(Backend* backend, const char* addr, rpma_util_ibv_context_type type,
               ibv_context** ctx) {
  rdma_addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  if (type == RPMA_UTIL_IBV_CONTEXT_LOCAL) hints.ai_flags = RAI_PASSIVE;
  hints.ai_qp_type = IBV_QPT_RC;  // as librpma asks
  hints.ai_port_space = RDMA_PS_TCP;

  // The man page's "out of memory" (RPMA_E_NOMEM): the allocations of this lookup are the
  // provider's, in rdma_getaddrinfo and rdma_create_id.
  ErrorMapping out_of_memory_is_nomem;
  out_of_memory_is_nomem.enomem_is_nomem = true;

  rdma_addrinfo* rai = nullptr;
  int err = backend->RdmaGetaddrinfo(addr, nullptr, &hints, &rai);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_getaddrinfo");
    return RpmaErrorFromBackend(err, out_of_memory_is_nomem);
  }

  rdma_cm_id* id = nullptr;
  err = backend->RdmaCreateId(nullptr, &id, nullptr, RDMA_PS_TCP);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_create_id");
    backend->RdmaFreeaddrinfo(rai);
    return RpmaErrorFromBackend(err, out_of_memory_is_nomem);
  }

  int ret = 0;
  if (type == RPMA_UTIL_IBV_CONTEXT_LOCAL) {
    err = backend->RdmaBindAddr(id, rai->ai_src_addr);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "rdma_bind_addr");
      ret = RpmaErrorFromBackend(err);
    }
  } else {
    err = backend->RdmaResolveAddr(id, rai->ai_src_addr, rai->ai_dst_addr,
                                   RPMA_DEFAULT_TIMEOUT_MS);
    if (err != 0) {
      RPMA_LOG_PROVIDER_ERROR(err, "rdma_resolve_addr");
      ret = RpmaErrorFromBackend(err);
    }
  }
  ibv_context* found = (ret == 0) ? id->verbs : nullptr;
  if (ret == 0 && found == nullptr) {
    RPMA_LOG_ERROR("no RDMA device serves address %s", addr);
    ret = RPMA_E_PROVIDER;
  }

  err = backend->RdmaDestroyId(id);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "rdma_destroy_id");
    KeepFirstError(&ret, RpmaErrorFromBackend(err));
  }
  backend->RdmaFreeaddrinfo(rai);
  if (ret == 0) *ctx = found;
  return ret;
}

}  // namespace
}  // namespace softrpma::api

extern "C" {

int rpma_utils_get_ibv_context(const char* addr, enum rpma_util_ibv_context_type type,
                               struct ibv_context** ibv_ctx_ptr) {
  softrpma::api::TracedCall call("rpma_utils_get_ibv_context", "addr=%s type=%d",
                                 softrpma::api::TraceWord(addr).c_str(), static_cast<int>(type));
  if (addr == nullptr || ibv_ctx_ptr == nullptr ||
      (type != RPMA_UTIL_IBV_CONTEXT_LOCAL && type != RPMA_UTIL_IBV_CONTEXT_REMOTE)) {
    return call.Return(RPMA_E_INVAL);
  }
  absl::StatusOr<softrpma::Backend*> backend = softrpma::SelectedBackend();
  if (!backend.ok()) {
    const std::string message(backend.status().message());
    RPMA_LOG_ERROR("cannot start the RDMA backend: %s", message.c_str());
    return call.Return(absl::IsInvalidArgument(backend.status()) ? RPMA_E_INVAL : RPMA_E_PROVIDER);
  }
  ibv_context* ctx = nullptr;
  int ret = softrpma::api::FindDevice(*backend, addr, type, &ctx);
  if (ret != 0) return call.Return(ret);
  softrpma::RegisterContext(ctx, *backend);
  *ibv_ctx_ptr = ctx;
  return call.Return(0);
}

int rpma_utils_ibv_context_is_odp_capable(struct ibv_context* ibv_ctx, int* is_odp_capable) {
  softrpma::api::TracedCall call("rpma_utils_ibv_context_is_odp_capable");
  if (ibv_ctx == nullptr || is_odp_capable == nullptr) return call.Return(RPMA_E_INVAL);
  softrpma::Backend* backend = softrpma::BackendForContext(ibv_ctx);
  if (backend == nullptr) {
    RPMA_LOG_ERROR("no backend serves this device context");
    return call.Return(RPMA_E_PROVIDER);
  }
  ibv_device_attr_ex attr;
  std::memset(&attr, 0, sizeof(attr));
  int err = backend->IbvQueryDeviceEx(ibv_ctx, &attr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_query_device_ex");
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  *is_odp_capable = softrpma::api::DeviceIsOdpCapable(attr);
  return call.Return(0);
}

const char* rpma_utils_conn_event_2str(enum rpma_conn_event conn_event) {
  switch (conn_event) {
    case RPMA_CONN_UNDEFINED:
      return "Undefined connection event";
    case RPMA_CONN_ESTABLISHED:
      return "Connection established";
    case RPMA_CONN_CLOSED:
      return "Connection closed";
    case RPMA_CONN_LOST:
      return "Connection lost";
    case RPMA_CONN_REJECTED:
      return "Connection rejected by the other side";
    case RPMA_CONN_UNREACHABLE:
      return "Other side of the connection unreachable";
  }
  return "Unknown connection event";
}

}  // extern "C"
