// Conformance of the connection configuration (rpma_conn_cfg_*(3)): one test per ERRORS line
// (rows of rpma-errors.tsv), through the public API. A rejected call leaves the configuration
// as it was.

#include <cstdint>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/conformance_test.h"

namespace softrpma::conformance {
namespace {

class ConnCfgTest : public ConformanceTest {
 protected:
  void SetUp() override {
    ConformanceTest::SetUp();
    ASSERT_RPMA(rpma_conn_cfg_new(&cfg_), 0);
  }
  void TearDown() override {
    EXPECT_RPMA(rpma_conn_cfg_delete(&cfg_), 0);
    ConformanceTest::TearDown();
  }

  rpma_conn_cfg* cfg_ = nullptr;
};

RPMA_TEST_F(ConnCfgTest, ConnCfgNew_CfgPtrNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_new", "RPMA_E_INVAL", "cfg_ptr is NULL")) {
  EXPECT_RPMA(rpma_conn_cfg_new(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgNew_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_conn_cfg_new", "RPMA_E_NOMEM", "out of memory")) {
  rpma_conn_cfg* cfg = nullptr;
  {
    ARM_FAULTS(faults, "malloc:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rpma_conn_cfg_new(&cfg), RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
  }
  EXPECT_EQ(cfg, nullptr);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgDelete_CfgPtrNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_delete", "RPMA_E_INVAL", "cfg_ptr is NULL")) {
  EXPECT_RPMA(rpma_conn_cfg_delete(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgSetTimeout_CfgNullOrTimeoutNegative_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_set_timeout", "RPMA_E_INVAL",
                     "cfg is NULL or timeout_ms < 0")) {
  ASSERT_RPMA(rpma_conn_cfg_set_timeout(cfg_, 700), 0);
  EXPECT_RPMA(rpma_conn_cfg_set_timeout(nullptr, 700), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_cfg_set_timeout(cfg_, -1), RPMA_E_INVAL);
  int timeout_ms = 0;
  ASSERT_RPMA(rpma_conn_cfg_get_timeout(cfg_, &timeout_ms), 0);
  EXPECT_EQ(timeout_ms, 700);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgGetTimeout_CfgOrTimeoutNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_get_timeout", "RPMA_E_INVAL", "cfg or timeout_ms is NULL")) {
  int timeout_ms = 12345;
  EXPECT_RPMA(rpma_conn_cfg_get_timeout(nullptr, &timeout_ms), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_cfg_get_timeout(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(timeout_ms, 12345);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgSetCqSize_CfgNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_set_cq_size", "RPMA_E_INVAL", "cfg is NULL")) {
  EXPECT_RPMA(rpma_conn_cfg_set_cq_size(nullptr, 20), RPMA_E_INVAL);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgGetCqSize_CfgOrCqSizeNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_get_cq_size", "RPMA_E_INVAL", "cfg or cq_size is NULL")) {
  uint32_t size = 12345;
  EXPECT_RPMA(rpma_conn_cfg_get_cq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_cfg_get_cq_size(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(size, 12345u);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgSetComplChannel_CfgNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_set_compl_channel", "RPMA_E_INVAL", "cfg is NULL")) {
  EXPECT_RPMA(rpma_conn_cfg_set_compl_channel(nullptr, true), RPMA_E_INVAL);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgGetComplChannel_CfgOrSharedNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_get_compl_channel", "RPMA_E_INVAL", "cfg or shared is NULL")) {
  bool shared = true;
  EXPECT_RPMA(rpma_conn_cfg_get_compl_channel(nullptr, &shared), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_cfg_get_compl_channel(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_TRUE(shared);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgSetRcqSize_CfgNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_set_rcq_size", "RPMA_E_INVAL", "cfg is NULL")) {
  EXPECT_RPMA(rpma_conn_cfg_set_rcq_size(nullptr, 20), RPMA_E_INVAL);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgGetRcqSize_CfgOrRcqSizeNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_get_rcq_size", "RPMA_E_INVAL", "cfg or rcq_size is NULL")) {
  uint32_t size = 12345;
  EXPECT_RPMA(rpma_conn_cfg_get_rcq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_cfg_get_rcq_size(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(size, 12345u);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgSetSqSize_CfgNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_set_sq_size", "RPMA_E_INVAL", "cfg is NULL")) {
  EXPECT_RPMA(rpma_conn_cfg_set_sq_size(nullptr, 20), RPMA_E_INVAL);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgGetSqSize_CfgOrSqSizeNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_get_sq_size", "RPMA_E_INVAL", "cfg or sq_size is NULL")) {
  uint32_t size = 12345;
  EXPECT_RPMA(rpma_conn_cfg_get_sq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_cfg_get_sq_size(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(size, 12345u);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgSetRqSize_CfgNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_set_rq_size", "RPMA_E_INVAL", "cfg is NULL")) {
  EXPECT_RPMA(rpma_conn_cfg_set_rq_size(nullptr, 20), RPMA_E_INVAL);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgGetRqSize_CfgOrRqSizeNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_get_rq_size", "RPMA_E_INVAL", "cfg or rq_size is NULL")) {
  uint32_t size = 12345;
  EXPECT_RPMA(rpma_conn_cfg_get_rq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_cfg_get_rq_size(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(size, 12345u);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgSetSrq_CfgNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_set_srq", "RPMA_E_INVAL", "cfg is NULL")) {
  EXPECT_RPMA(rpma_conn_cfg_set_srq(nullptr, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(ConnCfgTest, ConnCfgGetSrq_CfgOrSrqPtrNull_ReturnsInval,
            RPMA_ROW("rpma_conn_cfg_get_srq", "RPMA_E_INVAL", "cfg or srq_ptr is NULL")) {
  rpma_srq* srq = reinterpret_cast<rpma_srq*>(this);
  EXPECT_RPMA(rpma_conn_cfg_get_srq(nullptr, &srq), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_cfg_get_srq(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(srq, reinterpret_cast<rpma_srq*>(this));
}

}  // namespace
}  // namespace softrpma::conformance
