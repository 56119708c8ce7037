// Tests of rpma_utils_get_ibv_context(3) and rpma_utils_ibv_context_is_odp_capable(3).

#include <netdb.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "api/testing/log_capture.h"
#include "api/testing/mock_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/backend_registry.h"

namespace {

using softrpma::testing::FakeProvider;
using softrpma::testing::MockBackend;
using softrpma::testing::ScopedLogCapture;
using ::testing::_;
using ::testing::AllOf;
using ::testing::DoAll;
using ::testing::Field;
using ::testing::Invoke;
using ::testing::NiceMock;
using ::testing::Pointee;
using ::testing::Return;

TEST(GetIbvContextTest, NullAddr_ReturnsInval) {
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context(nullptr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
            RPMA_E_INVAL);
}

TEST(GetIbvContextTest, NullCtxPtr_ReturnsInval) {
  EXPECT_EQ(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, nullptr),
            RPMA_E_INVAL);
}

TEST(GetIbvContextTest, UnknownType_ReturnsInval) {
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("127.0.0.1", static_cast<rpma_util_ibv_context_type>(2),
                                       &ctx),
            RPMA_E_INVAL);
}

TEST(GetIbvContextTest, BogusBackend_ReturnsInvalAndLogsTheValue) {
  ASSERT_EQ(setenv("RPMA_BACKEND", "bogus", 1), 0);
  ScopedLogCapture capture;
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
            RPMA_E_INVAL);
  EXPECT_EQ(ctx, nullptr);
  unsetenv("RPMA_BACKEND");
  ASSERT_EQ(capture.logs().size(), 1u) << capture.Dump();
  EXPECT_EQ(capture.logs()[0].level, RPMA_LOG_LEVEL_ERROR);
  EXPECT_EQ(capture.logs()[0].function, "rpma_utils_get_ibv_context");
  EXPECT_NE(capture.logs()[0].message.find("bogus"), std::string::npos) << capture.Dump();
}

// The real-NIC backend on a machine without an RDMA device (as in CI): the documented
// RPMA_E_PROVIDER, and a log line that says why and how to select the simulated NIC.
TEST(GetIbvContextTest, IbverbsWithoutDevice_ReturnsProviderAndSaysHowToUseTheSim) {
  int num_devices = 0;
  ibv_device** devices = ibv_get_device_list(&num_devices);
  if (devices != nullptr) ibv_free_device_list(devices);
  if (num_devices > 0) GTEST_SKIP() << "this machine has an RDMA device";

  ASSERT_EQ(setenv("RPMA_BACKEND", "ibverbs", 1), 0);
  ScopedLogCapture capture;
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
            RPMA_E_PROVIDER);
  EXPECT_EQ(ctx, nullptr);
  unsetenv("RPMA_BACKEND");
  ASSERT_EQ(capture.logs().size(), 1u) << capture.Dump();
  EXPECT_EQ(capture.logs()[0].level, RPMA_LOG_LEVEL_ERROR);
  EXPECT_NE(capture.logs()[0].message.find("no RDMA device"), std::string::npos)
      << capture.Dump();
  EXPECT_NE(capture.logs()[0].message.find("RPMA_BACKEND=sim"), std::string::npos)
      << capture.Dump();
}

class GetIbvContextMockTest : public ::testing::Test {
 protected:
  NiceMock<MockBackend> backend_;
  FakeProvider fake_{&backend_};
  softrpma::ScopedBackendOverride override_{&backend_};
};

TEST_F(GetIbvContextMockTest, Local_BindsPassiveAddress_AndRegistersContext) {
  EXPECT_CALL(backend_,
              RdmaGetaddrinfo(_, nullptr,
                              Pointee(AllOf(Field(&rdma_addrinfo::ai_flags, RAI_PASSIVE),
                                            Field(&rdma_addrinfo::ai_qp_type, IBV_QPT_RC))),
                              _));
  EXPECT_CALL(backend_, RdmaCreateId(nullptr, _, _, RDMA_PS_TCP));
  EXPECT_CALL(backend_, RdmaBindAddr(_, _));
  EXPECT_CALL(backend_, RdmaResolveAddr(_, _, _, _)).Times(0);
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  EXPECT_CALL(backend_, RdmaFreeaddrinfo(_));
  ibv_context* ctx = nullptr;
  ASSERT_EQ(rpma_utils_get_ibv_context("10.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx), 0);
  EXPECT_EQ(ctx, fake_.Context());
  EXPECT_EQ(softrpma::BackendForContext(ctx), &backend_);
}

TEST_F(GetIbvContextMockTest, Remote_ResolvesWithDefaultTimeout) {
  EXPECT_CALL(backend_, RdmaGetaddrinfo(_, nullptr, Pointee(Field(&rdma_addrinfo::ai_flags, 0)),
                                        _));
  EXPECT_CALL(backend_, RdmaResolveAddr(_, _, _, RPMA_DEFAULT_TIMEOUT_MS));
  EXPECT_CALL(backend_, RdmaBindAddr(_, _)).Times(0);
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  EXPECT_CALL(backend_, RdmaFreeaddrinfo(_));
  ibv_context* ctx = nullptr;
  ASSERT_EQ(rpma_utils_get_ibv_context("10.0.0.2", RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx), 0);
  EXPECT_EQ(ctx, fake_.Context());
}

TEST_F(GetIbvContextMockTest, GetaddrinfoFails_ReturnsProviderAndLogsErrno) {
  ScopedLogCapture capture;
  EXPECT_CALL(backend_, RdmaGetaddrinfo(_, _, _, _)).WillOnce(Return(EADDRNOTAVAIL));
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("10.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
            RPMA_E_PROVIDER);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "rdma_getaddrinfo() failed"))
      << capture.Dump();
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "errno 99")) << capture.Dump();
}

