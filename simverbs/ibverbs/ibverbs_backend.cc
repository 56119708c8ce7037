#include "simverbs/ibverbs/ibverbs_backend.h"

#include "absl/status/status.h"

namespace softrpma::ibverbs {

absl::StatusOr<Backend*> GetIbverbsBackend() {
  return absl::UnimplementedError("the ibverbs backend is not built yet");
}

}  // namespace softrpma::ibverbs
