// Tests of rpma_conn_cfg_*(3) and rpma_srq_cfg_*(3).

#include <cstdint>

#include "api/testing/alloc_failure.h"
#include "gtest/gtest.h"
#include "librpma.h"

namespace {

using softrpma::testing::ScopedAllocFailure;

class ConnCfgTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(rpma_conn_cfg_new(&cfg_), 0); }
  void TearDown() override { rpma_conn_cfg_delete(&cfg_); }
  rpma_conn_cfg* cfg_ = nullptr;
};

TEST(ConnCfgNewTest, ConnCfgNew_NullPtr_ReturnsInval) {
  EXPECT_EQ(rpma_conn_cfg_new(nullptr), RPMA_E_INVAL);
}

TEST(ConnCfgNewTest, ConnCfgNew_OutOfMemory_ReturnsNomem) {
  rpma_conn_cfg* cfg = nullptr;
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_conn_cfg_new(&cfg), RPMA_E_NOMEM);
  EXPECT_EQ(cfg, nullptr);
}

TEST(ConnCfgNewTest, ConnCfgDelete_NullPtr_ReturnsInval) {
  EXPECT_EQ(rpma_conn_cfg_delete(nullptr), RPMA_E_INVAL);
}

TEST(ConnCfgNewTest, ConnCfgDelete_SetsNull) {
  rpma_conn_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_conn_cfg_new(&cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_delete(&cfg), 0);
  EXPECT_EQ(cfg, nullptr);
  EXPECT_EQ(rpma_conn_cfg_delete(&cfg), 0);  // deleting nothing
}

TEST_F(ConnCfgTest, ConnCfgNew_HasManPageDefaults) {
  int timeout_ms = -1;
  uint32_t size = 12345;
  bool shared = true;
  rpma_srq* srq = reinterpret_cast<rpma_srq*>(0x1);
  ASSERT_EQ(rpma_conn_cfg_get_timeout(cfg_, &timeout_ms), 0);
  EXPECT_EQ(timeout_ms, 1000);
  ASSERT_EQ(rpma_conn_cfg_get_cq_size(cfg_, &size), 0);
  EXPECT_EQ(size, 10u);
  ASSERT_EQ(rpma_conn_cfg_get_rcq_size(cfg_, &size), 0);
  EXPECT_EQ(size, 0u);
  ASSERT_EQ(rpma_conn_cfg_get_sq_size(cfg_, &size), 0);
  EXPECT_EQ(size, 10u);
  ASSERT_EQ(rpma_conn_cfg_get_rq_size(cfg_, &size), 0);
  EXPECT_EQ(size, 10u);
  ASSERT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, &shared), 0);
  EXPECT_FALSE(shared);
  ASSERT_EQ(rpma_conn_cfg_get_srq(cfg_, &srq), 0);
  EXPECT_EQ(srq, nullptr);
}

TEST_F(ConnCfgTest, SetTimeout_NullCfg_ReturnsInval) {
  EXPECT_EQ(rpma_conn_cfg_set_timeout(nullptr, 5), RPMA_E_INVAL);
}

TEST_F(ConnCfgTest, SetTimeout_Negative_ReturnsInval) {
  EXPECT_EQ(rpma_conn_cfg_set_timeout(cfg_, -1), RPMA_E_INVAL);
  int timeout_ms = 0;
  ASSERT_EQ(rpma_conn_cfg_get_timeout(cfg_, &timeout_ms), 0);
  EXPECT_EQ(timeout_ms, 1000);
}

TEST_F(ConnCfgTest, Timeout_RoundTrips) {
  for (int value : {0, 1, 2500, 1 << 30}) {
    ASSERT_EQ(rpma_conn_cfg_set_timeout(cfg_, value), 0);
    int got = -1;
    ASSERT_EQ(rpma_conn_cfg_get_timeout(cfg_, &got), 0);
    EXPECT_EQ(got, value);
  }
}

TEST_F(ConnCfgTest, GetTimeout_NullArguments_ReturnInval) {
  int timeout_ms;
  EXPECT_EQ(rpma_conn_cfg_get_timeout(nullptr, &timeout_ms), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_timeout(cfg_, nullptr), RPMA_E_INVAL);
}

// The four queue sizes share one shape: set with NULL cfg -> INVAL; get with either NULL ->
// INVAL; set then get round-trips.
struct SizeAccessors {
  const char* name;
  int (*set)(rpma_conn_cfg*, uint32_t);
  int (*get)(const rpma_conn_cfg*, uint32_t*);
};

class ConnCfgSizeTest : public ConnCfgTest, public ::testing::WithParamInterface<SizeAccessors> {};

TEST_P(ConnCfgSizeTest, Set_NullCfg_ReturnsInval) {
  EXPECT_EQ(GetParam().set(nullptr, 5), RPMA_E_INVAL);
}

