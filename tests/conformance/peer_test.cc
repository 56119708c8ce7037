// Conformance of the peer configuration (rpma_peer_cfg_*(3)) and the peer (rpma_peer_new(3),
// rpma_peer_delete(3)): one test per ERRORS line (rows of rpma-errors.tsv), through the public
// API on the simulated NIC.

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/conformance_test.h"

namespace softrpma::conformance {
namespace {

// ---- rpma_peer_cfg_* ------------------------------------------------------------------------

class PeerCfgTest : public ConformanceTest {
 protected:
  void SetUp() override {
    ConformanceTest::SetUp();
    ASSERT_RPMA(rpma_peer_cfg_new(&pcfg_), 0);
  }
  void TearDown() override {
    EXPECT_RPMA(rpma_peer_cfg_delete(&pcfg_), 0);
    ConformanceTest::TearDown();
  }

  rpma_peer_cfg* pcfg_ = nullptr;
};

RPMA_TEST_F(PeerCfgTest, PeerCfgNew_PcfgPtrNull_ReturnsInval,
            RPMA_ROW("rpma_peer_cfg_new", "RPMA_E_INVAL", "pcfg_ptr is NULL")) {
  EXPECT_RPMA(rpma_peer_cfg_new(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(PeerCfgTest, PeerCfgNew_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_peer_cfg_new", "RPMA_E_NOMEM", "out of memory")) {
  rpma_peer_cfg* pcfg = nullptr;
  {
    ARM_FAULTS(faults, "malloc:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rpma_peer_cfg_new(&pcfg), RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
  }
  EXPECT_EQ(pcfg, nullptr);
}

RPMA_TEST_F(PeerCfgTest, PeerCfgDelete_PcfgPtrNull_ReturnsInval,
            RPMA_ROW("rpma_peer_cfg_delete", "RPMA_E_INVAL", "pcfg_ptr is NULL")) {
  EXPECT_RPMA(rpma_peer_cfg_delete(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(PeerCfgTest, PeerCfgSetDirectWriteToPmem_PcfgNull_ReturnsInval,
            RPMA_ROW("rpma_peer_cfg_set_direct_write_to_pmem", "RPMA_E_INVAL", "pcfg is NULL")) {
  EXPECT_RPMA(rpma_peer_cfg_set_direct_write_to_pmem(nullptr, true), RPMA_E_INVAL);
}

RPMA_TEST_F(PeerCfgTest, PeerCfgGetDirectWriteToPmem_PcfgOrSupportedNull_ReturnsInval,
            RPMA_ROW("rpma_peer_cfg_get_direct_write_to_pmem", "RPMA_E_INVAL",
                     "pcfg or supported are NULL")) {
  bool supported = true;
  EXPECT_RPMA(rpma_peer_cfg_get_direct_write_to_pmem(nullptr, &supported), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_peer_cfg_get_direct_write_to_pmem(pcfg_, nullptr), RPMA_E_INVAL);
  EXPECT_TRUE(supported);
}

RPMA_TEST_F(PeerCfgTest, PeerCfgGetDescriptor_PcfgOrDescNull_ReturnsInval,
            RPMA_ROW("rpma_peer_cfg_get_descriptor", "RPMA_E_INVAL", "pcfg or desc are NULL")) {
  char desc[64] = {};
  EXPECT_RPMA(rpma_peer_cfg_get_descriptor(nullptr, desc), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_peer_cfg_get_descriptor(pcfg_, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(PeerCfgTest, PeerCfgGetDescriptorSize_PcfgOrDescSizeNull_ReturnsInval,
            RPMA_ROW("rpma_peer_cfg_get_descriptor_size", "RPMA_E_INVAL",
                     "pcfg or desc_size is NULL")) {
  size_t size = 12345;
  EXPECT_RPMA(rpma_peer_cfg_get_descriptor_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_peer_cfg_get_descriptor_size(pcfg_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(size, 12345u);
}

RPMA_TEST_F(PeerCfgTest, PeerCfgFromDescriptor_DescOrPcfgPtrNull_ReturnsInval,
            RPMA_ROW("rpma_peer_cfg_from_descriptor", "RPMA_E_INVAL",
                     "desc or pcfg_ptr are NULL")) {
  size_t size = 0;
  ASSERT_RPMA(rpma_peer_cfg_get_descriptor_size(pcfg_, &size), 0);
  char desc[64] = {};
  ASSERT_LE(size, sizeof(desc));
  ASSERT_RPMA(rpma_peer_cfg_get_descriptor(pcfg_, desc), 0);
  rpma_peer_cfg* copy = nullptr;
  EXPECT_RPMA(rpma_peer_cfg_from_descriptor(nullptr, size, &copy), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_peer_cfg_from_descriptor(desc, size, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(copy, nullptr);
}

RPMA_TEST_F(PeerCfgTest, PeerCfgFromDescriptor_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_peer_cfg_from_descriptor", "RPMA_E_NOMEM", "out of memory")) {
  size_t size = 0;
  ASSERT_RPMA(rpma_peer_cfg_get_descriptor_size(pcfg_, &size), 0);
  char desc[64] = {};
  ASSERT_LE(size, sizeof(desc));
  ASSERT_RPMA(rpma_peer_cfg_get_descriptor(pcfg_, desc), 0);
  rpma_peer_cfg* copy = nullptr;
  {
    ARM_FAULTS(faults, "malloc:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rpma_peer_cfg_from_descriptor(desc, size, &copy), RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
  }
  EXPECT_EQ(copy, nullptr);
}

// ---- rpma_peer_new / rpma_peer_delete ---------------------------------------------------------

class PeerTest : public ConformanceTest {
 protected:
  void SetUp() override {
    ConformanceTest::SetUp();
    ASSERT_RPMA(GetLocalDevice(&dev_), 0);
  }

  // rpma_peer_new under `fault_spec` returns `expected` and writes no peer; with a provider
  // fault, no protection domain is left (with a malloc fault, LeakSanitizer checks that).
  void ExpectPeerNewFails(const std::string& fault_spec, const char* fault_point, int expected) {
    rpma_peer* peer = nullptr;
    {
      ARM_FAULTS(faults, fault_spec);
      EXPECT_RPMA(rpma_peer_new(dev_, &peer), expected);
      EXPECT_EQ(FaultInjections(fault_point), 1u);
      if (std::string(fault_point) != "malloc") {
        EXPECT_TRUE(AllReleased("ibv_alloc_pd", "ibv_dealloc_pd"));
      }
    }
    EXPECT_EQ(peer, nullptr);
  }

  ibv_context* dev_ = nullptr;
};

RPMA_TEST_F(PeerTest, PeerNew_IbvCtxOrPeerPtrNull_ReturnsInval,
            RPMA_ROW("rpma_peer_new", "RPMA_E_INVAL", "ibv_ctx or peer_ptr is NULL")) {
  rpma_peer* peer = nullptr;
  EXPECT_RPMA(rpma_peer_new(nullptr, &peer), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_peer_new(dev_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(peer, nullptr);
}

RPMA_TEST_F(PeerTest, PeerNew_AllocPdFailsWithEnomem_ReturnsNomem,
            RPMA_ROW("rpma_peer_new", "RPMA_E_NOMEM",
                     "creating a verbs protection domain failed with ENOMEM.")) {
  ExpectPeerNewFails("ibv_alloc_pd:fail=ENOMEM:nth=1", "ibv_alloc_pd", RPMA_E_NOMEM);
}

RPMA_TEST_F(PeerTest, PeerNew_AllocPdFailsWithOtherErrno_ReturnsProvider,
            RPMA_ROW("rpma_peer_new", "RPMA_E_PROVIDER",
                     "creating a verbs protection domain failed with error other than ENOMEM.")) {
  ExpectPeerNewFails("ibv_alloc_pd:fail=EIO:nth=1", "ibv_alloc_pd", RPMA_E_PROVIDER);
}

RPMA_TEST_F(PeerTest, PeerNew_AllocPdFailsWithoutErrno_ReturnsUnknown,
            RPMA_ROW("rpma_peer_new", "RPMA_E_UNKNOWN",
                     "creating a verbs protection domain failed without error value.")) {
  ExpectPeerNewFails("ibv_alloc_pd:fail=none:nth=1", "ibv_alloc_pd", RPMA_E_UNKNOWN);
}

RPMA_TEST_F(PeerTest, PeerNew_OutOfMemoryForThePeer_ReturnsNomem,
            RPMA_ROW("rpma_peer_new", "RPMA_E_NOMEM", "out of memory")) {
  // The peer object is the call's last allocation (the protection domain is made first);
  // failing it must release the protection domain.
  rpma_peer* peer = nullptr;
  const uint64_t allocations =
      CountAllocations([&] { EXPECT_RPMA(rpma_peer_new(dev_, &peer), 0); });
  ASSERT_RPMA(rpma_peer_delete(&peer), 0);
  ASSERT_GE(allocations, 1u);
  {
    ARM_FAULTS(faults, absl::StrCat("malloc:fail=ENOMEM:nth=", allocations));
    EXPECT_RPMA(rpma_peer_new(dev_, &peer), RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
    EXPECT_EQ(FaultHits("ibv_alloc_pd"), 1u);
    EXPECT_TRUE(AllReleased("ibv_alloc_pd", "ibv_dealloc_pd"));
  }
  EXPECT_EQ(peer, nullptr);
}

RPMA_TEST_F(PeerTest, PeerDelete_DeallocPdFails_ReturnsProviderAndReleasesThePeer,
            RPMA_ROW("rpma_peer_delete", "RPMA_E_PROVIDER",
                     "deleting the verbs protection domain failed.")) {
  // As librpma: the peer is freed and *peer_ptr cleared although the provider keeps its PD
  // (the simulated NIC holds on to it: no leak).
  rpma_peer* peer = nullptr;
  ASSERT_RPMA(rpma_peer_new(dev_, &peer), 0);
  {
    ARM_FAULTS(faults, "ibv_dealloc_pd:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_peer_delete(&peer), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_dealloc_pd"), 1u);
  }
  EXPECT_EQ(peer, nullptr);
}

}  // namespace
}  // namespace softrpma::conformance