// As librpma: a failed name resolution is logged with gai_strerror(3)'s text.
TEST_F(GetIbvContextMockTest, GetaddrinfoResolverFails_ReturnsProviderAndLogsGaiText) {
  ScopedLogCapture capture;
  EXPECT_CALL(backend_, RdmaGetaddrinfo(_, _, _, _))
      .WillOnce(Return(softrpma::GaiError(EAI_NONAME)));
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("no.such.host", RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx),
            RPMA_E_PROVIDER);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, gai_strerror(EAI_NONAME))) << capture.Dump();
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "getaddrinfo error")) << capture.Dump();
}

TEST_F(GetIbvContextMockTest, CreateIdFails_ReturnsProvider_AndFreesAddrinfo) {
  EXPECT_CALL(backend_, RdmaCreateId(_, _, _, _)).WillOnce(Return(EIO));
  EXPECT_CALL(backend_, RdmaFreeaddrinfo(_));
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("10.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
            RPMA_E_PROVIDER);
}

// "out of memory": the lookup's allocations are the provider's.
TEST_F(GetIbvContextMockTest, CreateIdOutOfMemory_ReturnsNomem_AndFreesAddrinfo) {
  EXPECT_CALL(backend_, RdmaCreateId(_, _, _, _)).WillOnce(Return(ENOMEM));
  EXPECT_CALL(backend_, RdmaFreeaddrinfo(_));
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("10.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
            RPMA_E_NOMEM);
}

TEST_F(GetIbvContextMockTest, GetaddrinfoOutOfMemory_ReturnsNomem) {
  EXPECT_CALL(backend_, RdmaGetaddrinfo(_, _, _, _)).WillOnce(Return(ENOMEM));
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("10.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
            RPMA_E_NOMEM);
  EXPECT_EQ(ctx, nullptr);
}

TEST_F(GetIbvContextMockTest, BindFails_ReturnsProvider_AndDestroysId) {
  EXPECT_CALL(backend_, RdmaBindAddr(_, _)).WillOnce(Return(EADDRNOTAVAIL));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  EXPECT_CALL(backend_, RdmaFreeaddrinfo(_));
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("10.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
            RPMA_E_PROVIDER);
  EXPECT_EQ(ctx, nullptr);
}

TEST_F(GetIbvContextMockTest, ResolveFails_ReturnsProvider) {
  EXPECT_CALL(backend_, RdmaResolveAddr(_, _, _, _)).WillOnce(Return(EHOSTUNREACH));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("10.0.0.2", RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx),
            RPMA_E_PROVIDER);
}

TEST_F(GetIbvContextMockTest, NoDeviceOnId_ReturnsProvider) {
  EXPECT_CALL(backend_, RdmaBindAddr(_, _)).WillOnce(Return(0));  // leaves id->verbs NULL
  ibv_context* ctx = nullptr;
  EXPECT_EQ(rpma_utils_get_ibv_context("10.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx),
            RPMA_E_PROVIDER);
  EXPECT_EQ(ctx, nullptr);
}

TEST(IsOdpCapableTest, NullArguments_ReturnInval) {
  int capable;
  ibv_context ctx{};
  EXPECT_EQ(rpma_utils_ibv_context_is_odp_capable(nullptr, &capable), RPMA_E_INVAL);
  EXPECT_EQ(rpma_utils_ibv_context_is_odp_capable(&ctx, nullptr), RPMA_E_INVAL);
}

TEST(IsOdpCapableTest, QueryFails_ReturnsProvider) {
  NiceMock<MockBackend> backend;
  FakeProvider fake(&backend);
  EXPECT_CALL(backend, IbvQueryDeviceEx(fake.Context(), _)).WillOnce(Return(EOPNOTSUPP));
  int capable = 7;
  EXPECT_EQ(rpma_utils_ibv_context_is_odp_capable(fake.Context(), &capable), RPMA_E_PROVIDER);
}

TEST(IsOdpCapableTest, ReportsRcReadWriteOdp) {
  NiceMock<MockBackend> backend;
  FakeProvider fake(&backend);
  auto with_caps = [](uint64_t general, uint32_t rc) {
    return Invoke([general, rc](ibv_context*, ibv_device_attr_ex* attr) {
      attr->odp_caps.general_caps = general;
      attr->odp_caps.per_transport_caps.rc_odp_caps = rc;
      return 0;
    });
  };
  EXPECT_CALL(backend, IbvQueryDeviceEx(_, _))
      .WillOnce(with_caps(IBV_ODP_SUPPORT, IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_WRITE))
      .WillOnce(with_caps(IBV_ODP_SUPPORT, IBV_ODP_SUPPORT_READ))
      .WillOnce(with_caps(0, IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_WRITE));
  int capable = -1;
  ASSERT_EQ(rpma_utils_ibv_context_is_odp_capable(fake.Context(), &capable), 0);
  EXPECT_EQ(capable, 1);
  ASSERT_EQ(rpma_utils_ibv_context_is_odp_capable(fake.Context(), &capable), 0);
  EXPECT_EQ(capable, 0);
  ASSERT_EQ(rpma_utils_ibv_context_is_odp_capable(fake.Context(), &capable), 0);
  EXPECT_EQ(capable, 0);
}

}  // namespace
