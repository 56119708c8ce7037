// Tests of rpma_atomic_write(3) and rpma_flush(3) on a mock backend: one test per ERRORS line of
// each man page, the work request each one posts, and the flush scratch that every connection
// registers for rpma_flush (made by rpma_conn_req_connect, released by rpma_conn_delete).
// (rpma_read / rpma_write / rpma_send / rpma_recv are tested in conn_test.cc.)

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "api/testing/alloc_failure.h"
#include "api/testing/log_capture.h"
#include "api/testing/mock_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/backend.h"

namespace {

using softrpma::testing::FakeProvider;
using softrpma::testing::MockBackend;
using softrpma::testing::ScopedAllocFailure;
using softrpma::testing::ScopedLogCapture;
using ::testing::_;
using ::testing::AllOf;
using ::testing::DoAll;
using ::testing::Field;
using ::testing::InSequence;
using ::testing::Invoke;
using ::testing::NiceMock;
using ::testing::Return;
using ::testing::SetArgPointee;

constexpr uint64_t kRemoteAddr = 0x10000;
constexpr uint32_t kRemoteRkey = 0x77;
constexpr size_t kRemoteSize = 64;
constexpr uint32_t kScratchLkey = 0x5C5C;
constexpr int kAlways = RPMA_F_COMPLETION_ALWAYS;

// A connection (active side) on the mock backend whose flush scratch registration is this
// fixture's `scratch_mr_`, and a remote region of kRemoteSize bytes at kRemoteAddr.
class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (NativeAtomicWrite()) fake_.SetDeviceCapFlagsEx(softrpma::kDeviceCapAtomicWrite);
    ASSERT_EQ(rpma_peer_new(fake_.Context(), &peer_), 0);
    scratch_mr_.lkey = kScratchLkey;
    EXPECT_CALL(backend_, IbvRegMr(_, _, 8, IBV_ACCESS_LOCAL_WRITE, _))
        .WillOnce(Invoke([this](ibv_pd*, void* addr, size_t length, int, ibv_mr** mr) {
          scratch_mr_.addr = addr;
          scratch_mr_.length = length;
          *mr = &scratch_mr_;
          return 0;
        }));
    rpma_conn_req* req = nullptr;
    ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
    ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn_), 0);
    qp_ = fake_.last_id()->qp;
    ::testing::Mock::VerifyAndClearExpectations(&backend_);
    remote_ = Remote(RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                     RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
  }
  void TearDown() override {
    rpma_mr_remote_delete(&remote_);
    EXPECT_CALL(backend_, IbvDeregMr(&scratch_mr_)).WillOnce(Return(0));
    ASSERT_EQ(rpma_conn_delete(&conn_), 0);
    ASSERT_EQ(rpma_peer_delete(&peer_), 0);
  }

  // Whether the device reports native atomic write (ibv_query_device_ex at rpma_peer_new).
  virtual bool NativeAtomicWrite() const { return false; }

  // A remote region of kRemoteSize bytes at kRemoteAddr, rkey kRemoteRkey, with `usage`.
  static rpma_mr_remote* Remote(int usage) {
    uint8_t desc[21] = {};
    for (int i = 0; i < 8; ++i) desc[i] = static_cast<uint8_t>(kRemoteAddr >> (8 * i));
    desc[8] = kRemoteSize;
    desc[16] = kRemoteRkey;
    desc[20] = static_cast<uint8_t>(usage);
    rpma_mr_remote* remote = nullptr;
    EXPECT_EQ(rpma_mr_remote_from_descriptor(desc, sizeof(desc), &remote), 0);
    return remote;
  }

  // Applies a remote peer configuration declaring (or not) direct write to PMem.
  void ApplyPeerCfg(bool direct_write_to_pmem) {
    rpma_peer_cfg* pcfg = nullptr;
    ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
    ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, direct_write_to_pmem), 0);
    ASSERT_EQ(rpma_conn_apply_remote_peer_cfg(conn_, pcfg), 0);
    ASSERT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
  }

  // Captures the next posted send WR (and its first SGE).
  void CaptureSend() {
    EXPECT_CALL(backend_, IbvPostSend(qp_, _, _))
        .WillOnce(Invoke([this](ibv_qp*, ibv_send_wr* wr, ibv_send_wr**) {
          wr_ = *wr;
          if (wr->num_sge > 0) sge_ = wr->sg_list[0];
          EXPECT_EQ(wr->next, nullptr);
          return 0;
        }));
  }
  void ExpectNoPost() { EXPECT_CALL(backend_, IbvPostSend(_, _, _)).Times(0); }

  NiceMock<MockBackend> backend_;
  FakeProvider fake_{&backend_};
  rpma_peer* peer_ = nullptr;
  rpma_conn* conn_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr scratch_mr_{};
  rpma_mr_remote* remote_ = nullptr;
  ibv_send_wr wr_{};
  ibv_sge sge_{};
  int context_ = 0;
};

