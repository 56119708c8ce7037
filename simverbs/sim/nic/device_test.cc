// The simulated device, PDs and MRs, through the Backend interface: query, layout of the sim
// structs, MR registration rules, EBUSY on dealloc, ODP, and the local / remote protection
// checks of the data path.

#include "simverbs/sim/nic/device.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/cm/cm.h"
#include "simverbs/sim/nic/cq.h"
#include "simverbs/sim/nic/qp.h"
#include "simverbs/sim/sched/sched.h"
#include "simverbs/sim/sim_control.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

// This process's resident set (VmRSS of /proc/self/status), in KiB; -1 when unreadable.
long ResidentKb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      long kb = -1;
      status >> kb;
      return kb;
    }
  }
  return -1;
}

using ::testing::ElementsAre;
using ::testing::Field;

// The verbs struct is the first member of every sim struct, so to_sim() is a plain cast.
template <typename Sim, typename Verbs>
bool VerbsStructIsFirst(Sim* sim, Verbs* verbs) {
  return static_cast<void*>(sim) == static_cast<void*>(verbs);
}

TEST(SimLayoutTest, SimStructs_EmbedVerbsStructFirst) {
  SimDevice device;
  EXPECT_TRUE(VerbsStructIsFirst(&device, &device.verbs));
  // The context is inside a verbs_context, where verbs.h's verbs_get_ctx looks for it.
  EXPECT_EQ(verbs_get_ctx(&device.context), &device.verbs);
  EXPECT_EQ(device.verbs.sz, sizeof(verbs_context));
  EXPECT_EQ(to_sim(&device.context), &device);
  SimPd pd(&device);
  EXPECT_TRUE(VerbsStructIsFirst(&pd, &pd.pd));
  SimMr mr;
  EXPECT_TRUE(VerbsStructIsFirst(&mr, &mr.mr));
  SimCompChannel channel(&device);
  EXPECT_TRUE(VerbsStructIsFirst(&channel, &channel.channel));
  SimCq cq(&device, 1, nullptr, nullptr, false);
  EXPECT_TRUE(VerbsStructIsFirst(&cq, &cq.cq));
  ibv_srq_init_attr srq_attr{};
  srq_attr.attr.max_wr = 1;
  srq_attr.attr.max_sge = 1;
  SimSrq srq(&pd, srq_attr);
  EXPECT_TRUE(VerbsStructIsFirst(&srq, &srq.srq));
  ibv_qp_init_attr qp_attr{};
  qp_attr.send_cq = qp_attr.recv_cq = &cq.cq;
  SimQp qp(&pd, qp_attr, std::make_shared<SimLink>(), 0);
  EXPECT_TRUE(VerbsStructIsFirst(&qp, &qp.qp));
  SimEventChannel event_channel;
  EXPECT_TRUE(VerbsStructIsFirst(&event_channel, &event_channel.channel));
  SimCmId id;
  EXPECT_TRUE(VerbsStructIsFirst(&id, &id.id));
  SimCmEvent event;
  EXPECT_TRUE(VerbsStructIsFirst(&event, &event.event));
}

class DeviceTest : public ::testing::Test {
 protected:
  Backend* backend_ = SimBackend();
  ibv_context* ctx_ = SimContext();
};

TEST_F(DeviceTest, Context_IsTheSimDevice) {
  ASSERT_NE(ctx_, nullptr);
  EXPECT_STREQ(ctx_->device->name, "softrpma_sim0");
  EXPECT_EQ(ctx_->num_comp_vectors, 1);
  EXPECT_STREQ(backend_->Name(), "sim");
}

TEST_F(DeviceTest, Context_CmdFdIsARealDescriptor_DupWorks) {
  ASSERT_GE(ctx_->cmd_fd, 0);
  EXPECT_NE(ctx_->cmd_fd, ctx_->async_fd);
  EXPECT_NE(fcntl(ctx_->cmd_fd, F_GETFD) & FD_CLOEXEC, 0);
  const int copy = dup(ctx_->cmd_fd);
  ASSERT_GE(copy, 0) << errno;
  EXPECT_EQ(close(copy), 0);
}

