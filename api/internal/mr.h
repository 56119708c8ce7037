// internal/mr.h: what the data path needs from the memory region objects (rpma_mr_local,
// rpma_mr_remote): a scatter/gather entry for a local range and the address and key of a remote
// one. The structs themselves are private to mr.cc.
//
// Thread-safe: memory regions do not change after they are made.

#ifndef SOFTRPMA_API_INTERNAL_MR_H_
#define SOFTRPMA_API_INTERNAL_MR_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "librpma.h"

namespace softrpma::api {

// The SGE for `len` bytes at `offset` of local region `mr`. Bounds are the provider's to check,
// as in librpma. REQUIRES: mr != nullptr.
ibv_sge MrLocalSge(const rpma_mr_local* mr, size_t offset, size_t len);

// The remote address of `offset` within remote region `mr`, and the region's rkey.
// REQUIRES: mr != nullptr.
uint64_t MrRemoteAddress(const rpma_mr_remote* mr, size_t offset);
uint32_t MrRemoteRkey(const rpma_mr_remote* mr);

// The ibv_access_flags librpma registers a region of `usage` (RPMA_MR_USAGE_* bits) with.
int MrUsageToAccess(int usage);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_MR_H_
