// Conformance of shared receive queues (rpma_srq_cfg_*(3), rpma_srq_new(3), rpma_srq_delete(3),
// rpma_srq_recv(3), rpma_srq_get_rcq(3)): one test per ERRORS line (rows of rpma-errors.tsv),
// through the public API on the simulated NIC.

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/conformance_test.h"
#include "tests/conformance/testing/rig.h"
#include "tests/conformance/testing/rig_test.h"

namespace softrpma::conformance {
namespace {

// ---- rpma_srq_cfg_* ---------------------------------------------------------------------------

class SrqCfgTest : public ConformanceTest {
 protected:
  void SetUp() override {
    ConformanceTest::SetUp();
    ASSERT_RPMA(rpma_srq_cfg_new(&cfg_), 0);
  }
  void TearDown() override {
    EXPECT_RPMA(rpma_srq_cfg_delete(&cfg_), 0);
    ConformanceTest::TearDown();
  }

  rpma_srq_cfg* cfg_ = nullptr;
};

RPMA_TEST_F(SrqCfgTest, SrqCfgNew_CfgPtrNull_ReturnsInval,
            RPMA_ROW("rpma_srq_cfg_new", "RPMA_E_INVAL", "cfg_ptr is NULL")) {
  EXPECT_RPMA(rpma_srq_cfg_new(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(SrqCfgTest, SrqCfgNew_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_srq_cfg_new", "RPMA_E_NOMEM", "out of memory")) {
  rpma_srq_cfg* cfg = nullptr;
  {
    ARM_FAULTS(faults, "malloc:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rpma_srq_cfg_new(&cfg), RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
  }
  EXPECT_EQ(cfg, nullptr);
}

RPMA_TEST_F(SrqCfgTest, SrqCfgDelete_CfgPtrNull_ReturnsInval,
            RPMA_ROW("rpma_srq_cfg_delete", "RPMA_E_INVAL", "cfg_ptr is NULL")) {
  EXPECT_RPMA(rpma_srq_cfg_delete(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(SrqCfgTest, SrqCfgSetRqSize_CfgNull_ReturnsInval,
            RPMA_ROW("rpma_srq_cfg_set_rq_size", "RPMA_E_INVAL", "cfg is NULL")) {
  EXPECT_RPMA(rpma_srq_cfg_set_rq_size(nullptr, 20), RPMA_E_INVAL);
}

RPMA_TEST_F(SrqCfgTest, SrqCfgGetRqSize_CfgOrRqSizeNull_ReturnsInval,
            RPMA_ROW("rpma_srq_cfg_get_rq_size", "RPMA_E_INVAL", "cfg or rq_size is NULL")) {
  uint32_t size = 12345;
  EXPECT_RPMA(rpma_srq_cfg_get_rq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_srq_cfg_get_rq_size(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(size, 12345u);
}

RPMA_TEST_F(SrqCfgTest, SrqCfgSetRcqSize_CfgNull_ReturnsInval,
            RPMA_ROW("rpma_srq_cfg_set_rcq_size", "RPMA_E_INVAL", "cfg is NULL")) {
  EXPECT_RPMA(rpma_srq_cfg_set_rcq_size(nullptr, 20), RPMA_E_INVAL);
}

RPMA_TEST_F(SrqCfgTest, SrqCfgGetRcqSize_CfgOrRcqSizeNull_ReturnsInval,
            RPMA_ROW("rpma_srq_cfg_get_rcq_size", "RPMA_E_INVAL", "cfg or rcq_size is NULL")) {
  uint32_t size = 12345;
  EXPECT_RPMA(rpma_srq_cfg_get_rcq_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_srq_cfg_get_rcq_size(cfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(size, 12345u);
}

// ---- rpma_srq_new / rpma_srq_delete -----------------------------------------------------------

class SrqTest : public RigTest {
 protected:
  // rpma_srq_new (default configuration: a receive CQ on a channel of its own) under
  // `fault_spec` returns `expected`, writes no SRQ and releases whatever it made: then the
  // peer deletes (no SRQ is left on its protection domain).
  void ExpectSrqNewFails(const char* fault_spec, const char* fault_point, int expected) {
    rpma_srq* srq = nullptr;
    {
      ARM_FAULTS(faults, fault_spec);
      EXPECT_RPMA(rpma_srq_new(rig_->peer(), nullptr, &srq), expected);
      EXPECT_EQ(FaultInjections(fault_point), 1u);
      if (std::string(fault_point) != "malloc") {
        EXPECT_TRUE(AllReleased("ibv_create_srq", "ibv_destroy_srq"));
        EXPECT_TRUE(AllReleased("ibv_create_cq", "ibv_destroy_cq"));
        EXPECT_TRUE(AllReleased("ibv_create_comp_channel", "ibv_destroy_comp_channel"));
      }
    }
    EXPECT_EQ(srq, nullptr);
    EXPECT_RPMA(rpma_peer_delete(rig_->peer_ptr()), 0);
  }
};

RPMA_TEST_F(SrqTest, SrqNew_PeerOrSrqPtrNull_ReturnsInval,
            RPMA_ROW("rpma_srq_new", "RPMA_E_INVAL", "peer or srq_ptr is NULL")) {
  rpma_srq* srq = nullptr;
  EXPECT_RPMA(rpma_srq_new(nullptr, nullptr, &srq), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_srq_new(rig_->peer(), nullptr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(srq, nullptr);
}

RPMA_TEST_F(SrqTest, SrqNew_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_srq_new", "RPMA_E_NOMEM", "out of memory")) {
  ExpectSrqNewFails("malloc:fail=ENOMEM:nth=1", "malloc", RPMA_E_NOMEM);
}

RPMA_TEST_F(SrqTest, SrqNew_CreateSrqFails_ReturnsProvider,
            RPMA_ROW("rpma_srq_new", "RPMA_E_PROVIDER",
                     "ibv_create_srq(3), ibv_create_comp_channel(3), ibv_create_cq(3) or "
                     "ibv_req_notify_cq(3) failed")) {
  ExpectSrqNewFails("ibv_create_srq:fail=ENOMEM:nth=1", "ibv_create_srq", RPMA_E_PROVIDER);
}

RPMA_TEST_F(SrqTest, SrqNew_CreateCompChannelFails_ReturnsProvider,
            RPMA_ROW("rpma_srq_new", "RPMA_E_PROVIDER",
                     "ibv_create_srq(3), ibv_create_comp_channel(3), ibv_create_cq(3) or "
                     "ibv_req_notify_cq(3) failed")) {
  ExpectSrqNewFails("ibv_create_comp_channel:fail=EMFILE:nth=1", "ibv_create_comp_channel",
                    RPMA_E_PROVIDER);
}

RPMA_TEST_F(SrqTest, SrqNew_CreateCqFails_ReturnsProvider,
            RPMA_ROW("rpma_srq_new", "RPMA_E_PROVIDER",
                     "ibv_create_srq(3), ibv_create_comp_channel(3), ibv_create_cq(3) or "
                     "ibv_req_notify_cq(3) failed")) {
  ExpectSrqNewFails("ibv_create_cq:fail=EINVAL:nth=1", "ibv_create_cq", RPMA_E_PROVIDER);
}

RPMA_TEST_F(SrqTest, SrqNew_ReqNotifyCqFails_ReturnsProvider,
            RPMA_ROW("rpma_srq_new", "RPMA_E_PROVIDER",
                     "ibv_create_srq(3), ibv_create_comp_channel(3), ibv_create_cq(3) or "
                     "ibv_req_notify_cq(3) failed")) {
  ExpectSrqNewFails("ibv_req_notify_cq:fail=EIO:nth=1", "ibv_req_notify_cq", RPMA_E_PROVIDER);
}

RPMA_TEST_F(SrqTest, SrqDelete_SrqPtrNull_ReturnsInval,
            RPMA_ROW("rpma_srq_delete", "RPMA_E_INVAL", "srq_ptr is NULL")) {
  EXPECT_RPMA(rpma_srq_delete(nullptr), RPMA_E_INVAL);
}

// rpma_srq_delete frees the SRQ whatever the provider says (as librpma does), so the provider
// object whose destruction failed can never be freed (the simulated NIC holds on to it: no
// leak).
class SrqDeleteTest : public RigTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(RigTest::SetUp());
    ASSERT_RPMA(rpma_srq_new(rig_->peer(), nullptr, &srq_), 0);
  }

  // rpma_srq_delete under `fault_spec` returns RPMA_E_PROVIDER and frees the SRQ.
  void ExpectSrqDeleteFails(const char* fault_spec, const char* fault_point) {
    {
      ARM_FAULTS(faults, fault_spec);
      EXPECT_RPMA(rpma_srq_delete(&srq_), RPMA_E_PROVIDER);
      EXPECT_EQ(FaultInjections(fault_point), 1u);
    }
    EXPECT_EQ(srq_, nullptr);
  }

  rpma_srq* srq_ = nullptr;
};

RPMA_TEST_F(SrqDeleteTest, SrqDelete_DestroyCqFails_ReturnsProvider,
            RPMA_ROW("rpma_srq_delete", "RPMA_E_PROVIDER",
                     "ibv_destroy_cq(3), ibv_destroy_comp_channel(3), or ibv_destroy_srq(3) "
                     "failed")) {
  ExpectSrqDeleteFails("ibv_destroy_cq:fail=EIO:nth=1", "ibv_destroy_cq");
}

RPMA_TEST_F(SrqDeleteTest, SrqDelete_DestroyCompChannelFails_ReturnsProvider,
            RPMA_ROW("rpma_srq_delete", "RPMA_E_PROVIDER",
                     "ibv_destroy_cq(3), ibv_destroy_comp_channel(3), or ibv_destroy_srq(3) "
                     "failed")) {
  ExpectSrqDeleteFails("ibv_destroy_comp_channel:fail=EIO:nth=1", "ibv_destroy_comp_channel");
}

RPMA_TEST_F(SrqDeleteTest, SrqDelete_DestroySrqFails_ReturnsProvider,
            RPMA_ROW("rpma_srq_delete", "RPMA_E_PROVIDER",
                     "ibv_destroy_cq(3), ibv_destroy_comp_channel(3), or ibv_destroy_srq(3) "
                     "failed")) {
  ExpectSrqDeleteFails("ibv_destroy_srq:fail=EIO:nth=1", "ibv_destroy_srq");
}

// ---- rpma_srq_recv / rpma_srq_get_rcq ---------------------------------------------------------

class SrqUseTest : public SrqTest {
 protected:
  void SetUp() override {
    SrqTest::SetUp();
    ASSERT_RPMA(rpma_srq_new(rig_->peer(), nullptr, &srq_), 0);
    mr_ = rig_->RegisterMr(64, RPMA_MR_USAGE_RECV);
    ASSERT_NE(mr_, nullptr);
  }
  void TearDown() override {
    EXPECT_RPMA(rpma_srq_delete(&srq_), 0);
    SrqTest::TearDown();
  }

  rpma_srq* srq_ = nullptr;
  rpma_mr_local* mr_ = nullptr;
};

RPMA_TEST_F(SrqUseTest, SrqRecv_SrqNull_ReturnsInval,
            RPMA_ROW("rpma_srq_recv", "RPMA_E_INVAL", "srq == NULL")) {
  EXPECT_RPMA(rpma_srq_recv(nullptr, mr_, 0, 8, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(SrqUseTest, SrqRecv_DstNullWithOffsetOrLen_ReturnsInval,
            RPMA_ROW("rpma_srq_recv", "RPMA_E_INVAL", "dst == NULL && (offset != 0 || len != 0)")) {
  EXPECT_RPMA(rpma_srq_recv(srq_, nullptr, 1, 0, nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_srq_recv(srq_, nullptr, 0, 8, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(SrqUseTest, SrqRecv_PostSrqRecvFails_ReturnsProvider,
            RPMA_ROW("rpma_srq_recv", "RPMA_E_PROVIDER", "ibv_post_srq_recv(3) failed")) {
  {
    ARM_FAULTS(faults, "ibv_post_srq_recv:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rpma_srq_recv(srq_, mr_, 0, 8, nullptr), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_post_srq_recv"), 1u);
  }
  EXPECT_RPMA(rpma_srq_recv(srq_, mr_, 0, 8, nullptr), 0);
}

RPMA_TEST_F(SrqUseTest, SrqGetRcq_SrqOrRcqPtrNull_ReturnsInval,
            RPMA_ROW("rpma_srq_get_rcq", "RPMA_E_INVAL", "srq or rcq_ptr is NULL")) {
  rpma_cq* rcq = reinterpret_cast<rpma_cq*>(this);
  EXPECT_RPMA(rpma_srq_get_rcq(nullptr, &rcq), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_srq_get_rcq(srq_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rcq, reinterpret_cast<rpma_cq*>(this));
}

}  // namespace
}  // namespace softrpma::conformance