// ---- rpma_atomic_write ----------------------------------------------------------------------

// Without native atomic write, as librpma (mr.c): an 8-byte RDMA WRITE, inline (the QP takes 8
// bytes inline: conn_test) and fenced behind earlier READs.
TEST_F(OpsTest, AtomicWrite_NoNativeAtomicWrite_PostsInlineFencedWriteOf8Bytes) {
  const char src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  CaptureSend();
  EXPECT_CALL(backend_, IbvQpToQpEx(_, _)).Times(0);

  ASSERT_EQ(rpma_atomic_write(conn_, remote_, 16, src, kAlways, &context_), 0);

  EXPECT_EQ(wr_.opcode, IBV_WR_RDMA_WRITE);
  EXPECT_EQ(wr_.wr_id, reinterpret_cast<uint64_t>(&context_));
  EXPECT_EQ(wr_.send_flags,
            static_cast<unsigned>(IBV_SEND_INLINE | IBV_SEND_FENCE | IBV_SEND_SIGNALED));
  ASSERT_EQ(wr_.num_sge, 1);
  EXPECT_EQ(sge_.addr, reinterpret_cast<uint64_t>(src));
  EXPECT_EQ(sge_.length, 8u);
  EXPECT_EQ(wr_.wr.rdma.remote_addr, kRemoteAddr + 16);
  EXPECT_EQ(wr_.wr.rdma.rkey, kRemoteRkey);
}

TEST_F(OpsTest, AtomicWrite_CompletionOnErrorOnly_IsUnsignaled) {
  const char src[8] = {};
  CaptureSend();
  ASSERT_EQ(rpma_atomic_write(conn_, remote_, 0, src, RPMA_F_COMPLETION_ON_ERROR, nullptr), 0);
  EXPECT_EQ(wr_.send_flags, static_cast<unsigned>(IBV_SEND_INLINE | IBV_SEND_FENCE));
}

// A device with native atomic write: the connection's QP is an extended QP with the atomic
// write builder, and rpma_atomic_write posts through ibv_wr_atomic_write, as librpma does.
class OpsNativeAtomicWriteTest : public OpsTest {
 protected:
  bool NativeAtomicWrite() const override { return true; }
};

TEST_F(OpsNativeAtomicWriteTest, ConnReqNew_MakesAnExtendedQpWithAtomicWrite) {
  EXPECT_CALL(backend_,
              RdmaCreateQpEx(_, AllOf(Field(&ibv_qp_init_attr_ex::comp_mask,
                                            IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS),
                                      Field(&ibv_qp_init_attr_ex::send_ops_flags,
                                            IBV_QP_EX_WITH_ATOMIC_WRITE))));
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  ASSERT_EQ(rpma_conn_req_delete(&req), 0);
}

TEST_F(OpsNativeAtomicWriteTest, AtomicWrite_PostsThroughTheExtendedPostApi) {
  const char src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ibv_qp_ex* qpx = reinterpret_cast<ibv_qp_ex*>(qp_);
  ExpectNoPost();
  {
    InSequence in_order;
    EXPECT_CALL(backend_, IbvQpToQpEx(qp_, _));
    EXPECT_CALL(backend_, IbvWrStart(qpx));
    EXPECT_CALL(backend_, IbvWrAtomicWrite(qpx, kRemoteRkey, kRemoteAddr + 16,
                                           static_cast<const void*>(src)))
        .WillOnce(Invoke([this](ibv_qp_ex* ex, uint32_t, uint64_t, const void*) {
          EXPECT_EQ(ex->wr_id, reinterpret_cast<uint64_t>(&context_));
          EXPECT_EQ(ex->wr_flags, static_cast<unsigned>(IBV_SEND_SIGNALED));
        }));
    EXPECT_CALL(backend_, IbvWrComplete(qpx));
  }
  ASSERT_EQ(rpma_atomic_write(conn_, remote_, 16, src, kAlways, &context_), 0);
}