// Each test below that switches the profile puts mlx5 back and forgets the overrides.
class ProfileTest : public DeviceTest {
 protected:
  void TearDown() override {
    SetActiveProfile(DeviceProfiles()[0]);
    ResetDeviceOverrides();
  }
  static const DeviceProfile& Use(const char* name) {
    const DeviceProfile& profile = **FindDeviceProfile(name);
    SetActiveProfile(profile);
    ResetDeviceOverrides();
    return profile;
  }
  // Connects two ids with this private data on rdma_connect and rdma_accept.
  absl::Status ConnectWith(size_t connect_len, size_t accept_len) {
    TestConnection conn(backend_);
    ConnectionOptions options;
    options.connect_private_data = std::vector<uint8_t>(connect_len, 0x11);
    options.accept_private_data = std::vector<uint8_t>(accept_len, 0x22);
    return conn.Connect(options);
  }
  // Creates an RC QP asking for `cap` (on a PD and CQ of its own, all destroyed again) and
  // returns CreateQp's answer; on success *reported is what it reported and *held_send_wr the
  // send queue the QP holds.
  int CreateQpWith(const ibv_qp_cap& cap, ibv_qp_cap* reported, uint32_t* held_send_wr) {
    ibv_pd* pd = nullptr;
    EXPECT_EQ(backend_->IbvAllocPd(ctx_, &pd), 0);
    ibv_cq* cq = nullptr;
    EXPECT_EQ(backend_->IbvCreateCq(ctx_, 64, nullptr, nullptr, 0, &cq), 0);
    ibv_qp_init_attr_ex attr{};
    attr.comp_mask = IBV_QP_INIT_ATTR_PD;
    attr.pd = pd;
    attr.send_cq = attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap = cap;
    SimQp* qp = nullptr;
    const int err = CreateQp(&attr, nullptr, &qp);
    if (err == 0) {
      *reported = attr.cap;
      *held_send_wr = qp->cap.max_send_wr;
      DestroyQp(qp);
    }
    EXPECT_EQ(backend_->IbvDestroyCq(cq), 0);
    EXPECT_EQ(backend_->IbvDeallocPd(pd), 0);
    return err;
  }
};

TEST_F(ProfileTest, QueryDeviceEx_EachProfile_ReportsItsLimitsAndCapabilities) {
  for (const DeviceProfile& profile : DeviceProfiles()) {
    Use(profile.name);
    ibv_device_attr_ex attr;

    ASSERT_EQ(backend_->IbvQueryDeviceEx(ctx_, &attr), 0);

    SCOPED_TRACE(profile.name);
    EXPECT_EQ(attr.orig_attr.max_qp_wr, profile.max_qp_wr);
    EXPECT_EQ(attr.orig_attr.max_sge, profile.max_sge);
    EXPECT_EQ(attr.orig_attr.max_sge_rd, profile.max_sge_rd);
    EXPECT_EQ(attr.orig_attr.max_cqe, profile.max_cqe);
    EXPECT_EQ(attr.orig_attr.max_srq_wr, profile.max_srq_wr);
    EXPECT_EQ(attr.orig_attr.max_srq_sge, profile.max_srq_sge);
    EXPECT_EQ(attr.orig_attr.max_qp_rd_atom, profile.max_qp_rd_atom);
    EXPECT_EQ(attr.orig_attr.max_qp_init_rd_atom, profile.max_qp_init_rd_atom);
    EXPECT_EQ(attr.orig_attr.atomic_cap, profile.atomic_cap);
    EXPECT_EQ(attr.orig_attr.phys_port_cnt, 1);
    EXPECT_EQ((attr.device_cap_flags_ex & kDeviceCapAtomicWrite) != 0,
              profile.native_atomic_write);
    EXPECT_EQ((attr.odp_caps.general_caps & IBV_ODP_SUPPORT) != 0, profile.odp);
  }
}

