// internal/srq.h: what a connection request needs from an rpma_srq (its verbs SRQ and its
// receive CQ). The struct is private to srq.cc.
//
// REQUIRES: srq != nullptr. Thread-safe (an SRQ does not change after rpma_srq_new).

#ifndef SOFTRPMA_API_INTERNAL_SRQ_H_
#define SOFTRPMA_API_INTERNAL_SRQ_H_

#include <infiniband/verbs.h>

#include "librpma.h"

namespace softrpma::api {

ibv_srq* SrqIbvSrq(const rpma_srq* srq);
// The shared receive CQ, or nullptr when the SRQ was made without one.
rpma_cq* SrqRcq(const rpma_srq* srq);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_SRQ_H_
