// Tests of rpma_mr_*(3), on a mock backend; rpma_mr_advise(3): one test per ERRORS line.

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ios>

#include "api/testing/alloc_failure.h"
#include "api/testing/log_capture.h"
#include "api/testing/mock_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "librpma.h"

namespace {

using softrpma::testing::FakeProvider;
using softrpma::testing::MockBackend;
using softrpma::testing::ScopedAllocFailure;
using softrpma::testing::ScopedLogCapture;
using ::testing::_;
using ::testing::DoAll;
using ::testing::InSequence;
using ::testing::Invoke;
using ::testing::NiceMock;
using ::testing::NotNull;
using ::testing::Return;
using ::testing::SetArgPointee;

class MrTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(rpma_peer_new(fake_.Context(), &peer_), 0); }
  void TearDown() override { ASSERT_EQ(rpma_peer_delete(&peer_), 0); }

  NiceMock<MockBackend> backend_;
  FakeProvider fake_{&backend_};
  rpma_peer* peer_ = nullptr;
  char buffer_[256] = {};
};

TEST_F(MrTest, MrReg_NullArguments_ReturnInval) {
  rpma_mr_local* mr = nullptr;
  EXPECT_EQ(rpma_mr_reg(nullptr, buffer_, 8, RPMA_MR_USAGE_READ_SRC, &mr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_reg(peer_, nullptr, 8, RPMA_MR_USAGE_READ_SRC, &mr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_reg(peer_, buffer_, 8, RPMA_MR_USAGE_READ_SRC, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(mr, nullptr);
}

TEST_F(MrTest, MrReg_ZeroSize_ReturnsInval) {
  rpma_mr_local* mr = nullptr;
  EXPECT_EQ(rpma_mr_reg(peer_, buffer_, 0, RPMA_MR_USAGE_READ_SRC, &mr), RPMA_E_INVAL);
}

TEST_F(MrTest, MrReg_ZeroUsage_ReturnsInval) {
  rpma_mr_local* mr = nullptr;
  EXPECT_CALL(backend_, IbvRegMr(_, _, _, _, _)).Times(0);
  EXPECT_EQ(rpma_mr_reg(peer_, buffer_, 8, 0, &mr), RPMA_E_INVAL);
}

TEST_F(MrTest, MrReg_OutOfMemory_ReturnsNomem) {
  rpma_mr_local* mr = nullptr;
  EXPECT_CALL(backend_, IbvRegMr(_, _, _, _, _)).Times(0);
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_mr_reg(peer_, buffer_, 8, RPMA_MR_USAGE_READ_SRC, &mr), RPMA_E_NOMEM);
  EXPECT_EQ(mr, nullptr);
}

TEST_F(MrTest, MrReg_RegistrationFails_ReturnsProvider) {
  rpma_mr_local* mr = nullptr;
  EXPECT_CALL(backend_, IbvRegMr(_, _, _, _, _)).WillOnce(Return(ENOMEM));
  EXPECT_EQ(rpma_mr_reg(peer_, buffer_, 8, RPMA_MR_USAGE_READ_SRC, &mr), RPMA_E_PROVIDER);
  EXPECT_EQ(mr, nullptr);
}

struct UsageAccess {
  int usage;
  int access;
};

// The access flags librpma's peer.c gives each usage.
TEST_F(MrTest, MrReg_MapsUsageToAccessFlags) {
  const UsageAccess cases[] = {
      {RPMA_MR_USAGE_READ_SRC, IBV_ACCESS_REMOTE_READ},
      {RPMA_MR_USAGE_READ_DST, IBV_ACCESS_LOCAL_WRITE},
      {RPMA_MR_USAGE_WRITE_SRC, IBV_ACCESS_LOCAL_WRITE},
      {RPMA_MR_USAGE_WRITE_DST, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE},
      {RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, IBV_ACCESS_REMOTE_READ},
      {RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT, IBV_ACCESS_REMOTE_READ},
      {RPMA_MR_USAGE_SEND, 0},
      {RPMA_MR_USAGE_RECV, IBV_ACCESS_LOCAL_WRITE},
      {RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST,
       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE},
  };
  for (const UsageAccess& c : cases) {
    EXPECT_CALL(backend_, IbvRegMr(_, buffer_, sizeof(buffer_), c.access, _));
    rpma_mr_local* mr = nullptr;
    ASSERT_EQ(rpma_mr_reg(peer_, buffer_, sizeof(buffer_), c.usage, &mr), 0) << c.usage;
    ASSERT_EQ(rpma_mr_dereg(&mr), 0);
    ::testing::Mock::VerifyAndClearExpectations(&backend_);
  }
}

// On iWARP an RDMA READ's response is written into the reader's memory by the other side, so
// librpma registers READ_DST with remote write access there (and only there).
TEST(MrIwarpTest, MrReg_ReadDstOnIwarp_AddsRemoteWrite) {
  NiceMock<MockBackend> backend;
  FakeProvider fake(&backend);
  fake.SetTransport(IBV_TRANSPORT_IWARP);
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(fake.Context(), &peer), 0);
  char buffer[64];
  EXPECT_CALL(backend, IbvRegMr(_, buffer, sizeof(buffer),
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, _));
  EXPECT_CALL(backend, IbvRegMr(_, buffer, sizeof(buffer), IBV_ACCESS_REMOTE_READ, _));
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, buffer, sizeof(buffer), RPMA_MR_USAGE_READ_DST, &mr), 0);
  ASSERT_EQ(rpma_mr_dereg(&mr), 0);
  ASSERT_EQ(rpma_mr_reg(peer, buffer, sizeof(buffer), RPMA_MR_USAGE_READ_SRC, &mr), 0);
  ASSERT_EQ(rpma_mr_dereg(&mr), 0);
  ASSERT_EQ(rpma_peer_delete(&peer), 0);
}