TEST_F(ProfileTest, QueryDeviceEx_Mlx5_OdpNoNativeAtomicWrite) {
  ibv_device_attr_ex attr;

  ASSERT_EQ(backend_->IbvQueryDeviceEx(ctx_, &attr), 0);

  EXPECT_EQ(attr.orig_attr.max_qp_wr, 1 << 14);
  EXPECT_EQ(attr.orig_attr.max_sge, 32);
  EXPECT_NE(attr.odp_caps.general_caps & IBV_ODP_SUPPORT, 0u);
  EXPECT_EQ(attr.device_cap_flags_ex & kDeviceCapAtomicWrite, 0u);
}

TEST_F(ProfileTest, Overrides_BeatTheProfile) {
  Use("rxe");
  SetAtomicWriteSupported(false);
  SetOdpSupported(false);
  ibv_device_attr_ex attr;

  ASSERT_EQ(backend_->IbvQueryDeviceEx(ctx_, &attr), 0);

  EXPECT_EQ(attr.device_cap_flags_ex & kDeviceCapAtomicWrite, 0u);
  EXPECT_EQ(attr.odp_caps.general_caps, 0u);
}

TEST_F(ProfileTest, CreateCq_EachProfile_RoundsAsItsDriver) {
  struct Case {
    const char* device;
    int asked;
    int reported;
  };
  // mlx5 and rxe: the next power of two above cqe, minus one; siw: the next power of two.
  const Case cases[] = {{"mlx5", 1, 1},  {"mlx5", 10, 15}, {"mlx5", 16, 31},
                        {"rxe", 10, 15}, {"rxe", 32767, 32767},
                        {"siw", 1, 1},   {"siw", 10, 16},  {"siw", 16, 16}};
  for (const Case& c : cases) {
    Use(c.device);
    ibv_cq* cq = nullptr;

    ASSERT_EQ(backend_->IbvCreateCq(ctx_, c.asked, nullptr, nullptr, 0, &cq), 0);

    EXPECT_EQ(cq->cqe, c.reported) << c.device << " " << c.asked;
    EXPECT_EQ(backend_->IbvDestroyCq(cq), 0);
  }
}

// libfabric's verbs provider asks for 262,144 entries; mlx5's largest CQ is made without its
// ring's memory up front (the process grows by far less than 4 M entries' 80 bytes each).
TEST_F(ProfileTest, CreateCq_Mlx5LargestCq_CreatedWithoutItsMemoryUpFront) {
  Use("mlx5");
  const long rss_before_kb = ResidentKb();
  ibv_cq* big = nullptr;
  ibv_cq* largest = nullptr;

  ASSERT_EQ(backend_->IbvCreateCq(ctx_, 262144, nullptr, nullptr, 0, &big), 0);
  ASSERT_EQ(backend_->IbvCreateCq(ctx_, 4194303, nullptr, nullptr, 0, &largest), 0);

  EXPECT_EQ(big->cqe, 524287);  // 2^19 - 1
  EXPECT_EQ(largest->cqe, 4194303);
  EXPECT_LT(ResidentKb() - rss_before_kb, 32 * 1024);
  EXPECT_EQ(backend_->IbvDestroyCq(largest), 0);
  EXPECT_EQ(backend_->IbvDestroyCq(big), 0);
}

TEST_F(ProfileTest, CreateCq_AboveTheProfilesMaxCqe_Einval) {
  for (const DeviceProfile& profile : DeviceProfiles()) {
    Use(profile.name);
    ibv_cq* cq = nullptr;

    EXPECT_EQ(backend_->IbvCreateCq(ctx_, profile.max_cqe + 1, nullptr, nullptr, 0, &cq), EINVAL)
        << profile.name;
  }
}

