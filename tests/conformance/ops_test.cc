// Conformance of the data path (rpma_read(3), rpma_write(3), rpma_write_with_imm(3),
// rpma_atomic_write(3), rpma_flush(3), rpma_send(3), rpma_send_with_imm(3), rpma_recv(3)): one
// test per ERRORS line (rows of rpma-errors.tsv), through the public API on the simulated NIC.
// After every provider failure the same operation is posted again and completes: the
// connection is still usable.

#include <infiniband/verbs.h>

#include <functional>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/conformance_test.h"
#include "tests/conformance/testing/connected_test.h"

namespace softrpma::conformance {
namespace {

constexpr int kAlways = RPMA_F_COMPLETION_ALWAYS;

class OpsTest : public ConnectedTest {
 protected:
  // `post` fails with RPMA_E_PROVIDER while ibv_post_send fails, then posts and completes with
  // `opcode` on the client's CQ.
  void ExpectPostSendFailsThenWorks(const std::function<int()>& post, ibv_wc_opcode opcode) {
    {
      ARM_FAULTS(faults, "ibv_post_send:fail=ENOMEM:nth=1");
      EXPECT_RPMA(post(), RPMA_E_PROVIDER);
      EXPECT_EQ(FaultInjections("ibv_post_send"), 1u);
    }
    ASSERT_RPMA(post(), 0);
    ExpectClientCompletion(opcode);
  }

  // The server posts a receive, so that a send of the client completes.
  void ServerReceives() { ASSERT_RPMA(rpma_recv(rig_->server(), server_mr_, 0, 64, nullptr), 0); }

