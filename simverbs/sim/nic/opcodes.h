// opcodes.h: THE OPCODE TABLE of the simulated NIC. One row per send opcode it models (an RC
// QP's: RDMA WRITE with and without immediate data, SEND with and without, RDMA READ, and the
// 8-byte ATOMIC WRITE of the extended post API), with every fact the requester, the responder
// and the completer ask of an opcode:
//   - the requester's completion opcode (ibv_poll_cq(3): a WRITE_WITH_IMM completes as
//     IBV_WC_RDMA_WRITE, a SEND_WITH_IMM as IBV_WC_SEND);
//   - the request type on the host fabric's wire (wire.h), and back (FromWire);
//   - the send_ops_flags bit that enables it in ibv_create_qp_ex (ibv_wr_post(3));
//   - the access its target range needs on the responder (none for a SEND: it has no range);
//   - whether the NIC reads the requester's SGEs (the race detector watches them) or writes
//     them (a READ's destination), whether it consumes a receive, and whether it carries
//     immediate data.
// An opcode without a row (the 64-bit atomics, bind MW, local invalidate, ...) is not
// modelled: ibv_post_send refuses it with EINVAL.

#ifndef SOFTRPMA_SIMVERBS_SIM_NIC_OPCODES_H_
#define SOFTRPMA_SIMVERBS_SIM_NIC_OPCODES_H_

#include <infiniband/verbs.h>

#include <cstdint>

#include "simverbs/sim/fabric/wire.h"

namespace softrpma::sim {

struct Opcode {
  ibv_wr_opcode wr;
  ibv_wc_opcode wc;         // the requester's completion
  wire::Type wire;          // the request on the host fabric
  uint64_t send_ops_flag;   // IBV_QP_EX_WITH_*
  int target_access;        // IBV_ACCESS_REMOTE_*; 0: no remote range (SEND)
  bool reads_local;         // the NIC reads the SGEs (else, for a READ, it writes them)
  bool consumes_receive;    // completes a receive on the responder
  bool with_imm;            // carries immediate data
};

// The row of `opcode`, or nullptr when the NIC does not model it.
const Opcode* FindOpcode(ibv_wr_opcode opcode);

// The row of a request of `type` (with kFlagImm or not), or nullptr when no row sends it.
const Opcode* FromWire(wire::Type type, bool with_imm);

// Every row's send_ops_flag, OR'ed.
uint64_t AllSendOpsFlags();

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_NIC_OPCODES_H_
