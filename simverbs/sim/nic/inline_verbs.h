// inline_verbs.h: the ops tables behind the inline verbs of the simulated NIC.
//
// libibverbs' inline verbs call a provider's function pointers without entering libibverbs:
// ibv_poll_cq, ibv_req_notify_cq, ibv_post_send, ibv_post_recv and ibv_post_srq_recv through
// the context's ibv_context_ops, and the ibv_wr_* builders of the extended post API
// (ibv_wr_post(3)) through each extended QP's ibv_qp_ex. This file fills both tables, as a
// provider does, with entries that keep the inline verbs' conventions on top of the Backend's
// (ibv_poll_cq's count or negative errno, ...).
//
// What it is not: it does not implement the calls. An entry that a provider would check or
// fault (a poll, a notify, a post, wr_start / wr_complete, the 8-byte atomic write) goes through
// the started Backend (SetInlineVerbsBackend), so a fault point is hit the same way whether the
// program called the Backend or an inline verb; the builders and setters, which a provider runs
// without a syscall or a check, go to the QP directly (qp.h, "The extended post API").
//
// Thread-safety: every function is thread-safe; an entry is as thread-safe as the verb it
// stands for.

#ifndef SOFTRPMA_SIMVERBS_SIM_NIC_INLINE_VERBS_H_
#define SOFTRPMA_SIMVERBS_SIM_NIC_INLINE_VERBS_H_

#include <infiniband/verbs.h>

#include "simverbs/backend.h"

namespace softrpma::sim {

// The backend the entries call (the process's started simulated NIC), or nullptr in the child
// of a fork() until the child starts its own. REQUIRES: set before an object whose ops reach it
// is handed out.
void SetInlineVerbsBackend(Backend* backend);

// Fills the context's inline-verb entries (poll_cq, req_notify_cq, post_send, post_recv,
// post_srq_recv); the others are left as they are.
void InstallContextOps(ibv_context_ops* ops);

// Fills every ibv_wr_* entry of an extended QP. One the simulator does not model (64-bit
// atomics, memory windows, invalidation, TSO, UD, XRC) fails the batch (EINVAL at
// ibv_wr_complete) where a provider's NULL would crash.
void InstallQpExOps(ibv_qp_ex* qpx);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_NIC_INLINE_VERBS_H_