// A device that reports on-demand paging (ibv_query_device_ex at rpma_peer_new).
ibv_device_attr_ex OdpCapableAttr() {
  ibv_device_attr_ex attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.odp_caps.general_caps = IBV_ODP_SUPPORT;
  attr.odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_WRITE;
  return attr;
}

// As librpma (peer.c): a registration the provider refuses with EOPNOTSUPP is tried again with
// IBV_ACCESS_ON_DEMAND when the device is ODP-capable.
TEST(MrOdpTest, MrReg_EopnotsuppOnOdpDevice_RetriesOnDemand) {
  NiceMock<MockBackend> backend;
  FakeProvider fake(&backend);
  EXPECT_CALL(backend, IbvQueryDeviceEx(fake.Context(), _))
      .WillRepeatedly(DoAll(SetArgPointee<1>(OdpCapableAttr()), Return(0)));
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(fake.Context(), &peer), 0);
  char buffer[64];
  {
    InSequence in_order;
    EXPECT_CALL(backend, IbvRegMr(_, buffer, sizeof(buffer), IBV_ACCESS_REMOTE_READ, _))
        .WillOnce(Return(EOPNOTSUPP));
    EXPECT_CALL(backend, IbvRegMr(_, buffer, sizeof(buffer),
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND, _));
  }
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer, buffer, sizeof(buffer), RPMA_MR_USAGE_READ_SRC, &mr), 0);
  ASSERT_EQ(rpma_mr_dereg(&mr), 0);
  ASSERT_EQ(rpma_peer_delete(&peer), 0);
}

TEST(MrOdpTest, MrReg_EopnotsuppWithoutOdp_ReturnsProviderWithoutRetry) {
  NiceMock<MockBackend> backend;
  FakeProvider fake(&backend);
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(fake.Context(), &peer), 0);  // the mock reports no ODP
  char buffer[64];
  EXPECT_CALL(backend, IbvRegMr(_, _, _, _, _)).WillOnce(Return(EOPNOTSUPP));
  rpma_mr_local* mr = nullptr;
  EXPECT_EQ(rpma_mr_reg(peer, buffer, sizeof(buffer), RPMA_MR_USAGE_READ_SRC, &mr),
            RPMA_E_PROVIDER);
  EXPECT_EQ(mr, nullptr);
  ASSERT_EQ(rpma_peer_delete(&peer), 0);
}

TEST(MrOdpTest, MrReg_OtherErrnoOnOdpDevice_ReturnsProviderWithoutRetry) {
  NiceMock<MockBackend> backend;
  FakeProvider fake(&backend);
  EXPECT_CALL(backend, IbvQueryDeviceEx(_, _))
      .WillRepeatedly(DoAll(SetArgPointee<1>(OdpCapableAttr()), Return(0)));
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(fake.Context(), &peer), 0);
  char buffer[64];
  EXPECT_CALL(backend, IbvRegMr(_, _, _, _, _)).WillOnce(Return(ENOMEM));
  rpma_mr_local* mr = nullptr;
  EXPECT_EQ(rpma_mr_reg(peer, buffer, sizeof(buffer), RPMA_MR_USAGE_READ_SRC, &mr),
            RPMA_E_PROVIDER);
  ASSERT_EQ(rpma_peer_delete(&peer), 0);
}