TEST_F(ProfileTest, CreateQp_EachProfile_ReportsTheCapsAsItsDriverRoundsThem) {
  struct Case {
    const char* device;
    ibv_qp_cap asked;
    ibv_qp_cap reported;
  };
  // {max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data}
  const Case cases[] = {
      {"mlx5", {10, 10, 1, 1, 8}, {16, 16, 1, 1, 8}},
      {"mlx5", {16, 3, 2, 1, 0}, {16, 4, 2, 1, 0}},
      // rxe: one slot of each ring kept empty; a WQE's SGE space doubles as inline space.
      {"rxe", {10, 10, 1, 1, 8}, {15, 15, 1, 1, 16}},
      {"rxe", {16, 1, 2, 1, 100}, {31, 1, 6, 1, 100}},
      {"siw", {10, 10, 1, 1, 8}, {10, 10, 1, 1, 8}},
  };
  for (const Case& c : cases) {
    Use(c.device);
    ibv_qp_cap reported{};
    uint32_t held_send_wr = 0;

    ASSERT_EQ(CreateQpWith(c.asked, &reported, &held_send_wr), 0) << c.device;

    SCOPED_TRACE(c.device);
    EXPECT_EQ(reported.max_send_wr, c.reported.max_send_wr);
    EXPECT_EQ(reported.max_recv_wr, c.reported.max_recv_wr);
    EXPECT_EQ(reported.max_send_sge, c.reported.max_send_sge);
    EXPECT_EQ(reported.max_recv_sge, c.reported.max_recv_sge);
    EXPECT_EQ(reported.max_inline_data, c.reported.max_inline_data);
    EXPECT_EQ(held_send_wr, c.reported.max_send_wr);  // and the QP holds that many
  }
}

// The max-length checks of rdma_connect / rdma_accept follow the profile (how the lengths are
// delivered is the CM's business: cm_test.cc).
TEST_F(ProfileTest, PrivateData_Siw_UpTo255BytesBothWays_Connects) {
  Use("siw");

  absl::Status status = ConnectWith(255, 255);

  EXPECT_TRUE(status.ok()) << status;
}

TEST_F(ProfileTest, PrivateData_Mlx5AndRxe_AboveTheIbCmLimits_Einval) {
  for (const char* device : {"mlx5", "rxe"}) {
    Use(device);

    absl::Status long_connect = ConnectWith(57, 0);
    absl::Status long_accept = ConnectWith(0, 197);

    EXPECT_THAT(std::string(long_connect.message()),
                ::testing::HasSubstr("rdma_connect failed: 22"))
        << device;
    EXPECT_THAT(std::string(long_accept.message()), ::testing::HasSubstr("rdma_accept failed: 22"))
        << device;
  }
}

TEST_F(ProfileTest, CreateQp_Siw_MoreThanSixSgesOrEightyInlineBytes_Einval) {
  Use("siw");
  const ibv_qp_cap too_much[] = {{4, 4, 7, 1, 0}, {4, 4, 1, 7, 0}, {4, 4, 1, 1, 81}};
  for (const ibv_qp_cap& cap : too_much) {
    ibv_qp_cap reported{};
    uint32_t held_send_wr = 0;

    EXPECT_EQ(CreateQpWith(cap, &reported, &held_send_wr), EINVAL);
  }
}

TEST_F(DeviceTest, QueryDeviceEx_OdpWhenConfigured) {
  SetOdpSupported(true);
  ibv_device_attr_ex attr;

  ASSERT_EQ(backend_->IbvQueryDeviceEx(ctx_, &attr), 0);
  SetOdpSupported(false);

  EXPECT_NE(attr.odp_caps.general_caps & IBV_ODP_SUPPORT, 0u);
  EXPECT_NE(attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE, 0u);
  EXPECT_NE(attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_READ, 0u);
}

TEST_F(DeviceTest, QueryDeviceEx_UnknownContext_Einval) {
  ibv_context other{};
  ibv_device_attr_ex attr;

  EXPECT_EQ(backend_->IbvQueryDeviceEx(&other, &attr), EINVAL);
}