  rpma_conn* conn() const { return rig_->client(); }
};

// ---- rpma_read ---------------------------------------------------------------------------------

RPMA_TEST_F(OpsTest, Read_ConnNullOrFlagsZero_ReturnsInval,
            RPMA_ROW("rpma_read", "RPMA_E_INVAL", "conn == NULL || flags == 0")) {
  EXPECT_RPMA(rpma_read(nullptr, client_mr_, 0, server_remote_, 0, 8, kAlways, nullptr),
              RPMA_E_INVAL);
  EXPECT_RPMA(rpma_read(conn(), client_mr_, 0, server_remote_, 0, 8, 0, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, Read_DstNullWithSrcOffsetsOrLen_ReturnsInval,
            RPMA_ROW("rpma_read", "RPMA_E_INVAL",
                     "dst == NULL && (src != NULL || src_offset != 0 || dst_offset != 0 || "
                     "len != 0)")) {
  EXPECT_RPMA(rpma_read(conn(), nullptr, 0, server_remote_, 0, 0, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_read(conn(), nullptr, 0, nullptr, 1, 0, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_read(conn(), nullptr, 1, nullptr, 0, 0, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_read(conn(), nullptr, 0, nullptr, 0, 1, kAlways, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, Read_SrcNullWithDstOffsetsOrLen_ReturnsInval,
            RPMA_ROW("rpma_read", "RPMA_E_INVAL",
                     "src == NULL && (dst != NULL || src_offset != 0 || dst_offset != 0 || "
                     "len != 0)")) {
  EXPECT_RPMA(rpma_read(conn(), client_mr_, 0, nullptr, 0, 0, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_read(conn(), client_mr_, 0, nullptr, 1, 8, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_read(conn(), client_mr_, 1, nullptr, 0, 8, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_read(conn(), client_mr_, 0, nullptr, 0, 8, kAlways, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, Read_PostSendFails_ReturnsProvider,
            RPMA_ROW("rpma_read", "RPMA_E_PROVIDER", "ibv_post_send(3) failed")) {
  ExpectPostSendFailsThenWorks(
      [&] { return rpma_read(conn(), client_mr_, 0, server_remote_, 0, 8, kAlways, nullptr); },
      IBV_WC_RDMA_READ);
}

// ---- rpma_write / rpma_write_with_imm -----------------------------------------------------------

RPMA_TEST_F(OpsTest, Write_ConnNullOrFlagsZero_ReturnsInval,
            RPMA_ROW("rpma_write", "RPMA_E_INVAL", "conn == NULL || flags == 0")) {
  EXPECT_RPMA(rpma_write(nullptr, server_remote_, 0, client_mr_, 0, 8, kAlways, nullptr),
              RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write(conn(), server_remote_, 0, client_mr_, 0, 8, 0, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, Write_DstNullWithSrcOffsetsOrLen_ReturnsInval,
            RPMA_ROW("rpma_write", "RPMA_E_INVAL",
                     "dst == NULL && (src != NULL || src_offset != 0 || dst_offset != 0 || "
                     "len != 0)")) {
  EXPECT_RPMA(rpma_write(conn(), nullptr, 0, client_mr_, 0, 0, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write(conn(), nullptr, 0, nullptr, 1, 0, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write(conn(), nullptr, 1, nullptr, 0, 0, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write(conn(), nullptr, 0, nullptr, 0, 1, kAlways, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, Write_SrcNullWithDstOffsetsOrLen_ReturnsInval,
            RPMA_ROW("rpma_write", "RPMA_E_INVAL",
                     "src == NULL && (dst != NULL || src_offset != 0 || dst_offset != 0 || "
                     "len != 0)")) {
  EXPECT_RPMA(rpma_write(conn(), server_remote_, 0, nullptr, 0, 0, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write(conn(), server_remote_, 0, nullptr, 1, 8, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write(conn(), server_remote_, 1, nullptr, 0, 8, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write(conn(), server_remote_, 0, nullptr, 0, 8, kAlways, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, Write_PostSendFails_ReturnsProvider,
            RPMA_ROW("rpma_write", "RPMA_E_PROVIDER", "ibv_post_send(3) failed")) {
  ExpectPostSendFailsThenWorks(
      [&] { return rpma_write(conn(), server_remote_, 0, client_mr_, 0, 8, kAlways, nullptr); },
      IBV_WC_RDMA_WRITE);
}

RPMA_TEST_F(OpsTest, WriteWithImm_ConnNullOrFlagsZero_ReturnsInval,
            RPMA_ROW("rpma_write_with_imm", "RPMA_E_INVAL", "conn == NULL || flags == 0")) {
  EXPECT_RPMA(
      rpma_write_with_imm(nullptr, server_remote_, 0, client_mr_, 0, 8, kAlways, 7, nullptr),
      RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write_with_imm(conn(), server_remote_, 0, client_mr_, 0, 8, 0, 7, nullptr),
              RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, WriteWithImm_DstNullWithSrcOffsetsOrLen_ReturnsInval,
            RPMA_ROW("rpma_write_with_imm", "RPMA_E_INVAL",
                     "dst == NULL && (src != NULL || src_offset != 0 || dst_offset != 0 || "
                     "len != 0)")) {
  EXPECT_RPMA(rpma_write_with_imm(conn(), nullptr, 0, client_mr_, 0, 0, kAlways, 7, nullptr),
              RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write_with_imm(conn(), nullptr, 0, nullptr, 1, 0, kAlways, 7, nullptr),
              RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write_with_imm(conn(), nullptr, 1, nullptr, 0, 0, kAlways, 7, nullptr),
              RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write_with_imm(conn(), nullptr, 0, nullptr, 0, 1, kAlways, 7, nullptr),
              RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, WriteWithImm_SrcNullWithDstOffsetsOrLen_ReturnsInval,
            RPMA_ROW("rpma_write_with_imm", "RPMA_E_INVAL",
                     "src == NULL && (dst != NULL || src_offset != 0 || dst_offset != 0 || "
                     "len != 0)")) {
  EXPECT_RPMA(rpma_write_with_imm(conn(), server_remote_, 0, nullptr, 0, 0, kAlways, 7, nullptr),
              RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write_with_imm(conn(), server_remote_, 0, nullptr, 1, 8, kAlways, 7, nullptr),
              RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write_with_imm(conn(), server_remote_, 1, nullptr, 0, 8, kAlways, 7, nullptr),
              RPMA_E_INVAL);
  EXPECT_RPMA(rpma_write_with_imm(conn(), server_remote_, 0, nullptr, 0, 8, kAlways, 7, nullptr),
              RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, WriteWithImm_PostSendFails_ReturnsProvider,
            RPMA_ROW("rpma_write_with_imm", "RPMA_E_PROVIDER", "ibv_post_send(3) failed")) {
  // The immediate data consumes a receive on the server.
  ServerReceives();
  ExpectPostSendFailsThenWorks(
      [&] {
        return rpma_write_with_imm(conn(), server_remote_, 0, client_mr_, 0, 8, kAlways, 7,
                                   nullptr);
      },
      IBV_WC_RDMA_WRITE);
}

// ---- rpma_atomic_write --------------------------------------------------------------------------

RPMA_TEST_F(OpsTest, AtomicWrite_ConnDstOrSrcNull_ReturnsInval,
            RPMA_ROW("rpma_atomic_write", "RPMA_E_INVAL", "conn, dst or src is NULL")) {
  const char src[8] = "atomic!";
  EXPECT_RPMA(rpma_atomic_write(nullptr, server_remote_, 0, src, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_atomic_write(conn(), nullptr, 0, src, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_atomic_write(conn(), server_remote_, 0, nullptr, kAlways, nullptr),
              RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, AtomicWrite_DstOffsetNotAligned_ReturnsInval,
            RPMA_ROW("rpma_atomic_write", "RPMA_E_INVAL", "dst_offset is not aligned to 8 bytes")) {
  const char src[8] = "atomic!";
  for (size_t offset : {1, 4, 7, 9, 12}) {
    EXPECT_RPMA(rpma_atomic_write(conn(), server_remote_, offset, src, kAlways, nullptr),
                RPMA_E_INVAL)
        << "dst_offset " << offset;
  }
}

RPMA_TEST_F(OpsTest, AtomicWrite_FlagsZero_ReturnsInval,
            RPMA_ROW("rpma_atomic_write", "RPMA_E_INVAL", "flags are not set (flags == 0)")) {
  const char src[8] = "atomic!";
  EXPECT_RPMA(rpma_atomic_write(conn(), server_remote_, 8, src, 0, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, AtomicWrite_PostSendFails_ReturnsProvider,
            RPMA_ROW("rpma_atomic_write", "RPMA_E_PROVIDER", "ibv_post_send(3) failed")) {
  const char src[8] = "atomic!";
  // The simulated device has no native atomic write by default: librpma's emulation, an RDMA
  // WRITE (tests/ops/atomic_write_test has the native one).
  ExpectPostSendFailsThenWorks(
      [&] { return rpma_atomic_write(conn(), server_remote_, 8, src, kAlways, nullptr); },
      IBV_WC_RDMA_WRITE);
}

// ---- rpma_flush -------------------------------------------------------------------------------

class FlushTest : public OpsTest {
 protected:
  // Applies the server's peer configuration (direct write to PMem: `supported`) to the client.
  void ApplyServerPeerCfg(bool supported) {
    rpma_peer_cfg* pcfg = nullptr;
    ASSERT_RPMA(rpma_peer_cfg_new(&pcfg), 0);
    ASSERT_RPMA(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, supported), 0);
    ASSERT_RPMA(rpma_conn_apply_remote_peer_cfg(conn(), pcfg), 0);
    ASSERT_RPMA(rpma_peer_cfg_delete(&pcfg), 0);
  }
};

RPMA_TEST_F(FlushTest, Flush_ConnOrDstNull_ReturnsInval,
            RPMA_ROW("rpma_flush", "RPMA_E_INVAL", "conn or dst is NULL")) {
  EXPECT_RPMA(
      rpma_flush(nullptr, server_remote_, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, kAlways, nullptr),
      RPMA_E_INVAL);
  EXPECT_RPMA(rpma_flush(conn(), nullptr, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, kAlways, nullptr),
              RPMA_E_INVAL);
}

RPMA_TEST_F(FlushTest, Flush_UnknownType_FlushesAsUpstream,
            RPMA_ROW_NOT_ENFORCED("rpma_flush", "RPMA_E_INVAL", "unknown type value",
                                  "upstream accepts it (conn.c checks only the known types' "
                                  "support) and flushes: the flush completes as "
                                  "IBV_WC_RDMA_READ")) {
  for (int type : {7, -1}) {
    EXPECT_RPMA(rpma_flush(conn(), server_remote_, 0, 8, static_cast<rpma_flush_type>(type),
                           kAlways, nullptr),
                0);
    ExpectClientCompletion(IBV_WC_RDMA_READ);
  }
}

RPMA_TEST_F(FlushTest, Flush_FlagsZero_ReturnsInval,
            RPMA_ROW("rpma_flush", "RPMA_E_INVAL", "flags are not set")) {
  EXPECT_RPMA(rpma_flush(conn(), server_remote_, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, 0, nullptr),
              RPMA_E_INVAL);
}

RPMA_TEST_F(FlushTest, Flush_PostSendFails_ReturnsProvider,
            RPMA_ROW("rpma_flush", "RPMA_E_PROVIDER", "ibv_post_send(3) failed")) {
  // The flush travels as an RDMA read (docs/STATUS.md): it completes as one.
  ExpectPostSendFailsThenWorks(
      [&] {
        return rpma_flush(conn(), server_remote_, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, kAlways,
                          nullptr);
      },
      IBV_WC_RDMA_READ);
}

RPMA_TEST_F(FlushTest, Flush_PersistentWithoutDirectWriteToPmem_ReturnsNosupp,
            RPMA_ROW("rpma_flush", "RPMA_E_NOSUPP",
                     "type is RPMA_FLUSH_TYPE_PERSISTENT and the direct write to pmem is not "
                     "supported")) {
  // The remote region allows both flush types; only the peer's support decides. Not
  // declared (the default, and declared as unsupported): not supported.
  EXPECT_RPMA(
      rpma_flush(conn(), server_remote_, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, kAlways, nullptr),
      RPMA_E_NOSUPP);
  ApplyServerPeerCfg(false);
  EXPECT_RPMA(
      rpma_flush(conn(), server_remote_, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, kAlways, nullptr),
      RPMA_E_NOSUPP);
  // Declared as supported: the same flush is posted and completes.
  ApplyServerPeerCfg(true);
  ASSERT_RPMA(
      rpma_flush(conn(), server_remote_, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, kAlways, nullptr), 0);
  ExpectClientCompletion(IBV_WC_RDMA_READ);
}

// ---- rpma_send / rpma_send_with_imm / rpma_recv ---------------------------------------------

RPMA_TEST_F(OpsTest, Send_ConnNullOrFlagsZero_ReturnsInval,
            RPMA_ROW("rpma_send", "RPMA_E_INVAL", "conn == NULL || flags == 0")) {
  EXPECT_RPMA(rpma_send(nullptr, client_mr_, 0, 8, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_send(conn(), client_mr_, 0, 8, 0, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, Send_SrcNullWithOffsetOrLen_ReturnsInval,
            RPMA_ROW("rpma_send", "RPMA_E_INVAL", "src == NULL && (offset != 0 || len != 0)")) {
  EXPECT_RPMA(rpma_send(conn(), nullptr, 1, 0, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_send(conn(), nullptr, 0, 8, kAlways, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, Send_PostSendFails_ReturnsProvider,
            RPMA_ROW("rpma_send", "RPMA_E_PROVIDER", "ibv_post_send(3) failed")) {
  ServerReceives();
  ExpectPostSendFailsThenWorks(
      [&] { return rpma_send(conn(), client_mr_, 0, 8, kAlways, nullptr); }, IBV_WC_SEND);
}

RPMA_TEST_F(OpsTest, SendWithImm_ConnNullOrFlagsZero_ReturnsInval,
            RPMA_ROW("rpma_send_with_imm", "RPMA_E_INVAL", "conn == NULL || flags == 0")) {
  EXPECT_RPMA(rpma_send_with_imm(nullptr, client_mr_, 0, 8, kAlways, 7, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_send_with_imm(conn(), client_mr_, 0, 8, 0, 7, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, SendWithImm_SrcNullWithOffsetOrLen_ReturnsInval,
            RPMA_ROW("rpma_send_with_imm", "RPMA_E_INVAL",
                     "src == NULL && (offset != 0 || len != 0)")) {
  EXPECT_RPMA(rpma_send_with_imm(conn(), nullptr, 1, 0, kAlways, 7, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_send_with_imm(conn(), nullptr, 0, 8, kAlways, 7, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, SendWithImm_PostSendFails_ReturnsProvider,
            RPMA_ROW("rpma_send_with_imm", "RPMA_E_PROVIDER", "ibv_post_send(3) failed")) {
  ServerReceives();
  ExpectPostSendFailsThenWorks(
      [&] { return rpma_send_with_imm(conn(), client_mr_, 0, 8, kAlways, 7, nullptr); },
      IBV_WC_SEND);
}

RPMA_TEST_F(OpsTest, Recv_ConnNull_ReturnsInval,
            RPMA_ROW("rpma_recv", "RPMA_E_INVAL", "conn == NULL")) {
  EXPECT_RPMA(rpma_recv(nullptr, client_mr_, 0, 8, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, Recv_DstNullWithOffsetOrLen_ReturnsInval,
            RPMA_ROW("rpma_recv", "RPMA_E_INVAL", "dst == NULL && (offset != 0 || len != 0)")) {
  EXPECT_RPMA(rpma_recv(conn(), nullptr, 1, 0, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_recv(conn(), nullptr, 0, 8, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(OpsTest, Recv_PostRecvFails_ReturnsProvider,
            RPMA_ROW("rpma_recv", "RPMA_E_PROVIDER", "ibv_post_recv(3) failed")) {
  {
    ARM_FAULTS(faults, "ibv_post_recv:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rpma_recv(conn(), client_mr_, 0, 8, nullptr), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_post_recv"), 1u);
  }
  // Nothing was posted by the failed call: one receive now, and one send fills it (a send
  // without a receive would wait).
  ASSERT_RPMA(rpma_recv(conn(), client_mr_, 0, 8, nullptr), 0);
  ASSERT_RPMA(rpma_send(rig_->server(), server_mr_, 0, 8, RPMA_F_COMPLETION_ON_ERROR, nullptr), 0);
  ExpectClientCompletion(IBV_WC_RECV);
}

}  // namespace
}  // namespace softrpma::conformance