TEST_F(OpsNativeAtomicWriteTest, AtomicWrite_CompletionOnErrorOnly_IsUnsignaled) {
  const char src[8] = {};
  EXPECT_CALL(backend_, IbvWrAtomicWrite(_, _, _, _))
      .WillOnce(Invoke([](ibv_qp_ex* ex, uint32_t, uint64_t, const void*) {
        EXPECT_EQ(ex->wr_flags, 0u);
      }));
  ASSERT_EQ(rpma_atomic_write(conn_, remote_, 0, src, RPMA_F_COMPLETION_ON_ERROR, nullptr), 0);
}

// ERRORS: "ibv_post_send(3) failed": here the post is ibv_wr_complete(3).
TEST_F(OpsNativeAtomicWriteTest, AtomicWrite_WrCompleteFails_ReturnsProvider) {
  const char src[8] = {};
  EXPECT_CALL(backend_, IbvWrComplete(_)).WillOnce(Return(ENOMEM));
  ScopedLogCapture capture;
  EXPECT_EQ(rpma_atomic_write(conn_, remote_, 8, src, kAlways, nullptr), RPMA_E_PROVIDER);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "ibv_wr_complete() failed"))
      << capture.Dump();
}

TEST_F(OpsNativeAtomicWriteTest, AtomicWrite_NoExtendedQp_ReturnsProvider) {
  const char src[8] = {};
  EXPECT_CALL(backend_, IbvQpToQpEx(_, _)).WillOnce(Return(softrpma::kNoErrno));
  EXPECT_CALL(backend_, IbvWrStart(_)).Times(0);
  EXPECT_EQ(rpma_atomic_write(conn_, remote_, 8, src, kAlways, nullptr), RPMA_E_PROVIDER);
}

// ERRORS: "conn, dst or src is NULL".
TEST_F(OpsTest, AtomicWrite_NullConnDstOrSrc_ReturnsInval) {
  const char src[8] = {};
  ExpectNoPost();
  EXPECT_EQ(rpma_atomic_write(nullptr, remote_, 0, src, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_atomic_write(conn_, nullptr, 0, src, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_atomic_write(conn_, remote_, 0, nullptr, kAlways, nullptr), RPMA_E_INVAL);
}

// ERRORS: "dst_offset is not aligned to 8 bytes".
TEST_F(OpsTest, AtomicWrite_DstOffsetNotAligned_ReturnsInval) {
  const char src[8] = {};
  ExpectNoPost();
  ScopedLogCapture capture;
  for (size_t offset : {1, 2, 4, 7, 12, 63}) {
    EXPECT_EQ(rpma_atomic_write(conn_, remote_, offset, src, kAlways, nullptr), RPMA_E_INVAL)
        << offset;
  }
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "not aligned")) << capture.Dump();
}

// ERRORS: "flags are not set (flags == 0)".
TEST_F(OpsTest, AtomicWrite_FlagsNotSet_ReturnsInval) {
  const char src[8] = {};
  ExpectNoPost();
  EXPECT_EQ(rpma_atomic_write(conn_, remote_, 0, src, 0, nullptr), RPMA_E_INVAL);
}

// ERRORS: "ibv_post_send(3) failed".
TEST_F(OpsTest, AtomicWrite_PostFails_ReturnsProvider) {
  const char src[8] = {};
  EXPECT_CALL(backend_, IbvPostSend(_, _, _)).WillOnce(Return(EINVAL)).WillOnce(Return(ENOMEM));
  ScopedLogCapture capture;
  EXPECT_EQ(rpma_atomic_write(conn_, remote_, 8, src, kAlways, nullptr), RPMA_E_PROVIDER);
  EXPECT_EQ(rpma_atomic_write(conn_, remote_, 8, src, kAlways, nullptr), RPMA_E_PROVIDER);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "ibv_post_send() failed")) << capture.Dump();
}

