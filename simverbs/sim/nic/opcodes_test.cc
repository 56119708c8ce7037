#include "simverbs/sim/nic/opcodes.h"

#include <set>

#include "gtest/gtest.h"

namespace softrpma::sim {
namespace {

constexpr ibv_wr_opcode kModelled[] = {
    IBV_WR_RDMA_WRITE,   IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND,
    IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ,          IBV_WR_ATOMIC_WRITE,
    IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD};

bool Fetches(ibv_wr_opcode opcode) {
  return opcode == IBV_WR_RDMA_READ || opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
         opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

TEST(OpcodesTest, EveryRcOpOfThePostApiHasARow) {
  for (ibv_wr_opcode opcode : kModelled) {
    const Opcode* row = FindOpcode(opcode);
    ASSERT_NE(row, nullptr) << opcode;
    EXPECT_EQ(row->wr, opcode);
  }
}

TEST(OpcodesTest, TheOpsTheNicDoesNotModelHaveNoRow) {
  for (ibv_wr_opcode opcode :
       {IBV_WR_LOCAL_INV, IBV_WR_BIND_MW, IBV_WR_SEND_WITH_INV, IBV_WR_TSO, IBV_WR_DRIVER1, static_cast<ibv_wr_opcode>(12)}) {
    EXPECT_EQ(FindOpcode(opcode), nullptr) << opcode;
  }
}

// ibv_poll_cq(3): the requester's completion names the operation, immediate data or not.
TEST(OpcodesTest, CompletionOpcodes) {
  EXPECT_EQ(FindOpcode(IBV_WR_RDMA_WRITE)->wc, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(FindOpcode(IBV_WR_RDMA_WRITE_WITH_IMM)->wc, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(FindOpcode(IBV_WR_SEND)->wc, IBV_WC_SEND);
  EXPECT_EQ(FindOpcode(IBV_WR_SEND_WITH_IMM)->wc, IBV_WC_SEND);
  EXPECT_EQ(FindOpcode(IBV_WR_RDMA_READ)->wc, IBV_WC_RDMA_READ);
  EXPECT_EQ(FindOpcode(IBV_WR_ATOMIC_WRITE)->wc, IBV_WC_ATOMIC_WRITE);
  EXPECT_EQ(FindOpcode(IBV_WR_ATOMIC_CMP_AND_SWP)->wc, IBV_WC_COMP_SWAP);
  EXPECT_EQ(FindOpcode(IBV_WR_ATOMIC_FETCH_AND_ADD)->wc, IBV_WC_FETCH_ADD);
}

TEST(OpcodesTest, WhatTheResponderDoes) {
  for (ibv_wr_opcode opcode : kModelled) {
    const Opcode& row = *FindOpcode(opcode);
    const bool send = opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM;
    EXPECT_EQ(row.consumes_receive, send || opcode == IBV_WR_RDMA_WRITE_WITH_IMM) << opcode;
    EXPECT_EQ(row.with_imm, opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
        << opcode;
    EXPECT_EQ(row.reads_local, !Fetches(opcode)) << opcode;
    const bool atomic = opcode == IBV_WR_ATOMIC_WRITE || opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
                        opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
    EXPECT_EQ(row.atomic, atomic) << opcode;
    EXPECT_EQ(FetchesAtomically(row), atomic && Fetches(opcode)) << opcode;
    const int access = send                         ? 0
                       : opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ
                       : atomic && Fetches(opcode)  ? IBV_ACCESS_REMOTE_ATOMIC
                                                    : IBV_ACCESS_REMOTE_WRITE;
    EXPECT_EQ(row.target_access, access) << opcode;
  }
}

// ibv_post_send(3): compare-and-swap stores `swap` only when the word equals `compare_add`;
// fetch-and-add adds `compare_add` (wrapping); both return the word's former value.
TEST(OpcodesTest, FetchingAtomicsReturnTheFormerValue) {
  const Opcode& cas = *FindOpcode(IBV_WR_ATOMIC_CMP_AND_SWP);
  const Opcode& faa = *FindOpcode(IBV_WR_ATOMIC_FETCH_AND_ADD);
  uint64_t word = 5;
  EXPECT_EQ(ApplyFetchingAtomic(cas, &word, 4, 9), 5u);  // compare fails: unchanged
  EXPECT_EQ(word, 5u);
  EXPECT_EQ(ApplyFetchingAtomic(cas, &word, 5, 9), 5u);  // compare holds: swapped
  EXPECT_EQ(word, 9u);
  EXPECT_EQ(ApplyFetchingAtomic(faa, &word, 3, 0), 9u);
  EXPECT_EQ(word, 12u);
  EXPECT_EQ(ApplyFetchingAtomic(faa, &word, ~uint64_t{0}, 0), 12u);  // adding -1 wraps
  EXPECT_EQ(word, 11u);
}

// A request read off the wire finds the row that sent it, and only that one.
TEST(OpcodesTest, TheWireTypeRoundTrips) {
  for (ibv_wr_opcode opcode : kModelled) {
    const Opcode& row = *FindOpcode(opcode);
    EXPECT_EQ(FromWire(row.wire, row.with_imm), &row) << opcode;
  }
  EXPECT_EQ(FromWire(wire::Type::kRead, true), nullptr);
  EXPECT_EQ(FromWire(wire::Type::kAtomicWrite, true), nullptr);
  EXPECT_EQ(FromWire(wire::Type::kCompareSwap, true), nullptr);
  EXPECT_EQ(FromWire(wire::Type::kAck, false), nullptr);
  EXPECT_EQ(FromWire(wire::Type::kConnectRequest, false), nullptr);
}

TEST(OpcodesTest, OneSendOpsFlagPerRow) {
  std::set<uint64_t> flags;
  for (ibv_wr_opcode opcode : kModelled) flags.insert(FindOpcode(opcode)->send_ops_flag);
  EXPECT_EQ(flags.size(), std::size(kModelled));
  EXPECT_EQ(AllSendOpsFlags(),
            uint64_t{IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                     IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_WRITE |
                     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD});
}

}  // namespace
}  // namespace softrpma::sim
