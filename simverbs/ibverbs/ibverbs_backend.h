// ibverbs_backend.h: the real libibverbs + librdmacm as a Backend.
#ifndef SOFTRPMA_SIMVERBS_IBVERBS_IBVERBS_BACKEND_H_
#define SOFTRPMA_SIMVERBS_IBVERBS_IBVERBS_BACKEND_H_

#include "absl/status/statusor.h"
#include "simverbs/backend.h"

namespace softrpma::ibverbs {

// The pass-through backend (PLACEHOLDER: being written).
absl::StatusOr<Backend*> GetIbverbsBackend();

}  // namespace softrpma::ibverbs

#endif  // SOFTRPMA_SIMVERBS_IBVERBS_IBVERBS_BACKEND_H_