// ---- rpma_flush ------------------------------------------------------------------------------

TEST_F(OpsTest, Flush_Visibility_PostsAnEightByteReadIntoTheScratch) {
  CaptureSend();

  ASSERT_EQ(rpma_flush(conn_, remote_, 24, 16, RPMA_FLUSH_TYPE_VISIBILITY, kAlways, &context_),
            0);

  EXPECT_EQ(wr_.opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(wr_.wr_id, reinterpret_cast<uint64_t>(&context_));
  EXPECT_EQ(wr_.send_flags, static_cast<unsigned>(IBV_SEND_SIGNALED));
  ASSERT_EQ(wr_.num_sge, 1);
  EXPECT_EQ(sge_.addr, reinterpret_cast<uint64_t>(scratch_mr_.addr));
  EXPECT_EQ(sge_.length, 8u);
  EXPECT_EQ(sge_.lkey, kScratchLkey);
  EXPECT_EQ(wr_.wr.rdma.remote_addr, kRemoteAddr + 24);
  EXPECT_EQ(wr_.wr.rdma.rkey, kRemoteRkey);
}

TEST_F(OpsTest, Flush_CompletionOnErrorOnly_IsUnsignaled) {
  CaptureSend();
  ASSERT_EQ(rpma_flush(conn_, remote_, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY,
                       RPMA_F_COMPLETION_ON_ERROR, nullptr),
            0);
  EXPECT_EQ(wr_.send_flags, 0u);
}

// As librpma (flush.c): always an 8-byte read, not trimmed at the region's end.
TEST_F(OpsTest, Flush_NearTheRegionsEnd_StillReadsEightBytes) {
  for (size_t offset : {kRemoteSize - 3, kRemoteSize}) {
    CaptureSend();
    ASSERT_EQ(rpma_flush(conn_, remote_, offset, kRemoteSize - offset, RPMA_FLUSH_TYPE_VISIBILITY,
                         kAlways, nullptr),
              0);
    ASSERT_EQ(wr_.num_sge, 1) << offset;
    EXPECT_EQ(sge_.length, 8u) << offset;
    EXPECT_EQ(wr_.wr.rdma.remote_addr, kRemoteAddr + offset);
  }
}

TEST_F(OpsTest, Flush_OffsetPastTheRegion_IsLeftToTheProvider) {
  CaptureSend();
  ASSERT_EQ(rpma_flush(conn_, remote_, kRemoteSize + 8, 8, RPMA_FLUSH_TYPE_VISIBILITY, kAlways,
                       nullptr),
            0);
  EXPECT_EQ(sge_.length, 8u);
  EXPECT_EQ(wr_.wr.rdma.remote_addr, kRemoteAddr + kRemoteSize + 8);
}

TEST_F(OpsTest, Flush_PersistentWithDirectWriteToPmem_PostsRead) {
  ApplyPeerCfg(true);
  CaptureSend();
  ASSERT_EQ(rpma_flush(conn_, remote_, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, kAlways, &context_), 0);
  EXPECT_EQ(wr_.opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(wr_.wr_id, reinterpret_cast<uint64_t>(&context_));
}

// ERRORS: "conn or dst is NULL".
TEST_F(OpsTest, Flush_NullConnOrDst_ReturnsInval) {
  ExpectNoPost();
  const rpma_flush_type v = RPMA_FLUSH_TYPE_VISIBILITY;
  EXPECT_EQ(rpma_flush(nullptr, remote_, 0, 8, v, kAlways, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_flush(conn_, nullptr, 0, 8, v, kAlways, nullptr), RPMA_E_INVAL);
}

// ERRORS: "unknown type value" -- documented, not enforced: librpma (conn.c) checks only the
// two known types' support and flushes for any other value, so softrpma does too, silently.
TEST_F(OpsTest, Flush_UnknownType_PostsTheReadAsUpstream) {
  ScopedLogCapture capture;
  for (int type : {-1, 2, 100}) {
    CaptureSend();
    EXPECT_EQ(rpma_flush(conn_, remote_, 0, 8, static_cast<rpma_flush_type>(type), kAlways,
                         &context_),
              0)
        << type;
    EXPECT_EQ(wr_.opcode, IBV_WR_RDMA_READ);
    EXPECT_EQ(sge_.length, 8u);
  }
  EXPECT_FALSE(capture.AnyAtOrAbove(RPMA_LOG_LEVEL_ERROR)) << capture.Dump();
}

// ERRORS: "flags are not set".
TEST_F(OpsTest, Flush_FlagsNotSet_ReturnsInval) {
  ExpectNoPost();
  EXPECT_EQ(rpma_flush(conn_, remote_, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, 0, nullptr),
            RPMA_E_INVAL);
}

// ERRORS: "ibv_post_send(3) failed".
TEST_F(OpsTest, Flush_PostFails_ReturnsProvider) {
  EXPECT_CALL(backend_, IbvPostSend(_, _, _)).WillOnce(Return(ENOMEM));
  ScopedLogCapture capture;
  EXPECT_EQ(rpma_flush(conn_, remote_, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, kAlways, nullptr),
            RPMA_E_PROVIDER);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "ibv_post_send() failed")) << capture.Dump();
}

// ERRORS: "type is RPMA_FLUSH_TYPE_PERSISTENT and the direct write to pmem is not supported":
// no remote peer configuration applied, or one that does not declare it.
TEST_F(OpsTest, Flush_PersistentWithoutDirectWriteToPmem_ReturnsNosupp) {
  ExpectNoPost();
  ScopedLogCapture capture;
  EXPECT_EQ(rpma_flush(conn_, remote_, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, kAlways, nullptr),
            RPMA_E_NOSUPP);
  ApplyPeerCfg(false);
  EXPECT_EQ(rpma_flush(conn_, remote_, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, kAlways, nullptr),
            RPMA_E_NOSUPP);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "direct write to PMem")) << capture.Dump();
}