TEST_F(MrTest, MrDereg_NullPtr_ReturnsInval) { EXPECT_EQ(rpma_mr_dereg(nullptr), RPMA_E_INVAL); }

// The man page is silent; librpma rejects usage bits outside the RPMA_MR_USAGE_* set, and so
// does softrpma, before it asks the provider.
TEST_F(MrTest, MrReg_UnknownUsageBits_ReturnsInval) {
  rpma_mr_local* mr = nullptr;
  EXPECT_CALL(backend_, IbvRegMr(_, _, _, _, _)).Times(0);
  EXPECT_EQ(rpma_mr_reg(peer_, buffer_, 8, RPMA_MR_USAGE_SEND | (1 << 8), &mr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_reg(peer_, buffer_, 8, -1, &mr), RPMA_E_INVAL);
  EXPECT_EQ(mr, nullptr);
}

// As librpma (mr.c): the region object is freed and the pointer cleared even when the
// provider fails to deregister.
TEST_F(MrTest, MrDereg_DeregistrationFails_ReturnsProvider_AndReleasesMr) {
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer_, buffer_, 8, RPMA_MR_USAGE_SEND, &mr), 0);
  EXPECT_CALL(backend_, IbvDeregMr(_)).WillOnce(Return(EINVAL));
  EXPECT_EQ(rpma_mr_dereg(&mr), RPMA_E_PROVIDER);
  EXPECT_EQ(mr, nullptr);
}

