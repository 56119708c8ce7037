#include "simverbs/sim/nic/opcodes.h"

namespace softrpma::sim {
namespace {

constexpr Opcode kOpcodes[] = {
    // wr, wc, wire, send_ops_flag, target_access, reads_local, consumes_receive, with_imm,
    // atomic
    {IBV_WR_RDMA_WRITE, IBV_WC_RDMA_WRITE, wire::Type::kWrite, IBV_QP_EX_WITH_RDMA_WRITE,
     IBV_ACCESS_REMOTE_WRITE, true, false, false, false},
    {IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WC_RDMA_WRITE, wire::Type::kWrite,
     IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, IBV_ACCESS_REMOTE_WRITE, true, true, true, false},
    {IBV_WR_SEND, IBV_WC_SEND, wire::Type::kSend, IBV_QP_EX_WITH_SEND, 0, true, true, false,
     false},
    {IBV_WR_SEND_WITH_IMM, IBV_WC_SEND, wire::Type::kSend, IBV_QP_EX_WITH_SEND_WITH_IMM, 0, true,
     true, true, false},
    {IBV_WR_RDMA_READ, IBV_WC_RDMA_READ, wire::Type::kRead, IBV_QP_EX_WITH_RDMA_READ,
     IBV_ACCESS_REMOTE_READ, false, false, false, false},
    {IBV_WR_ATOMIC_WRITE, IBV_WC_ATOMIC_WRITE, wire::Type::kAtomicWrite,
     IBV_QP_EX_WITH_ATOMIC_WRITE, IBV_ACCESS_REMOTE_WRITE, true, false, false, true},
    {IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_COMP_SWAP, wire::Type::kCompareSwap,
     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, IBV_ACCESS_REMOTE_ATOMIC, false, false, false, true},
    {IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_FETCH_ADD, wire::Type::kFetchAdd,
     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, IBV_ACCESS_REMOTE_ATOMIC, false, false, false, true},
};

}  // namespace

const Opcode* FindOpcode(ibv_wr_opcode opcode) {
  for (const Opcode& row : kOpcodes) {
    if (row.wr == opcode) return &row;
  }
  return nullptr;
}

const Opcode* FromWire(wire::Type type, bool with_imm) {
  for (const Opcode& row : kOpcodes) {
    if (row.wire == type && row.with_imm == with_imm) return &row;
  }
  return nullptr;
}

uint64_t ApplyFetchingAtomic(const Opcode& op, uint64_t* target, uint64_t compare_add,
                             uint64_t swap) {
  if (op.wr == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    return __atomic_fetch_add(target, compare_add, __ATOMIC_SEQ_CST);
  }
  uint64_t former = compare_add;  // a failed exchange leaves the word's value here
  __atomic_compare_exchange_n(target, &former, swap, /*weak=*/false, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
  return former;
}

uint64_t AllSendOpsFlags() {
  uint64_t flags = 0;
  for (const Opcode& row : kOpcodes) flags |= row.send_ops_flag;
  return flags;
}

}  // namespace softrpma::sim