TEST_F(OpsTest, Flush_DirectWriteToPmemWithdrawn_PersistentIsNosuppAgain) {
  ApplyPeerCfg(true);
  ApplyPeerCfg(false);
  ExpectNoPost();
  EXPECT_EQ(rpma_flush(conn_, remote_, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, kAlways, nullptr),
            RPMA_E_NOSUPP);
}

// Beyond the ERRORS list (docs/STATUS.md): the remote region does not support that flush type
// (rpma_mr_remote_get_flush_type(3)) -> RPMA_E_NOSUPP, as librpma.
TEST_F(OpsTest, Flush_TypeTheRemoteRegionDoesNotSupport_ReturnsNosupp) {
  ApplyPeerCfg(true);
  rpma_mr_remote* persistent_only = Remote(RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
  rpma_mr_remote* visibility_only = Remote(RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
  rpma_mr_remote* no_flush = Remote(RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST);
  ExpectNoPost();
  ScopedLogCapture capture;

  EXPECT_EQ(rpma_flush(conn_, persistent_only, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, kAlways,
                       nullptr),
            RPMA_E_NOSUPP);
  EXPECT_EQ(rpma_flush(conn_, visibility_only, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, kAlways,
                       nullptr),
            RPMA_E_NOSUPP);
  EXPECT_EQ(rpma_flush(conn_, no_flush, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, kAlways, nullptr),
            RPMA_E_NOSUPP);
  EXPECT_EQ(rpma_flush(conn_, no_flush, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, kAlways, nullptr),
            RPMA_E_NOSUPP);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "does not support flushing"))
      << capture.Dump();

  rpma_mr_remote_delete(&persistent_only);
  rpma_mr_remote_delete(&visibility_only);
  rpma_mr_remote_delete(&no_flush);
}