TEST_F(DeviceTest, RegMr_FillsFields_KeysUniqueAndDistinct) {
  ibv_pd* pd = nullptr;
  ASSERT_EQ(backend_->IbvAllocPd(ctx_, &pd), 0);
  EXPECT_EQ(pd->context, ctx_);
  char a[64], b[64];
  ibv_mr* mr_a = nullptr;
  ibv_mr* mr_b = nullptr;

  ASSERT_EQ(backend_->IbvRegMr(pd, a, sizeof(a), IBV_ACCESS_LOCAL_WRITE, &mr_a), 0);
  ASSERT_EQ(backend_->IbvRegMr(pd, b, sizeof(b), IBV_ACCESS_LOCAL_WRITE, &mr_b), 0);

  EXPECT_EQ(mr_a->addr, a);
  EXPECT_EQ(mr_a->length, sizeof(a));
  EXPECT_EQ(mr_a->pd, pd);
  EXPECT_EQ(mr_a->context, ctx_);
  EXPECT_NE(mr_a->lkey, mr_a->rkey);
  EXPECT_NE(mr_a->lkey, mr_b->lkey);
  EXPECT_NE(mr_a->rkey, mr_b->rkey);
  EXPECT_EQ(backend_->IbvDeallocPd(pd), EBUSY);  // MRs alive
  EXPECT_EQ(backend_->IbvDeregMr(mr_a), 0);
  EXPECT_EQ(backend_->IbvDeregMr(mr_b), 0);
  EXPECT_EQ(backend_->IbvDeallocPd(pd), 0);
}

// The lkeys and rkeys of three MRs registered on a fresh device under `seed`, in order
// (lkey, rkey per MR), and their indexes (ibv_mr.handle).
struct ThreeMrs {
  std::vector<uint32_t> keys;
  std::vector<uint32_t> indexes;
};
ThreeMrs RegisterThreeMrs(uint64_t seed) {
  const uint64_t saved = CurrentSeed();
  SetSeed(seed);
  SimDevice device;
  SimPd pd(&device);
  static char region[3][64];
  ThreeMrs out;
  ibv_mr* mrs[3] = {};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(RegMr(&pd, region[i], sizeof(region[i]), IBV_ACCESS_LOCAL_WRITE, &mrs[i]), 0);
    if (mrs[i] == nullptr) break;
    out.keys.push_back(mrs[i]->lkey);
    out.keys.push_back(mrs[i]->rkey);
    out.indexes.push_back(mrs[i]->handle);
  }
  for (ibv_mr* mr : mrs) {
    if (mr != nullptr) {
      EXPECT_EQ(DeregMr(reinterpret_cast<SimMr*>(mr)), 0);
    }
  }
  SetSeed(saved);
  return out;
}

// Issue 18: a region's rkey was index << 8 | 0x0B, so whoever held two keys found a third that
// was never handed out at the first guess. Keys come from the seed now.
TEST(MrKeysTest, RegMr_KeysAreSeededNotIndexDerived_SameSeedSameKeys) {
  const ThreeMrs one = RegisterThreeMrs(1);
  ASSERT_EQ(one.keys.size(), 6u);
  for (size_t i = 0; i < 3; ++i) {
    const uint32_t lkey = one.keys[2 * i];
    const uint32_t rkey = one.keys[2 * i + 1];
    EXPECT_NE(lkey, 0u);
    EXPECT_NE(rkey, 0u);
    EXPECT_NE(rkey, (one.indexes[i] << 8) | 0x0B) << "rkey of MR " << one.indexes[i];
    EXPECT_NE(lkey, (one.indexes[i] << 8) | 0x0A) << "lkey of MR " << one.indexes[i];
    EXPECT_NE(rkey >> 8, one.indexes[i]) << "rkey of MR " << one.indexes[i];
  }
  // The third rkey is not the next step of the first two.
  EXPECT_NE(one.keys[5], one.keys[3] + (one.keys[3] - one.keys[1]));
  // All six keys differ (an lkey is no one's rkey).
  std::vector<uint32_t> sorted = one.keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  // Deterministic per seed; another seed, other keys.
  EXPECT_EQ(RegisterThreeMrs(1).keys, one.keys);
  const ThreeMrs two = RegisterThreeMrs(2);
  EXPECT_EQ(two.indexes, one.indexes);
  EXPECT_NE(two.keys, one.keys);
}

