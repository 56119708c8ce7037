// internal/peer.h: what other api/ objects need from an rpma_peer (its backend, device and
// protection domain). The struct itself is private to peer.cc.
//
// Each accessor REQUIRES: peer != nullptr. Thread-safe (a peer does not change after
// rpma_peer_new).

#ifndef SOFTRPMA_API_INTERNAL_PEER_H_
#define SOFTRPMA_API_INTERNAL_PEER_H_

#include <infiniband/verbs.h>

#include <cstddef>

#include "librpma.h"
#include "simverbs/backend.h"

namespace softrpma::api {

// The backend that made the peer's device context (found once, at rpma_peer_new).
Backend* PeerBackend(const rpma_peer* peer);
// The device context the peer was created on.
ibv_context* PeerContext(const rpma_peer* peer);
// The peer's protection domain.
ibv_pd* PeerPd(const rpma_peer* peer);
// Whether the peer's device has native atomic write (ibv_wr_atomic_write(3)), found at
// rpma_peer_new: its connections' QPs are then extended QPs (IBV_QP_EX_WITH_ATOMIC_WRITE).
bool PeerNativeAtomicWrite(const rpma_peer* peer);

// Whether a device with `attr` (ibv_query_device_ex) supports on-demand paging as librpma uses
// it: in general, and on RC QPs for both RDMA writes and reads.
bool DeviceIsOdpCapable(const ibv_device_attr_ex& attr);

// Registers [addr, addr + length) on the peer's PD for `usage` (RPMA_MR_USAGE_* bits), as
// librpma does: the access flags of MrUsageToAccess for the device's transport; when the
// provider answers EOPNOTSUPP and the device is ODP-capable (found at rpma_peer_new), once more
// with IBV_ACCESS_ON_DEMAND. *mr is written only on success.
// Returns 0 or RPMA_E_PROVIDER (logged).
int PeerRegMr(const rpma_peer* peer, void* addr, size_t length, int usage, ibv_mr** mr);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_PEER_H_