TEST_F(OpsTest, Flush_PersistentOnlyRegion_PersistentIsPosted) {
  ApplyPeerCfg(true);
  rpma_mr_remote* persistent_only = Remote(RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
  CaptureSend();
  EXPECT_EQ(rpma_flush(conn_, persistent_only, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, kAlways,
                       nullptr),
            0);
  rpma_mr_remote_delete(&persistent_only);
}

// ---- The flush scratch of a connection -------------------------------------------------------

class FlushScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(rpma_peer_new(fake_.Context(), &peer_), 0);
    ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req_), 0);
  }
  void TearDown() override {
    if (req_ != nullptr) rpma_conn_req_delete(&req_);
    ASSERT_EQ(rpma_peer_delete(&peer_), 0);
  }

  NiceMock<MockBackend> backend_;
  FakeProvider fake_{&backend_};
  rpma_peer* peer_ = nullptr;
  rpma_conn_req* req_ = nullptr;
  ibv_mr scratch_mr_{};
};

TEST_F(FlushScratchTest, Connect_RegistersEightLocallyWritableBytes_DeleteDeregistersThem) {
  EXPECT_CALL(backend_, IbvRegMr(_, _, 8, IBV_ACCESS_LOCAL_WRITE, _))
      .WillOnce(DoAll(SetArgPointee<4>(&scratch_mr_), Return(0)));
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn), 0);
  ::testing::Mock::VerifyAndClearExpectations(&backend_);

  EXPECT_CALL(backend_, IbvDeregMr(&scratch_mr_)).WillOnce(Return(0));
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_EQ(conn, nullptr);
}

TEST_F(FlushScratchTest, Connect_ScratchRegistrationFails_ReturnsProvider_ReleasesAll) {
  EXPECT_CALL(backend_, IbvRegMr(_, _, _, _, _)).WillOnce(Return(ENOMEM));
  EXPECT_CALL(backend_, RdmaCreateEventChannel(_)).Times(0);
  EXPECT_CALL(backend_, RdmaConnect(_, _)).Times(0);
  EXPECT_CALL(backend_, RdmaDestroyQp(_));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  rpma_conn* conn = nullptr;
  EXPECT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn), RPMA_E_PROVIDER);
  EXPECT_EQ(req_, nullptr);
  EXPECT_EQ(conn, nullptr);
}

TEST_F(FlushScratchTest, Connect_NoMemoryForScratch_ReturnsNomem) {
  EXPECT_CALL(backend_, IbvRegMr(_, _, _, _, _)).Times(0);
  rpma_conn* conn = nullptr;
  {
    ScopedAllocFailure fail(/*fail_nth=*/2);  // 1: the connection, 2: its flush scratch
    EXPECT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn), RPMA_E_NOMEM);
  }
  EXPECT_EQ(req_, nullptr);
  EXPECT_EQ(conn, nullptr);
}

TEST_F(FlushScratchTest, Connect_MigrateFails_DeregistersScratch) {
  EXPECT_CALL(backend_, IbvRegMr(_, _, 8, _, _))
      .WillOnce(DoAll(SetArgPointee<4>(&scratch_mr_), Return(0)));
  EXPECT_CALL(backend_, RdmaMigrateId(_, _)).WillOnce(Return(EINVAL));
  EXPECT_CALL(backend_, IbvDeregMr(&scratch_mr_)).WillOnce(Return(0));
  rpma_conn* conn = nullptr;
  EXPECT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn), RPMA_E_PROVIDER);
  EXPECT_EQ(conn, nullptr);
}

TEST_F(FlushScratchTest, Delete_DeregistrationFails_ReturnsProvider_StillFreesConnection) {
  EXPECT_CALL(backend_, IbvRegMr(_, _, 8, _, _))
      .WillOnce(DoAll(SetArgPointee<4>(&scratch_mr_), Return(0)));
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req_, nullptr, &conn), 0);
  EXPECT_CALL(backend_, IbvDeregMr(&scratch_mr_)).WillOnce(Return(EBUSY));
  EXPECT_CALL(backend_, RdmaDestroyId(_));  // the rest is still released
  ScopedLogCapture capture;
  EXPECT_EQ(rpma_conn_delete(&conn), RPMA_E_PROVIDER);
  EXPECT_EQ(conn, nullptr);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "ibv_dereg_mr() failed")) << capture.Dump();
}

}  // namespace
