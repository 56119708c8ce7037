#include "simverbs/sim/nic/opcodes.h"

#include <set>

#include "gtest/gtest.h"

namespace softrpma::sim {
namespace {

constexpr ibv_wr_opcode kModelled[] = {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
                                       IBV_WR_SEND,       IBV_WR_SEND_WITH_IMM,
                                       IBV_WR_RDMA_READ,  IBV_WR_ATOMIC_WRITE};

TEST(OpcodesTest, EveryRcOpOfThePostApiHasARow) {
  for (ibv_wr_opcode opcode : kModelled) {
    const Opcode* row = FindOpcode(opcode);
    ASSERT_NE(row, nullptr) << opcode;
    EXPECT_EQ(row->wr, opcode);
  }
}

TEST(OpcodesTest, TheOpsTheNicDoesNotModelHaveNoRow) {
  for (ibv_wr_opcode opcode :
       {IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_LOCAL_INV, IBV_WR_BIND_MW,
        IBV_WR_SEND_WITH_INV, IBV_WR_TSO, IBV_WR_DRIVER1, static_cast<ibv_wr_opcode>(12)}) {
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
}

TEST(OpcodesTest, WhatTheResponderDoes) {
  for (ibv_wr_opcode opcode : kModelled) {
    const Opcode& row = *FindOpcode(opcode);
    const bool send = opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM;
    EXPECT_EQ(row.consumes_receive, send || opcode == IBV_WR_RDMA_WRITE_WITH_IMM) << opcode;
    EXPECT_EQ(row.with_imm, opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
        << opcode;
    EXPECT_EQ(row.reads_local, opcode != IBV_WR_RDMA_READ) << opcode;
    const int access = send                         ? 0
                       : opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ
                                                    : IBV_ACCESS_REMOTE_WRITE;
    EXPECT_EQ(row.target_access, access) << opcode;
  }
}

// A request read off the wire finds the row that sent it, and only that one.
TEST(OpcodesTest, TheWireTypeRoundTrips) {
  for (ibv_wr_opcode opcode : kModelled) {
    const Opcode& row = *FindOpcode(opcode);
    EXPECT_EQ(FromWire(row.wire, row.with_imm), &row) << opcode;
  }
  EXPECT_EQ(FromWire(wire::Type::kRead, true), nullptr);
  EXPECT_EQ(FromWire(wire::Type::kAtomicWrite, true), nullptr);
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
                     IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_WRITE});
}

}  // namespace
}  // namespace softrpma::sim
