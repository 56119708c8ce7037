// sim_backend.h: the simulated NIC as a Backend.
#ifndef SOFTRPMA_SIMVERBS_SIM_SIM_BACKEND_H_
#define SOFTRPMA_SIMVERBS_SIM_SIM_BACKEND_H_

#include "absl/status/statusor.h"
#include "simverbs/backend.h"

namespace softrpma::sim {

// The process's simulated NIC, started on first use (PLACEHOLDER: being written).
absl::StatusOr<Backend*> GetSimBackend();

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_SIM_BACKEND_H_