TEST_F(DeviceTest, RegMr_BadArguments_Einval) {
  ibv_pd* pd = nullptr;
  ASSERT_EQ(backend_->IbvAllocPd(ctx_, &pd), 0);
  char buf[16];
  ibv_mr* mr = nullptr;

  EXPECT_EQ(backend_->IbvRegMr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE, &mr), EINVAL);
  EXPECT_EQ(backend_->IbvRegMr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE, &mr), EINVAL)
      << "remote write needs local write";
  EXPECT_EQ(backend_->IbvRegMr(pd, buf, sizeof(buf), IBV_ACCESS_ON_DEMAND, &mr), EINVAL)
      << "no ODP";
  EXPECT_EQ(backend_->IbvRegMr(pd, buf, sizeof(buf), 1 << 15, &mr), EINVAL) << "unknown flag";
  EXPECT_EQ(mr, nullptr);
  EXPECT_EQ(backend_->IbvDeallocPd(pd), 0);
}

TEST_F(DeviceTest, AdviseMr_NoOdp_Eopnotsupp_WithOdp_ChecksRange) {
  ibv_pd* pd = nullptr;
  ASSERT_EQ(backend_->IbvAllocPd(ctx_, &pd), 0);
  char buf[64];
  ibv_mr* mr = nullptr;
  ASSERT_EQ(backend_->IbvRegMr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE, &mr), 0);
  ibv_sge inside{reinterpret_cast<uintptr_t>(buf), 32, mr->lkey};
  ibv_sge outside{reinterpret_cast<uintptr_t>(buf) + 40, 32, mr->lkey};

  EXPECT_EQ(backend_->IbvAdviseMr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &inside, 1), EOPNOTSUPP);
  SetOdpSupported(true);
  EXPECT_EQ(backend_->IbvAdviseMr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
                                  &inside, 1),
            0);
  EXPECT_EQ(backend_->IbvAdviseMr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &outside, 1), EFAULT);
  SetOdpSupported(false);

  EXPECT_EQ(backend_->IbvDeregMr(mr), 0);
  EXPECT_EQ(backend_->IbvDeallocPd(pd), 0);
}

TEST_F(DeviceTest, AdviseMr_WithOdp_BadAdviceOrFlags_Einval_WriteNeedsLocalWrite_Efault) {
  ibv_pd* pd = nullptr;
  ASSERT_EQ(backend_->IbvAllocPd(ctx_, &pd), 0);
  char buf[64];
  ibv_mr* read_only = nullptr;
  ASSERT_EQ(backend_->IbvRegMr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_READ, &read_only), 0);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 16, read_only->lkey};
  SetOdpSupported(true);

  EXPECT_EQ(backend_->IbvAdviseMr(pd, static_cast<ibv_advise_mr_advice>(77), 0, &sge, 1), EINVAL);
  EXPECT_EQ(backend_->IbvAdviseMr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 1u << 7, &sge, 1), EINVAL);
  EXPECT_EQ(backend_->IbvAdviseMr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 0), EINVAL);
  EXPECT_EQ(backend_->IbvAdviseMr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &sge, 1), EFAULT)
      << "prefetching for write needs a writable (LOCAL_WRITE) region";
  EXPECT_EQ(backend_->IbvAdviseMr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &sge, 1), 0);
  SetOdpSupported(false);
  EXPECT_EQ(backend_->IbvAdviseMr(pd, static_cast<ibv_advise_mr_advice>(77), 0, &sge, 1),
            EOPNOTSUPP)
      << "without ODP every advice is unsupported";

  EXPECT_EQ(backend_->IbvDeregMr(read_only), 0);
  EXPECT_EQ(backend_->IbvDeallocPd(pd), 0);
}

// ---- Protection checks on the data path ---------------------------------------------------

class MrAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status status = conn_.Connect(ConnectionOptions());
    ASSERT_TRUE(status.ok()) << status;
  }

  // The one completion of the active side, its status.
  ibv_wc_status OnlyStatus() {
    std::vector<ibv_wc> wcs = PollAll(backend_, conn_.active.send_cq);
    EXPECT_EQ(wcs.size(), 1u);
    return wcs.empty() ? IBV_WC_GENERAL_ERR : wcs[0].status;
  }

  Backend* backend_ = SimBackend();
  TestConnection conn_{backend_};
};

