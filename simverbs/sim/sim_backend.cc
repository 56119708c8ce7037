#include "simverbs/sim/sim_backend.h"

#include "absl/status/status.h"

namespace softrpma::sim {

absl::StatusOr<Backend*> GetSimBackend() {
  return absl::UnimplementedError("the simulated NIC is not built yet");
}

}  // namespace softrpma::sim
