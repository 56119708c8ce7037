// sim_backend.h: the simulated NIC as a Backend (RPMA_BACKEND=sim, the default).
//
// One simulated device per process ("softrpma_sim0"), reachable at every IPv4/IPv6 address.
// What it models is written at the top of each part: device.h (device, PD, MR), cq.h (CQs and
// completion channels), qp.h (the RC data path), cm.h (the connection manager), fault.h (fault
// points and RPMA_SIM_FAULTS). Sim-only controls (faults, ODP) are in sim_control.h.
//
// Objects the backend hands out are Sim* structs whose first member is the verbs struct, so the
// usual fields can be read directly (ibv_mr.lkey, ibv_cq.cq_context, ibv_comp_channel.fd,
// rdma_cm_id.verbs / .qp / .context, rdma_cm_event.param.conn.private_data, ...). Its context
// also fills the ibv_context_ops an application may call through inline verbs on objects it
// got from softrpma (ibv_poll_cq, ibv_req_notify_cq, ibv_post_send, ibv_post_recv,
// ibv_post_srq_recv): they reach this backend, fault points included.

#ifndef SOFTRPMA_SIMVERBS_SIM_SIM_BACKEND_H_
#define SOFTRPMA_SIMVERBS_SIM_SIM_BACKEND_H_

#include "absl/status/statusor.h"
#include "simverbs/backend.h"

namespace softrpma::sim {

// The process's simulated NIC, started on first use and kept until exit. The first successful
// call reads RPMA_SIM_FAULTS (fault.h) once and installs it.
// Errors: InvalidArgument when RPMA_SIM_FAULTS is malformed (the message names the rule, the
// column and the bad part, and starts with "RPMA_SIM_FAULTS: "); nothing is cached then, so a
// later call reads the environment again.
// Thread-safe.
absl::StatusOr<Backend*> GetSimBackend();

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_SIM_BACKEND_H_
