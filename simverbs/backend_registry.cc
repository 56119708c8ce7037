#include "simverbs/backend_registry.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "simverbs/mutex.h"
#include "simverbs/ibverbs/ibverbs_backend.h"
#include "simverbs/sim/sim_backend.h"

namespace softrpma {
namespace {

struct Registry {
  softrpma::Mutex mu;
  absl::flat_hash_map<ibv_context*, Backend*> contexts ABSL_GUARDED_BY(mu);
  Backend* override_backend ABSL_GUARDED_BY(mu) = nullptr;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();  // Never destroyed: used until exit.
  return *registry;
}

}  // namespace

absl::StatusOr<Backend*> BackendByName(absl::string_view name) {
  if (name == "sim") return sim::GetSimBackend();
  if (name == "ibverbs") return ibverbs::GetIbverbsBackend();
  absl::Status status = absl::InvalidArgumentError(
      absl::StrCat(kBackendEnvVar, "=\"", name, "\" names no backend; use \"sim\" (the "
                   "simulated NIC, the default) or \"ibverbs\" (a real RDMA device)"));
  // A configuration error: said on stderr whatever librpma's log thresholds (by default its
  // errors reach only syslog, which containers and CI often lack), as the simulator does.
  std::fprintf(stderr, "softrpma: %s\n", std::string(status.message()).c_str());
  return status;
}

absl::StatusOr<Backend*> SelectedBackend() {
  Registry& registry = GetRegistry();
  {
    softrpma::MutexLock lock(&registry.mu);
    if (registry.override_backend != nullptr) return registry.override_backend;
  }
  const char* name = std::getenv(kBackendEnvVar);
  return BackendByName(name == nullptr || *name == '\0' ? kDefaultBackend : name);
}

void RegisterContext(ibv_context* ctx, Backend* backend) {
  Registry& registry = GetRegistry();
  softrpma::MutexLock lock(&registry.mu);
  registry.contexts[ctx] = backend;
}

Backend* BackendForContext(ibv_context* ctx) {
  if (ctx == nullptr) return nullptr;
  Registry& registry = GetRegistry();
  {
    softrpma::MutexLock lock(&registry.mu);
    auto it = registry.contexts.find(ctx);
    if (it != registry.contexts.end()) return it->second;
  }
  absl::StatusOr<Backend*> real = ibverbs::GetIbverbsBackend();
  return real.ok() ? *real : nullptr;
}

ScopedBackendOverride::ScopedBackendOverride(Backend* backend) {
  Registry& registry = GetRegistry();
  softrpma::MutexLock lock(&registry.mu);
  previous_ = registry.override_backend;
  registry.override_backend = backend;
}

ScopedBackendOverride::~ScopedBackendOverride() {
  Registry& registry = GetRegistry();
  softrpma::MutexLock lock(&registry.mu);
  registry.override_backend = previous_;
}

}  // namespace softrpma
