// internal/peer.h: what other api/ objects need from an rpma_peer (its backend, device and
// protection domain). The struct itself is private to peer.cc.
//
// Each accessor REQUIRES: peer != nullptr. Thread-safe (a peer does not change after
// rpma_peer_new).

#ifndef SOFTRPMA_API_INTERNAL_PEER_H_
#define SOFTRPMA_API_INTERNAL_PEER_H_

#include <infiniband/verbs.h>

#include "librpma.h"
#include "simverbs/backend.h"

namespace softrpma::api {

// The backend that made the peer's device context (found once, at rpma_peer_new).
Backend* PeerBackend(const rpma_peer* peer);
// The device context the peer was created on.
ibv_context* PeerContext(const rpma_peer* peer);
// The peer's protection domain.
ibv_pd* PeerPd(const rpma_peer* peer);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_PEER_H_
