// Conformance of memory regions (rpma_mr_reg(3), rpma_mr_dereg(3), rpma_mr_get_*(3),
// rpma_mr_remote_*(3), rpma_mr_advise(3)): one test per ERRORS line (rows of rpma-errors.tsv),
// through the public API on the simulated NIC.
//
// The simulated device supports on-demand paging (and so ibv_advise_mr) only when
// sim::SetOdpSupported(true); the fixture turns it off after every test.

#include <infiniband/verbs.h>

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/conformance_test.h"
#include "tests/conformance/testing/rig.h"
#include "tests/conformance/testing/rig_test.h"

namespace softrpma::conformance {
namespace {

constexpr size_t kMrSize = 4096;

class MrTest : public RigTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(RigTest::SetUp());
    mr_ = rig_->RegisterMr(kMrSize, kAllMrUsages);
    ASSERT_NE(mr_, nullptr);
    remote_ = rig_->RemoteOf(mr_);
    ASSERT_NE(remote_, nullptr);
  }

  rpma_mr_local* mr_ = nullptr;  // every usage, kMrSize bytes
  rpma_mr_remote* remote_ = nullptr;
  char buf_[kMrSize] = {};
};

// ---- rpma_mr_reg / rpma_mr_dereg ----------------------------------------------------------------