TEST_F(MrAccessTest, RemoteWriteOutOfBounds_RemAccessErr_MemoryUntouched) {
  TestBuffer local(backend_, conn_.active.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  std::vector<uint8_t> backing(64, 0xAA);  // the MR covers bytes [16, 48) only
  ibv_mr* remote_mr = nullptr;
  ASSERT_EQ(
      backend_->IbvRegMr(conn_.passive.pd, backing.data() + 16, 32, kRemoteAccess, &remote_mr), 0);
  std::memset(local.data(), 0x55, 32);
  ibv_sge sge = local.Sge(0, 16);
  const uint64_t last_bytes = reinterpret_cast<uintptr_t>(backing.data()) + 40;  // 40..56

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, last_bytes, remote_mr->rkey), 0);

  EXPECT_EQ(OnlyStatus(), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(backing, std::vector<uint8_t>(64, 0xAA));
  EXPECT_EQ(conn_.active.qp()->state, IBV_QPS_ERR);
  EXPECT_EQ(backend_->IbvDeregMr(remote_mr), 0);
}

TEST_F(MrAccessTest, RemoteWriteWithoutRemoteWriteAccess_RemAccessErr) {
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  std::memset(local.data(), 0x55, 16);
  ibv_sge sge = local.Sge(0, 8);

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);

  EXPECT_EQ(OnlyStatus(), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(remote.data()[0], 0);
}

TEST_F(MrAccessTest, RemoteReadWithoutRemoteReadAccess_RemAccessErr) {
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_sge sge = local.Sge(0, 8);

  ASSERT_EQ(PostRead(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey), 0);

  EXPECT_EQ(OnlyStatus(), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(MrAccessTest, RkeyOfAnotherPd_RemAccessErr) {
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer mine(backend_, conn_.active.pd, 16, kRemoteAccess);  // on the requester's PD
  ibv_sge sge = local.Sge(0, 8);

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, mine.addr(), mine.mr()->rkey), 0);

  EXPECT_EQ(OnlyStatus(), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(MrAccessTest, LocalSgeWithUnknownLkey_LocProtErr) {
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  ibv_sge sge = local.Sge(0, 8);
  sge.lkey = local.mr()->rkey;  // an rkey is not an lkey

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);

  EXPECT_EQ(OnlyStatus(), IBV_WC_LOC_PROT_ERR);
}

TEST_F(MrAccessTest, LocalSgeOutsideItsMr_LocProtErr) {
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 64, kRemoteAccess);
  ibv_sge sge = local.Sge(8, 16);  // 8 bytes past the end

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);

  EXPECT_EQ(OnlyStatus(), IBV_WC_LOC_PROT_ERR);
}

TEST_F(MrAccessTest, ReadIntoMrWithoutLocalWrite_LocProtErr) {
  TestBuffer local(backend_, conn_.active.pd, 16, /*access=*/0);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  ibv_sge sge = local.Sge(0, 8);

  ASSERT_EQ(PostRead(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey), 0);

  EXPECT_EQ(OnlyStatus(), IBV_WC_LOC_PROT_ERR);
}

TEST_F(MrAccessTest, ZeroLengthWrite_ChecksNoKey) {
  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, nullptr, 0, 0, /*rkey=*/0xbad), 0);

  EXPECT_EQ(OnlyStatus(), IBV_WC_SUCCESS);
}

TEST_F(MrAccessTest, AfterAnError_LaterWrsFlush) {
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  ibv_sge sge = local.Sge(0, 8);
  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), 0xbad), 0);

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 2, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_REM_ACCESS_ERR),
                          Field(&ibv_wc::status, IBV_WC_WR_FLUSH_ERR)));
  EXPECT_EQ(remote.data()[0], 0);
}

TEST_F(MrAccessTest, DeallocPd_WithQp_Ebusy) {
  EXPECT_EQ(backend_->IbvDeallocPd(conn_.passive.pd), EBUSY);
}

}  // namespace
}  // namespace softrpma::sim::testing