TEST_F(MrTest, Getters_NullArguments_ReturnInval) {
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer_, buffer_, 8, RPMA_MR_USAGE_SEND, &mr), 0);
  uint8_t desc[32];
  size_t size;
  void* ptr;
  EXPECT_EQ(rpma_mr_get_descriptor(nullptr, desc), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_descriptor(mr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_descriptor_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_descriptor_size(mr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_ptr(nullptr, &ptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_ptr(mr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_get_size(mr, nullptr), RPMA_E_INVAL);
  rpma_mr_dereg(&mr);
}

TEST_F(MrTest, Getters_ReturnRegistration) {
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer_, buffer_ + 16, 100, RPMA_MR_USAGE_SEND, &mr), 0);
  void* ptr = nullptr;
  size_t size = 0;
  ASSERT_EQ(rpma_mr_get_ptr(mr, &ptr), 0);
  EXPECT_EQ(ptr, buffer_ + 16);
  ASSERT_EQ(rpma_mr_get_size(mr, &size), 0);
  EXPECT_EQ(size, 100u);
  ASSERT_EQ(rpma_mr_get_descriptor_size(mr, &size), 0);
  EXPECT_EQ(size, 21u);
  rpma_mr_dereg(&mr);
}

TEST_F(MrTest, Descriptor_IsLittleEndian_AndRoundTrips) {
  rpma_mr_local* mr = nullptr;
  const int usage = RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
  ASSERT_EQ(rpma_mr_reg(peer_, buffer_, 200, usage, &mr), 0);
  uint8_t desc[22];
  std::memset(desc, 0xEE, sizeof(desc));
  ASSERT_EQ(rpma_mr_get_descriptor(mr, desc), 0);
  EXPECT_EQ(desc[21], 0xEE);  // 21 bytes, no more

  const uint64_t addr = reinterpret_cast<uint64_t>(buffer_);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(desc[i], static_cast<uint8_t>(addr >> (8 * i))) << i;
  EXPECT_EQ(desc[8], 200);
  for (int i = 9; i < 16; ++i) EXPECT_EQ(desc[i], 0) << i;
  // FakeProvider numbers rkeys 0x2000 + n: this test's region is the first.
  const uint32_t rkey = 0x2001;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(desc[16 + i], static_cast<uint8_t>(rkey >> (8 * i)));
  EXPECT_EQ(desc[20], usage);

  rpma_mr_remote* remote = nullptr;
  ASSERT_EQ(rpma_mr_remote_from_descriptor(desc, 21, &remote), 0);
  size_t size = 0;
  ASSERT_EQ(rpma_mr_remote_get_size(remote, &size), 0);
  EXPECT_EQ(size, 200u);
  int flush_type = 0;
  ASSERT_EQ(rpma_mr_remote_get_flush_type(remote, &flush_type), 0);
  EXPECT_EQ(flush_type, RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
  ASSERT_EQ(rpma_mr_remote_delete(&remote), 0);
  EXPECT_EQ(remote, nullptr);
  rpma_mr_dereg(&mr);
}

TEST_F(MrTest, RemoteFromDescriptor_NullArguments_ReturnInval) {
  uint8_t desc[21] = {};
  desc[20] = RPMA_MR_USAGE_READ_SRC;
  rpma_mr_remote* remote = nullptr;
  EXPECT_EQ(rpma_mr_remote_from_descriptor(nullptr, 21, &remote), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_from_descriptor(desc, 21, nullptr), RPMA_E_INVAL);
}

TEST_F(MrTest, RemoteFromDescriptor_IncompatibleSize_ReturnsInval) {
  uint8_t desc[32] = {};
  desc[20] = RPMA_MR_USAGE_READ_SRC;
  rpma_mr_remote* remote = nullptr;
  EXPECT_EQ(rpma_mr_remote_from_descriptor(desc, 20, &remote), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_from_descriptor(desc, 0, &remote), RPMA_E_INVAL);
  EXPECT_EQ(remote, nullptr);
}

// As librpma: a descriptor in a longer buffer (private data padded by the provider, 56 bytes
// on IB/RoCE) is read from its first 21 bytes.
TEST_F(MrTest, RemoteFromDescriptor_LongerBuffer_ReadsTheDescriptor) {
  uint8_t desc[56];
  std::memset(desc, 0xAB, sizeof(desc));
  desc[0] = 0x10;
  for (int i = 1; i < 8; ++i) desc[i] = 0;
  desc[8] = 64;
  for (int i = 9; i < 16; ++i) desc[i] = 0;
  desc[20] = RPMA_MR_USAGE_READ_SRC;
  rpma_mr_remote* remote = nullptr;
  ASSERT_EQ(rpma_mr_remote_from_descriptor(desc, sizeof(desc), &remote), 0);
  size_t size = 0;
  ASSERT_EQ(rpma_mr_remote_get_size(remote, &size), 0);
  EXPECT_EQ(size, 64u);
  int flush_type = -1;
  ASSERT_EQ(rpma_mr_remote_get_flush_type(remote, &flush_type), 0);
  EXPECT_EQ(flush_type, 0);
  ASSERT_EQ(rpma_mr_remote_delete(&remote), 0);
}

TEST_F(MrTest, RemoteFromDescriptor_NoUsage_ReturnsNosupp) {
  uint8_t desc[21] = {};
  rpma_mr_remote* remote = nullptr;
  EXPECT_EQ(rpma_mr_remote_from_descriptor(desc, 21, &remote), RPMA_E_NOSUPP);
  EXPECT_EQ(remote, nullptr);
}

TEST_F(MrTest, RemoteFromDescriptor_OutOfMemory_ReturnsNomem) {
  uint8_t desc[21] = {};
  desc[20] = RPMA_MR_USAGE_READ_SRC;
  rpma_mr_remote* remote = nullptr;
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_mr_remote_from_descriptor(desc, 21, &remote), RPMA_E_NOMEM);
  EXPECT_EQ(remote, nullptr);
}

TEST_F(MrTest, RemoteGetters_NullArguments_ReturnInval) {
  uint8_t desc[21] = {};
  desc[20] = RPMA_MR_USAGE_READ_SRC;
  rpma_mr_remote* remote = nullptr;
  ASSERT_EQ(rpma_mr_remote_from_descriptor(desc, 21, &remote), 0);
  size_t size;
  int flush_type;
  EXPECT_EQ(rpma_mr_remote_get_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_get_size(remote, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_get_flush_type(nullptr, &flush_type), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_get_flush_type(remote, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_remote_delete(nullptr), RPMA_E_INVAL);
  rpma_mr_remote_delete(&remote);
}

// ---- rpma_mr_advise ------------------------------------------------------------------------

class MrAdviseTest : public MrTest {
 protected:
  // A registration of buffer_[16, 16 + 128) with `usage`.
  rpma_mr_local* Reg(int usage) {
    rpma_mr_local* mr = nullptr;
    EXPECT_EQ(rpma_mr_reg(peer_, buffer_ + 16, 128, usage, &mr), 0);
    return mr;
  }
};

TEST_F(MrAdviseTest, MrAdvise_PassesPdAdviceFlagsAndRange) {
  rpma_mr_local* mr = Reg(RPMA_MR_USAGE_READ_DST);
  ibv_sge sge{};
  EXPECT_CALL(backend_, IbvAdviseMr(NotNull(), IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                                    static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH), _, 1u))
      .WillOnce(Invoke([&sge](ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge* sg_list,
                              uint32_t) {
        sge = sg_list[0];
        return 0;
      }));

  EXPECT_EQ(rpma_mr_advise(mr, 8, 100, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                           IBV_ADVISE_MR_FLAG_FLUSH),
            0);

  EXPECT_EQ(sge.addr, reinterpret_cast<uint64_t>(buffer_ + 16 + 8));
  EXPECT_EQ(sge.length, 100u);
  EXPECT_EQ(sge.lkey, 0x1001u);  // FakeProvider numbers lkeys 0x1000 + n
  rpma_mr_dereg(&mr);
}

TEST_F(MrAdviseTest, MrAdvise_WholeRegionAndEmptyRangeAtItsEnd_AreInBounds) {
  rpma_mr_local* mr = Reg(RPMA_MR_USAGE_READ_SRC);
  EXPECT_CALL(backend_, IbvAdviseMr(_, _, _, _, _)).Times(2);
  EXPECT_EQ(rpma_mr_advise(mr, 0, 128, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), 0);
  EXPECT_EQ(rpma_mr_advise(mr, 128, 0, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0), 0);
  rpma_mr_dereg(&mr);
}

TEST_F(MrAdviseTest, MrAdvise_NullMr_ReturnsInval) {
  EXPECT_CALL(backend_, IbvAdviseMr(_, _, _, _, _)).Times(0);
  EXPECT_EQ(rpma_mr_advise(nullptr, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), RPMA_E_INVAL);
}

// ERRORS: "the requested range is out of the memory registration bounds".
TEST_F(MrAdviseTest, MrAdvise_RangeOutOfBounds_ReturnsInval) {
  rpma_mr_local* mr = Reg(RPMA_MR_USAGE_READ_SRC);
  EXPECT_CALL(backend_, IbvAdviseMr(_, _, _, _, _)).Times(0);
  ScopedLogCapture capture;
  const int a = IBV_ADVISE_MR_ADVICE_PREFETCH;
  EXPECT_EQ(rpma_mr_advise(mr, 0, 129, a, 0), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_advise(mr, 120, 9, a, 0), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_advise(mr, 129, 0, a, 0), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_advise(mr, 8, SIZE_MAX, a, 0), RPMA_E_INVAL) << "offset + len overflows";
  EXPECT_EQ(rpma_mr_advise(mr, SIZE_MAX, 8, a, 0), RPMA_E_INVAL);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "out of the memory registration"))
      << capture.Dump();
  rpma_mr_dereg(&mr);
}

