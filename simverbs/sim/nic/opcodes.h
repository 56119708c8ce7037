// opcodes.h: THE OPCODE TABLE of the simulated NIC. One row per send opcode it models (an RC
// QP's: RDMA WRITE with and without immediate data, SEND with and without, RDMA READ, the 8-byte
// ATOMIC WRITE of the extended post API, and the 64-bit COMPARE-AND-SWAP and FETCH-AND-ADD),
// with every fact the requester, the responder and the completer ask of an opcode:
//   - the requester's completion opcode (ibv_poll_cq(3): a WRITE_WITH_IMM completes as
//     IBV_WC_RDMA_WRITE, a SEND_WITH_IMM as IBV_WC_SEND);
//   - the request type on the host fabric's wire (wire.h), and back (FromWire);
//   - the send_ops_flags bit that enables it in ibv_create_qp_ex (ibv_wr_post(3));
//   - the access its target range needs on the responder (none for a SEND: it has no range);
//   - whether the NIC reads the requester's SGEs (the race detector watches them) or writes
//     them (a READ's destination, and the 8 bytes a compare-and-swap or fetch-and-add brings
//     back), whether it consumes a receive, and whether it carries immediate data;
//   - whether it is an atomic: 8 bytes at an 8-byte aligned target address, accessed at once
//     (no other atomic of any QP, and no load of the target's CPU, sees half of it).
// An opcode without a row (bind MW, local invalidate, ...) is not modelled: ibv_post_send
// refuses it with EINVAL.

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
  bool atomic;              // 8 aligned bytes at the target, in one access
};

// A compare-and-swap or fetch-and-add: an atomic whose target's former value comes back.
inline bool FetchesAtomically(const Opcode& op) { return op.atomic && !op.reads_local; }

// Applies `op` (FetchesAtomically) to the aligned word at `target` as one atomic
// read-modify-write; returns the word's former value. compare_add: CMP_AND_SWP's compare
// value, FETCH_AND_ADD's addend; swap: CMP_AND_SWP's new value.
uint64_t ApplyFetchingAtomic(const Opcode& op, uint64_t* target, uint64_t compare_add,
                             uint64_t swap);

// The row of `opcode`, or nullptr when the NIC does not model it.
const Opcode* FindOpcode(ibv_wr_opcode opcode);

// The row of a request of `type` (with kFlagImm or not), or nullptr when no row sends it.
const Opcode* FromWire(wire::Type type, bool with_imm);

// Every row's send_ops_flag, OR'ed.
uint64_t AllSendOpsFlags();

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_NIC_OPCODES_H_
