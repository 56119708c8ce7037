// sim_backend.h: the simulated NIC as a Backend (RPMA_BACKEND=sim, the default).
//
// One simulated device per process ("softrpma_sim0"), reachable at every IPv4/IPv6 address.
// What it models is written at the top of each part: device.h (device, PD, MR), cq.h (CQs and
// completion channels), qp.h (the RC data path), cm.h (the connection manager), fault.h (fault
// points, RPMA_SIM_FAULTS and scenario files), sched.h (the seed, the simulated clock and the
// seeded completion order), trace.h (RPMA_SIM_TRACE). Sim-only controls (faults, seed, trace,
// ODP) are in sim_control.h; docs/FAULTS.md and docs/TRACE.md describe them for users.
//
// Objects the backend hands out are Sim* structs whose first member is the verbs struct, so the
// usual fields can be read directly (ibv_mr.lkey, ibv_cq.cq_context, ibv_comp_channel.fd,
// rdma_cm_id.verbs / .qp / .context, rdma_cm_event.param.conn.private_data, ...). Its context
// also fills the ibv_context_ops an application may call through inline verbs on objects it
// got from softrpma (ibv_poll_cq, ibv_req_notify_cq, ibv_post_send, ibv_post_recv,
// ibv_post_srq_recv), and an extended QP its ibv_wr_* ops: they reach this backend, fault
// points included (nic/inline_verbs.h).

#ifndef SOFTRPMA_SIMVERBS_SIM_SIM_BACKEND_H_
#define SOFTRPMA_SIMVERBS_SIM_SIM_BACKEND_H_

#include "absl/status/statusor.h"
#include "simverbs/backend.h"

namespace softrpma::sim {

// The process's simulated NIC, started on first use and kept until exit. The first successful
// call reads the environment once (settings.h, docs/TRACE.md): RPMA_SIM_SEED, RPMA_SIM_FAULTS and
// RPMA_SIM_SCENARIO (the plan: the RPMA_SIM_FAULTS rules, then the scenario's), RPMA_SIM_STATS
// (hit counts written at exit) and RPMA_SIM_TRACE (the trace, started with the seed and plan).
// Errors: InvalidArgument when one of them is malformed or its file cannot be opened; the
// message starts with the variable's name ("RPMA_SIM_FAULTS: fault spec rule 1, column 15:
// ...", "RPMA_SIM_SCENARIO: f.txt:3:1: ...", "RPMA_SIM_SEED: bad seed ..."). The backend is not
// created then, so a later call reads the environment again.
// Thread-safe.
absl::StatusOr<Backend*> GetSimBackend();

// The simulated device's context (the one ibv_context of the process), started as
// GetSimBackend() starts it, with the same errors. For the verbs shim (simverbs/shim/), whose
// ibv_open_device hands it out. Thread-safe.
absl::StatusOr<ibv_context*> GetSimContext();

// This process's GID, ::ffff:127.a.b.c with a.b.c from the pid (device.h), for the shim's
// ibv_query_gid.
void ProcessGid(uint8_t raw[16]);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_SIM_BACKEND_H_