TEST_F(MrAdviseTest, MrAdvise_RangeLongerThanOneSge_ReturnsInval) {
  // The mock provider never touches the memory, so a region this large is only numbers.
  const size_t huge = size_t{1} << 33;
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer_, buffer_, huge, RPMA_MR_USAGE_READ_SRC, &mr), 0);
  EXPECT_CALL(backend_, IbvAdviseMr(_, _, _, _, _)).Times(0);
  EXPECT_EQ(rpma_mr_advise(mr, 0, (size_t{1} << 32), IBV_ADVISE_MR_ADVICE_PREFETCH, 0),
            RPMA_E_INVAL);
  rpma_mr_dereg(&mr);
}

// ERRORS: "the memory registration usage does not allow the specific advice".
TEST_F(MrAdviseTest, MrAdvise_PrefetchWriteOnNonWritableUsage_ReturnsInval) {
  const int not_writable[] = {RPMA_MR_USAGE_READ_SRC, RPMA_MR_USAGE_SEND,
                              RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
                              RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
                              RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_SEND};
  EXPECT_CALL(backend_, IbvAdviseMr(_, _, _, _, _)).Times(0);
  for (int usage : not_writable) {
    rpma_mr_local* mr = Reg(usage);
    EXPECT_EQ(rpma_mr_advise(mr, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0), RPMA_E_INVAL)
        << "usage 0x" << std::hex << usage;
    rpma_mr_dereg(&mr);
  }
}

