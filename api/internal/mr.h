// internal/mr.h: what the data path needs from the memory region objects (rpma_mr_local,
// rpma_mr_remote): a scatter/gather entry for a local range, the address, key, size and usage
// of a remote one; and the flush scratch, the small local region into which the flush emulation
// of rpma_flush(3) reads (one per connection). The structs themselves are private to mr.cc.
//
// Thread-safe: memory regions (and flush scratches) do not change after they are made.

#ifndef SOFTRPMA_API_INTERNAL_MR_H_
#define SOFTRPMA_API_INTERNAL_MR_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "librpma.h"
#include "simverbs/backend.h"

namespace softrpma::api {

// The largest length one ibv_sge can describe (its length is 32 bits).
inline constexpr size_t kMaxSgeLength = UINT32_MAX;

// Writes into *sge the SGE for `len` bytes at `offset` of local region `mr`. Bounds are the
// provider's to check, as in librpma; a `len` that does not fit an SGE (above kMaxSgeLength),
// which librpma silently truncates to 32 bits, is RPMA_E_INVAL (logged), *sge untouched.
// Returns 0 or RPMA_E_INVAL. REQUIRES: mr != nullptr.
int MrLocalSge(const rpma_mr_local* mr, size_t offset, size_t len, ibv_sge* sge);

// Writes into *wr a receive work request into dst[offset, offset + len) identified by
// op_context, for rpma_recv, rpma_srq_recv and rpma_conn_req_recv; with dst NULL, one with no
// SGE (a 0-byte receive). The request points at *sge, which must outlive it.
// Returns 0 or RPMA_E_INVAL (len does not fit an SGE, see MrLocalSge).
int MrRecvWr(const rpma_mr_local* dst, size_t offset, size_t len, const void* op_context,
             ibv_sge* sge, ibv_recv_wr* wr);

// The remote address of `offset` within remote region `mr`, and the region's rkey.
// REQUIRES: mr != nullptr.
uint64_t MrRemoteAddress(const rpma_mr_remote* mr, size_t offset);
uint32_t MrRemoteRkey(const rpma_mr_remote* mr);
// The size in bytes and the RPMA_MR_USAGE_* bits the remote region's descriptor declared.
// REQUIRES: mr != nullptr.
uint64_t MrRemoteSize(const rpma_mr_remote* mr);
int MrRemoteUsage(const rpma_mr_remote* mr);

// The ibv_access_flags librpma registers a region of `usage` (RPMA_MR_USAGE_* bits) with, on a
// device whose transport is iWARP (`iwarp`) or not: iWARP carries an RDMA READ's response as a
// write into the reader's memory, so READ_DST needs IBV_ACCESS_REMOTE_WRITE there.
int MrUsageToAccess(int usage, bool iwarp);

// The flush scratch: kFlushScratchSize bytes registered (IBV_ACCESS_LOCAL_WRITE) on a PD, the
// target of the RDMA READ that rpma_flush(3) posts. Its contents are never looked at.
inline constexpr size_t kFlushScratchSize = 8;
struct FlushScratch;

// Makes a flush scratch on the PD of `peer`, registered as a region of usage
// RPMA_MR_USAGE_READ_DST (as librpma registers its read-after-write buffer). Returns 0,
// RPMA_E_NOMEM (allocation) or RPMA_E_PROVIDER (ibv_reg_mr failed; logged). *scratch_ptr is
// written only on success.
int FlushScratchNew(const rpma_peer* peer, FlushScratch** scratch_ptr);
// Deregisters and frees *scratch_ptr (nothing for nullptr) and sets it to nullptr. The memory is
// freed even when ibv_dereg_mr fails (the failure is logged and RPMA_E_PROVIDER returned).
// REQUIRES: no work request that reads into the scratch is outstanding (its QP is destroyed).
int FlushScratchDelete(FlushScratch** scratch_ptr);
// The SGE for the first `len` bytes of the scratch. REQUIRES: len <= kFlushScratchSize.
ibv_sge FlushScratchSge(const FlushScratch* scratch, uint32_t len);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_MR_H_