TEST_P(ConnCfgSizeTest, Get_NullArguments_ReturnInval) {
  uint32_t size;
  EXPECT_EQ(GetParam().get(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(GetParam().get(cfg_, nullptr), RPMA_E_INVAL);
}

TEST_P(ConnCfgSizeTest, Size_RoundTrips) {
  for (uint32_t value : {0u, 1u, 77u, UINT32_MAX}) {
    ASSERT_EQ(GetParam().set(cfg_, value), 0);
    uint32_t got = value + 1;
    ASSERT_EQ(GetParam().get(cfg_, &got), 0);
    EXPECT_EQ(got, value);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllSizes, ConnCfgSizeTest,
    ::testing::Values(
        SizeAccessors{"cq", rpma_conn_cfg_set_cq_size, rpma_conn_cfg_get_cq_size},
        SizeAccessors{"rcq", rpma_conn_cfg_set_rcq_size, rpma_conn_cfg_get_rcq_size},
        SizeAccessors{"sq", rpma_conn_cfg_set_sq_size, rpma_conn_cfg_get_sq_size},
        SizeAccessors{"rq", rpma_conn_cfg_set_rq_size, rpma_conn_cfg_get_rq_size}),
    [](const ::testing::TestParamInfo<SizeAccessors>& info) { return info.param.name; });

TEST_F(ConnCfgTest, SetComplChannel_NullCfg_ReturnsInval) {
  EXPECT_EQ(rpma_conn_cfg_set_compl_channel(nullptr, true), RPMA_E_INVAL);
}

TEST_F(ConnCfgTest, GetComplChannel_NullArguments_ReturnInval) {
  bool shared;
  EXPECT_EQ(rpma_conn_cfg_get_compl_channel(nullptr, &shared), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, nullptr), RPMA_E_INVAL);
}

TEST_F(ConnCfgTest, ComplChannel_RoundTrips) {
  for (bool value : {true, false}) {
    ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg_, value), 0);
    bool got = !value;
    ASSERT_EQ(rpma_conn_cfg_get_compl_channel(cfg_, &got), 0);
    EXPECT_EQ(got, value);
  }
}

TEST_F(ConnCfgTest, SetSrq_NullCfg_ReturnsInval) {
  EXPECT_EQ(rpma_conn_cfg_set_srq(nullptr, reinterpret_cast<rpma_srq*>(0x1234)), RPMA_E_INVAL);
}

// The man page is silent; librpma rejects a NULL srq, and the configuration keeps its value.
TEST_F(ConnCfgTest, SetSrq_NullSrq_ReturnsInvalAsUpstream) {
  rpma_srq* value = reinterpret_cast<rpma_srq*>(0x1234);
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, value), 0);
  EXPECT_EQ(rpma_conn_cfg_set_srq(cfg_, nullptr), RPMA_E_INVAL);
  rpma_srq* got = nullptr;
  ASSERT_EQ(rpma_conn_cfg_get_srq(cfg_, &got), 0);
  EXPECT_EQ(got, value);
}

TEST_F(ConnCfgTest, GetSrq_NullArguments_ReturnInval) {
  rpma_srq* srq;
  EXPECT_EQ(rpma_conn_cfg_get_srq(nullptr, &srq), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_cfg_get_srq(cfg_, nullptr), RPMA_E_INVAL);
}

TEST_F(ConnCfgTest, Srq_RoundTrips) {
  rpma_srq* value = reinterpret_cast<rpma_srq*>(0x1234);
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, value), 0);
  rpma_srq* got = nullptr;
  ASSERT_EQ(rpma_conn_cfg_get_srq(cfg_, &got), 0);
  EXPECT_EQ(got, value);
}

// ---- rpma_srq_cfg ---------------------------------------------------------------------------

TEST(SrqCfgTest, SrqCfgNew_NullPtr_ReturnsInval) {
  EXPECT_EQ(rpma_srq_cfg_new(nullptr), RPMA_E_INVAL);
}

TEST(SrqCfgTest, SrqCfgNew_OutOfMemory_ReturnsNomem) {
  rpma_srq_cfg* cfg = nullptr;
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_srq_cfg_new(&cfg), RPMA_E_NOMEM);
  EXPECT_EQ(cfg, nullptr);
}

TEST(SrqCfgTest, SrqCfgDelete_NullPtr_ReturnsInval) {
  EXPECT_EQ(rpma_srq_cfg_delete(nullptr), RPMA_E_INVAL);
}

TEST(SrqCfgTest, Defaults_AndRoundTrips) {
  rpma_srq_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_srq_cfg_new(&cfg), 0);
  uint32_t size = 0;
  ASSERT_EQ(rpma_srq_cfg_get_rq_size(cfg, &size), 0);
  EXPECT_EQ(size, 100u);
  ASSERT_EQ(rpma_srq_cfg_get_rcq_size(cfg, &size), 0);
  EXPECT_EQ(size, 100u);
  ASSERT_EQ(rpma_srq_cfg_set_rq_size(cfg, 7), 0);
  ASSERT_EQ(rpma_srq_cfg_set_rcq_size(cfg, 0), 0);
  ASSERT_EQ(rpma_srq_cfg_get_rq_size(cfg, &size), 0);
  EXPECT_EQ(size, 7u);
  ASSERT_EQ(rpma_srq_cfg_get_rcq_size(cfg, &size), 0);
  EXPECT_EQ(size, 0u);
  ASSERT_EQ(rpma_srq_cfg_delete(&cfg), 0);
  EXPECT_EQ(cfg, nullptr);
}

TEST(SrqCfgTest, Accessors_NullArguments_ReturnInval) {
  rpma_srq_cfg* cfg = nullptr;
  ASSERT_EQ(rpma_srq_cfg_new(&cfg), 0);
  uint32_t size;
  EXPECT_EQ(rpma_srq_cfg_set_rq_size(nullptr, 1), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_set_rcq_size(nullptr, 1), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_get_rq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_get_rq_size(cfg, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_get_rcq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_cfg_get_rcq_size(cfg, nullptr), RPMA_E_INVAL);
  rpma_srq_cfg_delete(&cfg);
}

}  // namespace