TEST_F(MrAdviseTest, MrAdvise_PrefetchWriteOnWritableUsage_IsPassedOn) {
  // WRITE_SRC is registered with IBV_ACCESS_LOCAL_WRITE, as librpma does.
  const int writable[] = {RPMA_MR_USAGE_WRITE_DST, RPMA_MR_USAGE_READ_DST, RPMA_MR_USAGE_RECV,
                          RPMA_MR_USAGE_WRITE_SRC, RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST};
  EXPECT_CALL(backend_, IbvAdviseMr(_, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, _, _, _))
      .Times(5);
  for (int usage : writable) {
    rpma_mr_local* mr = Reg(usage);
    EXPECT_EQ(rpma_mr_advise(mr, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0), 0)
        << "usage 0x" << std::hex << usage;
    rpma_mr_dereg(&mr);
  }
}

TEST_F(MrAdviseTest, MrAdvise_UnknownAdvice_ReturnsInval) {
  rpma_mr_local* mr = Reg(RPMA_MR_USAGE_READ_DST);
  EXPECT_CALL(backend_, IbvAdviseMr(_, _, _, _, _)).Times(0);
  EXPECT_EQ(rpma_mr_advise(mr, 0, 8, 42, 0), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_advise(mr, 0, 8, -1, 0), RPMA_E_INVAL);
  rpma_mr_dereg(&mr);
}

// ERRORS: "the flags are invalid" (IBV_ADVISE_MR_FLAG_FLUSH is the only flag ibv_advise_mr has).
TEST_F(MrAdviseTest, MrAdvise_InvalidFlags_ReturnsInval) {
  rpma_mr_local* mr = Reg(RPMA_MR_USAGE_READ_DST);
  EXPECT_CALL(backend_, IbvAdviseMr(_, _, _, _, _)).Times(0);
  const int a = IBV_ADVISE_MR_ADVICE_PREFETCH;
  EXPECT_EQ(rpma_mr_advise(mr, 0, 8, a, 2), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_advise(mr, 0, 8, a, IBV_ADVISE_MR_FLAG_FLUSH | 0x80000000u), RPMA_E_INVAL);
  rpma_mr_dereg(&mr);
}

// ERRORS: "the operation is not supported by the system" (the provider's EOPNOTSUPP).
TEST_F(MrAdviseTest, MrAdvise_ProviderEopnotsupp_ReturnsNosupp) {
  rpma_mr_local* mr = Reg(RPMA_MR_USAGE_READ_DST);
  EXPECT_CALL(backend_, IbvAdviseMr(_, _, _, _, _)).WillOnce(Return(EOPNOTSUPP));
  ScopedLogCapture capture;
  EXPECT_EQ(rpma_mr_advise(mr, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), RPMA_E_NOSUPP);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "ibv_advise_mr() failed")) << capture.Dump();
  rpma_mr_dereg(&mr);
}

TEST_F(MrAdviseTest, MrAdvise_ProviderEfaultOrEinval_ReturnsInval) {
  rpma_mr_local* mr = Reg(RPMA_MR_USAGE_READ_DST);
  EXPECT_CALL(backend_, IbvAdviseMr(_, _, _, _, _))
      .WillOnce(Return(EFAULT))
      .WillOnce(Return(EINVAL));
  EXPECT_EQ(rpma_mr_advise(mr, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), RPMA_E_INVAL);
  EXPECT_EQ(rpma_mr_advise(mr, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), RPMA_E_INVAL);
  rpma_mr_dereg(&mr);
}

// ERRORS: "ibv_mr_advise(3) failed for other errors".
TEST_F(MrAdviseTest, MrAdvise_ProviderOtherFailure_ReturnsProvider) {
  rpma_mr_local* mr = Reg(RPMA_MR_USAGE_READ_DST);
  EXPECT_CALL(backend_, IbvAdviseMr(_, _, _, _, _))
      .WillOnce(Return(EIO))
      .WillOnce(Return(ENOMEM))
      .WillOnce(Return(softrpma::kNoErrno));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rpma_mr_advise(mr, 0, 8, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), RPMA_E_PROVIDER) << i;
  }
  rpma_mr_dereg(&mr);
}

}  // namespace
