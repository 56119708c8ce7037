// backend_registry.h: which Backend serves a call.
//
// The process picks one backend by name the first time a device is looked up
// (rpma_utils_get_ibv_context): RPMA_BACKEND=sim (the default) or RPMA_BACKEND=ibverbs. Every
// later call finds its backend through the ibv_context its object was created on, so there is no
// global switch on the hot path and a context opened by the application itself (not through
// rpma_utils_get_ibv_context) still reaches the real provider.
//
// Thread-safe.

#ifndef SOFTRPMA_SIMVERBS_BACKEND_REGISTRY_H_
#define SOFTRPMA_SIMVERBS_BACKEND_REGISTRY_H_

#include <infiniband/verbs.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "simverbs/backend.h"

namespace softrpma {

// The environment variable that names the backend, and its default.
inline constexpr char kBackendEnvVar[] = "RPMA_BACKEND";
inline constexpr char kDefaultBackend[] = "sim";

// The backend RPMA_BACKEND names, started on first use and kept for the life of the process.
// Errors: InvalidArgument when RPMA_BACKEND names no backend (the message lists the valid
// names); the backend's own error when it cannot start (e.g. a malformed RPMA_SIM_FAULTS).
// A failure is not cached: the environment is read again on the next call.
absl::StatusOr<Backend*> SelectedBackend();

// The backend called `name` ("sim" or "ibverbs"), started on first use.
absl::StatusOr<Backend*> BackendByName(absl::string_view name);

// Records that `backend` handed out `ctx`.
void RegisterContext(ibv_context* ctx, Backend* backend);

// The backend that handed out `ctx`; for a context no backend registered (one the application
// opened itself) the ibverbs backend; nullptr when ctx is NULL or that backend cannot start.
Backend* BackendForContext(ibv_context* ctx);

// Test-only: while alive, SelectedBackend() returns `backend` (e.g. a GoogleMock backend).
class ScopedBackendOverride {
 public:
  explicit ScopedBackendOverride(Backend* backend);
  ScopedBackendOverride(const ScopedBackendOverride&) = delete;
  ScopedBackendOverride& operator=(const ScopedBackendOverride&) = delete;
  ~ScopedBackendOverride();

 private:
  Backend* previous_;
};

}  // namespace softrpma

#endif  // SOFTRPMA_SIMVERBS_BACKEND_REGISTRY_H_