RPMA_TEST_F(MrTest, MrReg_PeerPtrOrMrPtrNull_ReturnsInval,
            RPMA_ROW("rpma_mr_reg", "RPMA_E_INVAL", "peer or ptr or mr_ptr is NULL")) {
  rpma_mr_local* mr = nullptr;
  EXPECT_RPMA(rpma_mr_reg(nullptr, buf_, sizeof(buf_), RPMA_MR_USAGE_SEND, &mr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_reg(rig_->peer(), nullptr, sizeof(buf_), RPMA_MR_USAGE_SEND, &mr),
              RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_reg(rig_->peer(), buf_, sizeof(buf_), RPMA_MR_USAGE_SEND, nullptr),
              RPMA_E_INVAL);
  EXPECT_EQ(mr, nullptr);
}

RPMA_TEST_F(MrTest, MrReg_SizeZero_ReturnsInval,
            RPMA_ROW("rpma_mr_reg", "RPMA_E_INVAL", "size equals 0")) {
  rpma_mr_local* mr = nullptr;
  EXPECT_RPMA(rpma_mr_reg(rig_->peer(), buf_, 0, RPMA_MR_USAGE_SEND, &mr), RPMA_E_INVAL);
  EXPECT_EQ(mr, nullptr);
}

RPMA_TEST_F(MrTest, MrReg_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_mr_reg", "RPMA_E_NOMEM", "out of memory")) {
  rpma_mr_local* mr = nullptr;
  {
    ARM_FAULTS(faults, "malloc:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rpma_mr_reg(rig_->peer(), buf_, sizeof(buf_), RPMA_MR_USAGE_SEND, &mr),
                RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
  }
  EXPECT_EQ(mr, nullptr);
  // Nothing registered is left on the peer: it deletes.
  EXPECT_RPMA(rpma_mr_reg(rig_->peer(), buf_, sizeof(buf_), RPMA_MR_USAGE_SEND, &mr), 0);
  EXPECT_RPMA(rpma_mr_dereg(&mr), 0);
}

RPMA_TEST_F(MrTest, MrReg_RegMrFails_ReturnsProvider,
            RPMA_ROW("rpma_mr_reg", "RPMA_E_PROVIDER", "memory registration failed")) {
  rpma_mr_local* mr = nullptr;
  {
    ARM_FAULTS(faults, "ibv_reg_mr:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_mr_reg(rig_->peer(), buf_, sizeof(buf_), RPMA_MR_USAGE_SEND, &mr),
                RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_reg_mr"), 1u);
  }
  EXPECT_EQ(mr, nullptr);
}

RPMA_TEST_F(MrTest, MrDereg_MrPtrNull_ReturnsInval,
            RPMA_ROW("rpma_mr_dereg", "RPMA_E_INVAL", "mr_ptr is NULL")) {
  EXPECT_RPMA(rpma_mr_dereg(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(MrTest, MrDereg_DeregMrFails_ReturnsProviderAndReleasesTheRegion,
            RPMA_ROW("rpma_mr_dereg", "RPMA_E_PROVIDER", "memory deregistration failed")) {
  // As librpma: the region object is freed and *mr_ptr cleared although the provider keeps
  // its registration (and so the peer's PD): both on a peer of this test. The simulated NIC
  // holds on to them: no leak.
  rpma_peer* peer = nullptr;
  ASSERT_RPMA(rpma_peer_new(rig_->dev(), &peer), 0);
  rpma_mr_local* mr = nullptr;
  ASSERT_RPMA(rpma_mr_reg(peer, buf_, sizeof(buf_), RPMA_MR_USAGE_SEND, &mr), 0);
  {
    ARM_FAULTS(faults, "ibv_dereg_mr:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_mr_dereg(&mr), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_dereg_mr"), 1u);
  }
  EXPECT_EQ(mr, nullptr);
  // The provider still holds the registration: the PD cannot go.
  EXPECT_RPMA(rpma_peer_delete(&peer), RPMA_E_PROVIDER);
  EXPECT_EQ(peer, nullptr);
}

// ---- Getters and descriptors ----------------------------------------------------------------

RPMA_TEST_F(MrTest, MrGetDescriptor_MrOrDescNull_ReturnsInval,
            RPMA_ROW("rpma_mr_get_descriptor", "RPMA_E_INVAL", "mr or desc is NULL")) {
  char desc[256] = {};
  EXPECT_RPMA(rpma_mr_get_descriptor(nullptr, desc), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_get_descriptor(mr_, nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(MrTest, MrGetDescriptorSize_MrOrDescSizeNull_ReturnsInval,
            RPMA_ROW("rpma_mr_get_descriptor_size", "RPMA_E_INVAL", "mr or desc_size is NULL")) {
  size_t size = 12345;
  EXPECT_RPMA(rpma_mr_get_descriptor_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_get_descriptor_size(mr_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(size, 12345u);
}

RPMA_TEST_F(MrTest, MrGetPtr_MrOrPtrNull_ReturnsInval,
            RPMA_ROW("rpma_mr_get_ptr", "RPMA_E_INVAL", "mr or ptr is NULL")) {
  void* ptr = this;
  EXPECT_RPMA(rpma_mr_get_ptr(nullptr, &ptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_get_ptr(mr_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(ptr, this);
}

RPMA_TEST_F(MrTest, MrGetSize_MrOrSizeNull_ReturnsInval,
            RPMA_ROW("rpma_mr_get_size", "RPMA_E_INVAL", "mr or size is NULL")) {
  size_t size = 12345;
  EXPECT_RPMA(rpma_mr_get_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_get_size(mr_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(size, 12345u);
}

class MrRemoteTest : public MrTest {
 protected:
  // The descriptor of mr_, as the other side gets it.
  std::vector<char> Descriptor() {
    size_t size = 0;
    EXPECT_RPMA(rpma_mr_get_descriptor_size(mr_, &size), 0);
    std::vector<char> desc(size);
    EXPECT_RPMA(rpma_mr_get_descriptor(mr_, desc.data()), 0);
    return desc;
  }
};

RPMA_TEST_F(MrRemoteTest, MrRemoteFromDescriptor_DescOrMrPtrNull_ReturnsInval,
            RPMA_ROW("rpma_mr_remote_from_descriptor", "RPMA_E_INVAL", "desc or mr_ptr is NULL")) {
  std::vector<char> desc = Descriptor();
  rpma_mr_remote* remote = nullptr;
  EXPECT_RPMA(rpma_mr_remote_from_descriptor(nullptr, desc.size(), &remote), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_remote_from_descriptor(desc.data(), desc.size(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(remote, nullptr);
}

RPMA_TEST_F(MrRemoteTest, MrRemoteFromDescriptor_IncompatibleSize_ReturnsInval,
            RPMA_ROW("rpma_mr_remote_from_descriptor", "RPMA_E_INVAL",
                     "incompatible descriptor size")) {
  // Shorter than the descriptor. (Longer is compatible, as in librpma: the descriptor is read
  // from the start of the buffer, see MrRemoteFromDescriptor_PaddedPrivateData_Accepted.)
  std::vector<char> desc = Descriptor();
  rpma_mr_remote* remote = nullptr;
  EXPECT_RPMA(rpma_mr_remote_from_descriptor(desc.data(), desc.size() - 1, &remote), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_remote_from_descriptor(desc.data(), 0, &remote), RPMA_E_INVAL);
  EXPECT_EQ(remote, nullptr);
}

RPMA_TEST_F(MrRemoteTest, MrRemoteFromDescriptor_NotAValidRegion_ReturnsNosupp,
            RPMA_ROW("rpma_mr_remote_from_descriptor", "RPMA_E_NOSUPP",
                     "deserialized information does not represent a valid memory region")) {
  // A descriptor of the right size that is all zeros: no usage at all, no region.
  std::vector<char> zeros(Descriptor().size(), 0);
  rpma_mr_remote* remote = nullptr;
  EXPECT_RPMA(rpma_mr_remote_from_descriptor(zeros.data(), zeros.size(), &remote), RPMA_E_NOSUPP);
  EXPECT_EQ(remote, nullptr);
}

RPMA_TEST_F(MrRemoteTest, MrRemoteFromDescriptor_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_mr_remote_from_descriptor", "RPMA_E_NOMEM", "out of memory")) {
  std::vector<char> desc = Descriptor();
  rpma_mr_remote* remote = nullptr;
  {
    ARM_FAULTS(faults, "malloc:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rpma_mr_remote_from_descriptor(desc.data(), desc.size(), &remote), RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
  }
  EXPECT_EQ(remote, nullptr);
}

RPMA_TEST_F(MrRemoteTest, MrRemoteGetSize_MrOrSizeNull_ReturnsInval,
            RPMA_ROW("rpma_mr_remote_get_size", "RPMA_E_INVAL", "mr or size is NULL")) {
  size_t size = 12345;
  EXPECT_RPMA(rpma_mr_remote_get_size(nullptr, &size), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_remote_get_size(remote_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(size, 12345u);
}

RPMA_TEST_F(MrRemoteTest, MrRemoteGetFlushType_MrOrFlushTypeNull_ReturnsInval,
            RPMA_ROW("rpma_mr_remote_get_flush_type", "RPMA_E_INVAL", "mr or flush_type is NULL")) {
  int flush_type = 12345;
  EXPECT_RPMA(rpma_mr_remote_get_flush_type(nullptr, &flush_type), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_remote_get_flush_type(remote_, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(flush_type, 12345);
}

RPMA_TEST_F(MrRemoteTest, MrRemoteDelete_MrPtrNull_ReturnsInval,
            RPMA_ROW("rpma_mr_remote_delete", "RPMA_E_INVAL", "mr_ptr is NULL")) {
  EXPECT_RPMA(rpma_mr_remote_delete(nullptr), RPMA_E_INVAL);
}

// ---- rpma_mr_advise ----------------------------------------------------------------------------

class MrAdviseTest : public MrTest {
 protected:
  void SetUp() override {
    MrTest::SetUp();
    sim::SetOdpSupported(true);
    // A region whose usage allows reading only (no local write, so no PREFETCH_WRITE; WRITE_SRC
    // gets local write access, as in librpma).
    read_only_mr_ = rig_->RegisterMr(kMrSize, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_READ_SRC);
    ASSERT_NE(read_only_mr_, nullptr);
  }

  rpma_mr_local* read_only_mr_ = nullptr;
};

RPMA_TEST_F(MrAdviseTest, MrAdvise_OutOfBoundsOrUsageForbidsAdviceOrBadFlags_ReturnsInval,
            RPMA_ROW("rpma_mr_advise", "RPMA_E_INVAL",
                     "in one of the following: - the requested range is out of the memory "
                     "registration bounds - the memory registration usage does not allow the "
                     "specific advice - the flags are invalid")) {
  // The valid calls these variations start from.
  ASSERT_RPMA(rpma_mr_advise(mr_, 0, kMrSize, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                             IBV_ADVISE_MR_FLAG_FLUSH),
              0);
  ASSERT_RPMA(rpma_mr_advise(read_only_mr_, 0, kMrSize, IBV_ADVISE_MR_ADVICE_PREFETCH,
                             IBV_ADVISE_MR_FLAG_FLUSH),
              0);
  // The range is out of the registration's bounds.
  EXPECT_RPMA(
      rpma_mr_advise(mr_, kMrSize - 8, 16, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH),
      RPMA_E_INVAL);
  EXPECT_RPMA(rpma_mr_advise(mr_, kMrSize, 1, IBV_ADVISE_MR_ADVICE_PREFETCH, 0), RPMA_E_INVAL);
  // The usage does not allow the advice: prefetching for writing a region nobody writes.
  EXPECT_RPMA(rpma_mr_advise(read_only_mr_, 0, kMrSize, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                             IBV_ADVISE_MR_FLAG_FLUSH),
              RPMA_E_INVAL);
  // The flags are invalid.
  EXPECT_RPMA(rpma_mr_advise(mr_, 0, kMrSize, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80), RPMA_E_INVAL);
}

RPMA_TEST_F(MrAdviseTest, MrAdvise_DeviceWithoutOnDemandPaging_ReturnsNosupp,
            RPMA_ROW("rpma_mr_advise", "RPMA_E_NOSUPP",
                     "the operation is not supported by the system")) {
  // Supported while the device has on-demand paging...
  ASSERT_RPMA(
      rpma_mr_advise(mr_, 0, kMrSize, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH), 0);
  // ... not once it has none (ibv_advise_mr fails with EOPNOTSUPP).
  sim::SetOdpSupported(false);
  EXPECT_RPMA(
      rpma_mr_advise(mr_, 0, kMrSize, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH),
      RPMA_E_NOSUPP);
}

RPMA_TEST_F(MrAdviseTest, MrAdvise_AdviseMrFailsOtherwise_ReturnsProvider,
            RPMA_ROW("rpma_mr_advise", "RPMA_E_PROVIDER",
                     "ibv_mr_advise(3) failed for other errors")) {
  {
    ARM_FAULTS(faults, "ibv_advise_mr:fail=EIO:nth=1");
    EXPECT_RPMA(
        rpma_mr_advise(mr_, 0, kMrSize, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH),
        RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_advise_mr"), 1u);
  }
  // The region is still usable.
  EXPECT_RPMA(
      rpma_mr_advise(mr_, 0, kMrSize, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH), 0);
}

}  // namespace
}  // namespace softrpma::conformance
