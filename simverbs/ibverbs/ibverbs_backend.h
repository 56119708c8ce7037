// ibverbs_backend.h: the real libibverbs + librdmacm as a Backend ("ibverbs").
//
// Each Backend method makes exactly the libibverbs or librdmacm call it is named after, with the
// same arguments, and converts that call's error convention into the Backend's (see
// verbs_errors.h); it adds no other logic. Objects are the provider's own (struct ibv_pd, ...).
// Output pointers are written only on success, as backend.h requires; *bad_wr of the post calls
// is written by the provider, on failure.

#ifndef SOFTRPMA_SIMVERBS_IBVERBS_IBVERBS_BACKEND_H_
#define SOFTRPMA_SIMVERBS_IBVERBS_IBVERBS_BACKEND_H_

#include "absl/status/statusor.h"
#include "simverbs/backend.h"

namespace softrpma::ibverbs {

// The process-wide ibverbs backend, started on first use and kept (never destroyed) once started.
// Starting it checks that libibverbs lists at least one RDMA device (ibv_get_device_list).
// Errors: FailedPrecondition when no RDMA device is found (also when libibverbs has no provider
// or the kernel has no RDMA support); the message says how to set up Soft-RoCE and that
// RPMA_BACKEND=sim selects the simulated NIC. A failure is not cached: the next call looks again
// (a device may have appeared).
// Thread-safe.
absl::StatusOr<Backend*> GetIbverbsBackend();

}  // namespace softrpma::ibverbs

#endif  // SOFTRPMA_SIMVERBS_IBVERBS_IBVERBS_BACKEND_H_
