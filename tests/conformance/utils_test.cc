// Conformance of rpma_utils_get_ibv_context(3) and rpma_utils_ibv_context_is_odp_capable(3):
// one test per ERRORS line (rows of rpma-errors.tsv), through the public API on the simulated
// NIC. Provider failures are faults of the named rdma_cm / verbs call.

#include <string>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/conformance_test.h"

namespace softrpma::conformance {
namespace {

class UtilsTest : public ConformanceTest {
 protected:
  // The call of each rpma_utils_get_ibv_context test, and its check that the failure left
  // nothing behind: no output, every id destroyed and every addrinfo freed (when the fault is
  // on a provider call; a malloc fault fails calls the counters cannot tell from successes),
  // and the same call succeeds right after.
  void ExpectGetIbvContextFails(rpma_util_ibv_context_type type, const char* fault_spec,
                                const char* fault_point, int expected) {
    ibv_context* dev = nullptr;
    {
      ARM_FAULTS(faults, fault_spec);
      EXPECT_RPMA(rpma_utils_get_ibv_context(kAddress, type, &dev), expected);
      EXPECT_EQ(FaultInjections(fault_point), 1u);
      if (std::string(fault_point) != "malloc") {
        EXPECT_TRUE(AllReleased("rdma_create_id", "rdma_destroy_id"));
        EXPECT_TRUE(AllReleased("rdma_getaddrinfo", "rdma_freeaddrinfo"));
      }
    }
    EXPECT_EQ(dev, nullptr);
    EXPECT_RPMA(rpma_utils_get_ibv_context(kAddress, type, &dev), 0);
    EXPECT_NE(dev, nullptr);
  }
};

RPMA_TEST_F(UtilsTest, UtilsGetIbvContext_AddrOrCtxPtrNullOrTypeUnknown_ReturnsInval,
            RPMA_ROW("rpma_utils_get_ibv_context", "RPMA_E_INVAL",
                     "addr or ibv_ctx_ptr is NULL or type is unknown")) {
  ibv_context* dev = nullptr;
  EXPECT_RPMA(rpma_utils_get_ibv_context(nullptr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_utils_get_ibv_context(kAddress, RPMA_UTIL_IBV_CONTEXT_LOCAL, nullptr),
              RPMA_E_INVAL);
  EXPECT_RPMA(
      rpma_utils_get_ibv_context(kAddress, static_cast<rpma_util_ibv_context_type>(7), &dev),
      RPMA_E_INVAL);
  EXPECT_EQ(dev, nullptr);
}

RPMA_TEST_F(UtilsTest, UtilsGetIbvContext_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_utils_get_ibv_context", "RPMA_E_NOMEM", "out of memory")) {
  ExpectGetIbvContextFails(RPMA_UTIL_IBV_CONTEXT_LOCAL, "malloc:fail=ENOMEM:nth=1", "malloc",
                           RPMA_E_NOMEM);
}

RPMA_TEST_F(UtilsTest, UtilsGetIbvContext_RdmaGetaddrinfoFails_ReturnsProvider,
            RPMA_ROW("rpma_utils_get_ibv_context", "RPMA_E_PROVIDER",
                     "rdma_getaddrinfo(), rdma_create_id(), rdma_bind_addr() or "
                     "rdma_resolve_addr() failed")) {
  ExpectGetIbvContextFails(RPMA_UTIL_IBV_CONTEXT_LOCAL, "rdma_getaddrinfo:fail=EIO:nth=1",
                           "rdma_getaddrinfo", RPMA_E_PROVIDER);
}

RPMA_TEST_F(UtilsTest, UtilsGetIbvContext_RdmaCreateIdFails_ReturnsProvider,
            RPMA_ROW("rpma_utils_get_ibv_context", "RPMA_E_PROVIDER",
                     "rdma_getaddrinfo(), rdma_create_id(), rdma_bind_addr() or "
                     "rdma_resolve_addr() failed")) {
  ExpectGetIbvContextFails(RPMA_UTIL_IBV_CONTEXT_LOCAL, "rdma_create_id:fail=EIO:nth=1",
                           "rdma_create_id", RPMA_E_PROVIDER);
}

RPMA_TEST_F(UtilsTest, UtilsGetIbvContext_LocalRdmaBindAddrFails_ReturnsProvider,
            RPMA_ROW("rpma_utils_get_ibv_context", "RPMA_E_PROVIDER",
                     "rdma_getaddrinfo(), rdma_create_id(), rdma_bind_addr() or "
                     "rdma_resolve_addr() failed")) {
  ExpectGetIbvContextFails(RPMA_UTIL_IBV_CONTEXT_LOCAL, "rdma_bind_addr:fail=EADDRNOTAVAIL:nth=1",
                           "rdma_bind_addr", RPMA_E_PROVIDER);
}

RPMA_TEST_F(UtilsTest, UtilsGetIbvContext_RemoteRdmaResolveAddrFails_ReturnsProvider,
            RPMA_ROW("rpma_utils_get_ibv_context", "RPMA_E_PROVIDER",
                     "rdma_getaddrinfo(), rdma_create_id(), rdma_bind_addr() or "
                     "rdma_resolve_addr() failed")) {
  ExpectGetIbvContextFails(RPMA_UTIL_IBV_CONTEXT_REMOTE,
                           "rdma_resolve_addr:fail=EHOSTUNREACH:nth=1", "rdma_resolve_addr",
                           RPMA_E_PROVIDER);
}

RPMA_TEST_F(UtilsTest, UtilsIbvContextIsOdpCapable_CtxOrOutputNull_ReturnsInval,
            RPMA_ROW("rpma_utils_ibv_context_is_odp_capable", "RPMA_E_INVAL",
                     "ibv_ctx or is_odp_capable is NULL")) {
  ibv_context* dev = nullptr;
  ASSERT_RPMA(GetLocalDevice(&dev), 0);
  int is_odp_capable = -1;
  EXPECT_RPMA(rpma_utils_ibv_context_is_odp_capable(nullptr, &is_odp_capable), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_utils_ibv_context_is_odp_capable(dev, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(is_odp_capable, -1);
}

RPMA_TEST_F(UtilsTest, UtilsIbvContextIsOdpCapable_QueryDeviceExFails_ReturnsProvider,
            RPMA_ROW("rpma_utils_ibv_context_is_odp_capable", "RPMA_E_PROVIDER",
                     "ibv_query_device_ex() failed")) {
  ibv_context* dev = nullptr;
  ASSERT_RPMA(GetLocalDevice(&dev), 0);
  int is_odp_capable = -1;
  {
    ARM_FAULTS(faults, "ibv_query_device_ex:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_utils_ibv_context_is_odp_capable(dev, &is_odp_capable), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_query_device_ex"), 1u);
  }
  EXPECT_EQ(is_odp_capable, -1);
  // The context is still usable.
  EXPECT_RPMA(rpma_utils_ibv_context_is_odp_capable(dev, &is_odp_capable), 0);
  EXPECT_EQ(is_odp_capable, 0);
}

}  // namespace
}  // namespace softrpma::conformance
