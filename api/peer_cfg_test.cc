// Tests of rpma_peer_cfg_*(3).

#include <cstdint>

#include "api/testing/alloc_failure.h"
#include "gtest/gtest.h"
#include "librpma.h"

namespace {

using softrpma::testing::ScopedAllocFailure;

TEST(PeerCfgTest, PeerCfgNew_NullPtr_ReturnsInval) {
  EXPECT_EQ(rpma_peer_cfg_new(nullptr), RPMA_E_INVAL);
}

TEST(PeerCfgTest, PeerCfgNew_OutOfMemory_ReturnsNomem) {
  rpma_peer_cfg* pcfg = reinterpret_cast<rpma_peer_cfg*>(0x1);
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_peer_cfg_new(&pcfg), RPMA_E_NOMEM);
  EXPECT_EQ(pcfg, reinterpret_cast<rpma_peer_cfg*>(0x1));  // untouched
}

TEST(PeerCfgTest, PeerCfgNew_DefaultsToNoDirectWrite) {
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  bool supported = true;
  ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &supported), 0);
  EXPECT_FALSE(supported);
  ASSERT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
  EXPECT_EQ(pcfg, nullptr);
}

TEST(PeerCfgTest, PeerCfgDelete_NullPtr_ReturnsInval) {
  EXPECT_EQ(rpma_peer_cfg_delete(nullptr), RPMA_E_INVAL);
}

TEST(PeerCfgTest, PeerCfgDelete_NullCfg_Succeeds) {
  rpma_peer_cfg* pcfg = nullptr;
  EXPECT_EQ(rpma_peer_cfg_delete(&pcfg), 0);
}

TEST(PeerCfgTest, SetDirectWriteToPmem_NullCfg_ReturnsInval) {
  EXPECT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(nullptr, true), RPMA_E_INVAL);
}

TEST(PeerCfgTest, GetDirectWriteToPmem_NullArguments_ReturnInval) {
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  bool supported;
  EXPECT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(nullptr, &supported), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, nullptr), RPMA_E_INVAL);
  rpma_peer_cfg_delete(&pcfg);
}

TEST(PeerCfgTest, DirectWriteToPmem_RoundTrips) {
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  for (bool value : {true, false, true}) {
    ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, value), 0);
    bool got = !value;
    ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &got), 0);
    EXPECT_EQ(got, value);
  }
  rpma_peer_cfg_delete(&pcfg);
}

TEST(PeerCfgTest, GetDescriptor_NullArguments_ReturnInval) {
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  uint8_t desc[8];
  EXPECT_EQ(rpma_peer_cfg_get_descriptor(nullptr, desc), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_get_descriptor(pcfg, nullptr), RPMA_E_INVAL);
  rpma_peer_cfg_delete(&pcfg);
}

TEST(PeerCfgTest, GetDescriptorSize_NullArguments_ReturnInval) {
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  size_t size;
  EXPECT_EQ(rpma_peer_cfg_get_descriptor_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_get_descriptor_size(pcfg, nullptr), RPMA_E_INVAL);
  rpma_peer_cfg_delete(&pcfg);
}

TEST(PeerCfgTest, Descriptor_IsOneByte_AndRoundTrips) {
  for (bool value : {false, true}) {
    rpma_peer_cfg* pcfg = nullptr;
    ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
    ASSERT_EQ(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, value), 0);
    size_t size = 0;
    ASSERT_EQ(rpma_peer_cfg_get_descriptor_size(pcfg, &size), 0);
    ASSERT_EQ(size, 1u);
    uint8_t desc[2] = {0xAA, 0xAA};
    ASSERT_EQ(rpma_peer_cfg_get_descriptor(pcfg, desc), 0);
    EXPECT_EQ(desc[0], value ? 1 : 0);
    EXPECT_EQ(desc[1], 0xAA);  // nothing written past the descriptor

    rpma_peer_cfg* copy = nullptr;
    ASSERT_EQ(rpma_peer_cfg_from_descriptor(desc, size, &copy), 0);
    bool got = !value;
    ASSERT_EQ(rpma_peer_cfg_get_direct_write_to_pmem(copy, &got), 0);
    EXPECT_EQ(got, value);
    rpma_peer_cfg_delete(&copy);
    rpma_peer_cfg_delete(&pcfg);
  }
}

TEST(PeerCfgTest, FromDescriptor_NullArguments_ReturnInval) {
  uint8_t desc = 1;
  rpma_peer_cfg* pcfg = nullptr;
  EXPECT_EQ(rpma_peer_cfg_from_descriptor(nullptr, 1, &pcfg), RPMA_E_INVAL);
  EXPECT_EQ(rpma_peer_cfg_from_descriptor(&desc, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(pcfg, nullptr);
}

TEST(PeerCfgTest, FromDescriptor_OutOfMemory_ReturnsNomem) {
  uint8_t desc = 1;
  rpma_peer_cfg* pcfg = nullptr;
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_peer_cfg_from_descriptor(&desc, 1, &pcfg), RPMA_E_NOMEM);
  EXPECT_EQ(pcfg, nullptr);
}

}  // namespace
