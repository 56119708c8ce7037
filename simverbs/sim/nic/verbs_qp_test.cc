// verbs_qp_test: QPs of ibv_create_qp connected by ibv_modify_qp, without the CM (qp.h, "QPs of
// ibv_create_qp"): the state machine and its attribute masks, the binding at RTR, the data
// moving, and traffic toward a QP that is not there.

#include <endian.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/mutex.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/fabric/wire.h"
#include "simverbs/sim/nic/device.h"
#include "simverbs/sim/profiles/device_profile.h"
#include "simverbs/sim/nic/qp.h"
#include "simverbs/sim/sim_backend.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;

constexpr int kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                         IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

ibv_qp_attr InitAttr() {
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = 1;
  attr.qp_access_flags = kRemoteAccess;
  return attr;
}

ibv_qp_attr RtrAttr(uint32_t dest_qp_num, const ibv_gid& dgid) {
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = dest_qp_num;
  attr.rq_psn = 1;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.is_global = 1;
  attr.ah_attr.grh.dgid = dgid;
  attr.ah_attr.grh.hop_limit = 1;
  attr.ah_attr.grh.sgid_index = 0;
  attr.ah_attr.port_num = 1;
  return attr;
}

ibv_qp_attr RtsAttr() {
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 1;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.max_rd_atomic = 1;
  return attr;
}

ibv_gid OurGid() {
  ibv_gid gid;
  ProcessGid(gid.raw);
  return gid;
}

// Polls `cq` until `n` completions came (or 10 s of real time passed: the peer is served by
// the fabric thread).
std::vector<ibv_wc> PollN(Backend* backend, ibv_cq* cq, size_t n) {
  std::vector<ibv_wc> all;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (all.size() < n && std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc[8];
    int polled = 0;
    EXPECT_EQ(backend->IbvPollCq(cq, 8, wc, &polled), 0);
    all.insert(all.end(), wc, wc + polled);
    if (polled == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return all;
}

struct Side {
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
};

class VerbsQpTest : public ::testing::Test {
 protected:
  // An RC QP's attributes on `side`'s CQ, 16 WRs each way (ibv_qp_init_attr or _ex).
  template <typename Attr>
  static Attr QpAttr(Side* side, uint32_t max_send_sge) {
    Attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.send_cq = side->cq;
    attr.recv_cq = side->cq;
    attr.cap.max_send_wr = 16;
    attr.cap.max_recv_wr = 16;
    attr.cap.max_send_sge = max_send_sge;
    attr.cap.max_recv_sge = 1;
    attr.qp_type = IBV_QPT_RC;
    return attr;
  }

  void SetUp() override {
    backend_ = SimBackend();
    ASSERT_NE(backend_, nullptr);
    for (Side* side : {&a_, &b_}) {
      ASSERT_EQ(backend_->IbvAllocPd(SimContext(), &side->pd), 0);
      ASSERT_EQ(backend_->IbvCreateCq(SimContext(), 64, nullptr, nullptr, 0, &side->cq), 0);
      side->qp = MakeQp(side);
      ASSERT_NE(side->qp, nullptr);
    }
  }
  void TearDown() override {
    for (Side* side : {&a_, &b_}) {
      if (side->qp != nullptr) {
        EXPECT_EQ(backend_->IbvDestroyQp(side->qp), 0);
      }
      EXPECT_EQ(backend_->IbvDestroyCq(side->cq), 0);
      EXPECT_EQ(backend_->IbvDeallocPd(side->pd), 0);
    }
  }

  ibv_qp* MakeQp(Side* side, ibv_qp_type type = IBV_QPT_RC, int* err = nullptr) {
    ibv_qp_init_attr attr = QpAttr<ibv_qp_init_attr>(side, /*max_send_sge=*/1);
    attr.qp_type = type;
    ibv_qp* qp = nullptr;
    const int rc = backend_->IbvCreateQp(side->pd, &attr, &qp);
    if (err != nullptr) *err = rc;
    return rc == 0 ? qp : nullptr;
  }

  int Modify(ibv_qp* qp, ibv_qp_attr attr, int mask) {
    return backend_->IbvModifyQp(qp, &attr, mask);
  }

  // Both QPs to RTS, each bound to the other; b_ grants `b_access` as its qp_access_flags.
  void ConnectPair(int b_access = kRemoteAccess) {
    ibv_qp_attr b_init = InitAttr();
    b_init.qp_access_flags = b_access;
    ASSERT_EQ(Modify(a_.qp, InitAttr(), kInitMask), 0);
    ASSERT_EQ(Modify(b_.qp, b_init, kInitMask), 0);
    ASSERT_EQ(Modify(a_.qp, RtrAttr(b_.qp->qp_num, OurGid()), kRtrMask), 0);
    ASSERT_EQ(Modify(b_.qp, RtrAttr(a_.qp->qp_num, OurGid()), kRtrMask), 0);
    for (Side* side : {&a_, &b_}) ASSERT_EQ(Modify(side->qp, RtsAttr(), kRtsMask), 0);
  }

  // a_ from RESET to RTS, bound to itself.
  void ConnectAToItself() {
    ASSERT_EQ(Modify(a_.qp, InitAttr(), kInitMask), 0);
    ASSERT_EQ(Modify(a_.qp, RtrAttr(a_.qp->qp_num, OurGid()), kRtrMask), 0);
    ASSERT_EQ(Modify(a_.qp, RtsAttr(), kRtsMask), 0);
  }

  // `text` written by a_ from the start of a buffer to its offset 32, through a_'s peer.
  void ExpectAWritesToItself(const char* text) {
    TestBuffer buf(backend_, a_.pd, 64, kRemoteAccess);
    std::memcpy(buf.data(), text, std::strlen(text) + 1);
    ibv_sge sge = buf.Sge(0, static_cast<uint32_t>(std::strlen(text) + 1));
    ASSERT_EQ(PostWrite(backend_, a_.qp, 1, &sge, 1, buf.addr(32), buf.mr()->rkey), 0);
    EXPECT_THAT(PollN(backend_, a_.cq, 1), ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
    EXPECT_STREQ(reinterpret_cast<char*>(buf.data() + 32), text);
  }

  // The carrier of qp's link (carrier.h): "local" or "host".
  static std::string CarrierOf(ibv_qp* qp) {
    SimLink* link = to_sim(qp)->link.get();
    softrpma::MutexLock lock(&link->mu);
    return link->carrier->name();
  }

  // Attributes that name only a state (for IBV_QP_STATE alone).
  static ibv_qp_attr StateAttr(ibv_qp_state state) {
    ibv_qp_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.qp_state = state;
    return attr;
  }

  Backend* backend_ = nullptr;
  Side a_;
  Side b_;
};

TEST_F(VerbsQpTest, StartsInResetAndQueryGivesWhatWasSet) {
  ibv_qp_attr attr;
  ibv_qp_init_attr init;
  ASSERT_EQ(backend_->IbvQueryQp(a_.qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RESET);
  EXPECT_EQ(init.qp_type, IBV_QPT_RC);
  EXPECT_GE(init.cap.max_send_wr, 16u);
  ConnectPair();
  ASSERT_EQ(backend_->IbvQueryQp(a_.qp, &attr, IBV_QP_STATE | IBV_QP_CAP, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(a_.qp->state, IBV_QPS_RTS);
  EXPECT_EQ(attr.dest_qp_num, b_.qp->qp_num);
  EXPECT_EQ(attr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(attr.timeout, 14);
  EXPECT_EQ(attr.retry_cnt, 7);
  EXPECT_EQ(attr.min_rnr_timer, 12);
  EXPECT_EQ(attr.port_num, 1);
  EXPECT_EQ(attr.qp_access_flags, kRemoteAccess);
  EXPECT_EQ(std::memcmp(attr.ah_attr.grh.dgid.raw, OurGid().raw, 16), 0);
  EXPECT_GE(attr.cap.max_send_wr, 16u);
}

TEST_F(VerbsQpTest, OnlyRcAndUd) {
  int err = 0;
  ibv_qp* ud = MakeQp(&a_, IBV_QPT_UD, &err);
  ASSERT_NE(ud, nullptr);
  EXPECT_EQ(ud->qp_type, IBV_QPT_UD);
  EXPECT_EQ(backend_->IbvDestroyQp(ud), 0);
  EXPECT_EQ(MakeQp(&a_, IBV_QPT_UC, &err), nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
  EXPECT_EQ(MakeQp(&a_, static_cast<ibv_qp_type>(77), &err), nullptr);
  EXPECT_EQ(err, EINVAL);
}

TEST_F(VerbsQpTest, EachTransitionNeedsItsMask) {
  // RESET -> INIT: each required attribute missing.
  for (int missing : {IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_ACCESS_FLAGS}) {
    EXPECT_EQ(Modify(a_.qp, InitAttr(), kInitMask & ~missing), EINVAL) << missing;
  }
  EXPECT_EQ(Modify(a_.qp, InitAttr(), kInitMask | IBV_QP_SQ_PSN), EINVAL);  // not allowed here
  // RESET -> RTR / RTS: not transitions.
  EXPECT_EQ(Modify(a_.qp, RtrAttr(b_.qp->qp_num, OurGid()), kRtrMask), EINVAL);
  EXPECT_EQ(Modify(a_.qp, RtsAttr(), kRtsMask), EINVAL);
  ASSERT_EQ(Modify(a_.qp, InitAttr(), kInitMask), 0);
  EXPECT_EQ(a_.qp->state, IBV_QPS_INIT);
  // INIT -> RTR.
  for (int missing : {IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_DEST_QPN, IBV_QP_RQ_PSN,
                      IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_MIN_RNR_TIMER}) {
    EXPECT_EQ(Modify(a_.qp, RtrAttr(b_.qp->qp_num, OurGid()), kRtrMask & ~missing), EINVAL)
        << missing;
  }
  EXPECT_EQ(Modify(a_.qp, RtsAttr(), kRtsMask), EINVAL);  // INIT -> RTS
  // RoCE: no GRH, no route.
  ibv_qp_attr no_grh = RtrAttr(b_.qp->qp_num, OurGid());
  no_grh.ah_attr.is_global = 0;
  EXPECT_EQ(Modify(a_.qp, no_grh, kRtrMask), EINVAL);
  ibv_qp_attr bad_port = InitAttr();
  bad_port.port_num = 2;
  EXPECT_EQ(Modify(a_.qp, bad_port, IBV_QP_PORT), EINVAL);  // INIT -> INIT, port 2
  EXPECT_EQ(Modify(a_.qp, InitAttr(), IBV_QP_ACCESS_FLAGS), 0);  // INIT -> INIT
  ASSERT_EQ(Modify(a_.qp, RtrAttr(b_.qp->qp_num, OurGid()), kRtrMask), 0);
  EXPECT_EQ(a_.qp->state, IBV_QPS_RTR);
  // RTR -> RTS.
  for (int missing : {IBV_QP_SQ_PSN, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY,
                      IBV_QP_MAX_QP_RD_ATOMIC}) {
    EXPECT_EQ(Modify(a_.qp, RtsAttr(), kRtsMask & ~missing), EINVAL) << missing;
  }
  EXPECT_EQ(Modify(a_.qp, RtsAttr(), kRtsMask | IBV_QP_DEST_QPN), EINVAL);
  ibv_qp_attr bad_retry = RtsAttr();
  bad_retry.retry_cnt = 8;
  EXPECT_EQ(Modify(a_.qp, bad_retry, kRtsMask), EINVAL);
  ASSERT_EQ(Modify(a_.qp, RtsAttr(), kRtsMask), 0);
  EXPECT_EQ(a_.qp->state, IBV_QPS_RTS);
  EXPECT_EQ(Modify(a_.qp, RtsAttr(), IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER), 0);  // RTS -> RTS
  EXPECT_EQ(Modify(a_.qp, RtsAttr(), kRtsMask), EINVAL);  // not again
  // Any state -> ERR, then RESET; ERR -> INIT is not a transition.
  const ibv_qp_attr to_err = StateAttr(IBV_QPS_ERR);
  ASSERT_EQ(Modify(a_.qp, to_err, IBV_QP_STATE), 0);
  EXPECT_EQ(a_.qp->state, IBV_QPS_ERR);
  EXPECT_EQ(Modify(a_.qp, InitAttr(), kInitMask), EINVAL);
  const ibv_qp_attr to_reset = StateAttr(IBV_QPS_RESET);
  EXPECT_EQ(Modify(a_.qp, to_reset, IBV_QP_STATE | IBV_QP_PORT), EINVAL);  // STATE alone
  ASSERT_EQ(Modify(a_.qp, to_reset, IBV_QP_STATE), 0);
  EXPECT_EQ(a_.qp->state, IBV_QPS_RESET);
  // RESET -> ERR is not a transition either (the kernel's table: RESET goes to RESET or INIT).
  EXPECT_EQ(Modify(a_.qp, to_err, IBV_QP_STATE), EINVAL);
  EXPECT_EQ(Modify(a_.qp, InitAttr(), kInitMask), 0);  // and round again
}

// No driver refuses IBV_ACCESS_ON_DEMAND in a QP's access flags (docs/DEVICES.md, "The QP's
// remote access"): taken on every profile, whether the device has ODP or not, and kept.
TEST_F(VerbsQpTest, OnDemandAccessFlag_TakenOnEveryProfile) {
  ibv_qp_attr odp = InitAttr();
  odp.qp_access_flags = kRemoteAccess | IBV_ACCESS_ON_DEMAND;
  ASSERT_EQ(Modify(a_.qp, InitAttr(), kInitMask), 0);
  for (const DeviceProfile& profile : DeviceProfiles()) {
    SetActiveProfile(profile);
    for (bool odp_supported : {true, false}) {
      SetOdpSupported(odp_supported);
      EXPECT_EQ(Modify(a_.qp, odp, IBV_QP_ACCESS_FLAGS), 0) << profile.name << odp_supported;
      ibv_qp_attr got;
      ibv_qp_init_attr init;
      ASSERT_EQ(backend_->IbvQueryQp(a_.qp, &got, IBV_QP_ACCESS_FLAGS, &init), 0);
      EXPECT_EQ(got.qp_access_flags, static_cast<unsigned>(odp.qp_access_flags)) << profile.name;
    }
    ibv_qp_attr unknown = InitAttr();
    unknown.qp_access_flags = kRemoteAccess | IBV_ACCESS_RELAXED_ORDERING;
    EXPECT_EQ(Modify(a_.qp, unknown, IBV_QP_ACCESS_FLAGS), EINVAL) << profile.name;
  }
  ResetDeviceOverrides();
  SetActiveProfile(DeviceProfiles()[0]);
}

TEST_F(VerbsQpTest, ReceivesFromInitSendsOnlyInRts) {
  TestBuffer buf(backend_, a_.pd, 64, kRemoteAccess);
  ibv_sge sge = buf.Sge(0, 64);
  EXPECT_EQ(PostRecvBuf(backend_, a_.qp, 1, &sge, 1), EINVAL);  // RESET
  ASSERT_EQ(Modify(a_.qp, InitAttr(), kInitMask), 0);
  EXPECT_EQ(PostRecvBuf(backend_, a_.qp, 1, &sge, 1), 0);  // INIT
  EXPECT_EQ(PostSendMsg(backend_, a_.qp, 2, &sge, 1), EINVAL);
  ASSERT_EQ(Modify(a_.qp, RtrAttr(b_.qp->qp_num, OurGid()), kRtrMask), 0);
  EXPECT_EQ(PostSendMsg(backend_, a_.qp, 2, &sge, 1), EINVAL);  // RTR
}

TEST_F(VerbsQpTest, WriteSendReadMoveData) {
  ConnectPair();
  // Two QPs of one process: one in-process link, as the CM's (no fabric connection).
  EXPECT_EQ(to_sim(a_.qp)->link, to_sim(b_.qp)->link);
  TestBuffer a_buf(backend_, a_.pd, 64, kRemoteAccess);
  TestBuffer b_buf(backend_, b_.pd, 64, kRemoteAccess);
  std::memcpy(a_buf.data(), "written by a", 13);
  std::memcpy(b_buf.data() + 32, "read from b", 12);

  ibv_sge src = a_buf.Sge(0, 13);
  ASSERT_EQ(PostWrite(backend_, a_.qp, 1, &src, 1, b_buf.addr(0), b_buf.mr()->rkey), 0);
  EXPECT_THAT(PollN(backend_, a_.cq, 1),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
  EXPECT_STREQ(reinterpret_cast<char*>(b_buf.data()), "written by a");

  ibv_sge dst = a_buf.Sge(16, 12);
  ASSERT_EQ(PostRead(backend_, a_.qp, 2, &dst, 1, b_buf.addr(32), b_buf.mr()->rkey), 0);
  EXPECT_THAT(PollN(backend_, a_.cq, 1),
              ElementsAre(Field(&ibv_wc::opcode, IBV_WC_RDMA_READ)));
  EXPECT_STREQ(reinterpret_cast<char*>(a_buf.data() + 16), "read from b");

  ibv_sge recv = b_buf.Sge(48, 16);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 3, &recv, 1), 0);
  std::memcpy(a_buf.data() + 40, "hello", 6);
  ibv_sge msg = a_buf.Sge(40, 6);
  ASSERT_EQ(PostSendMsg(backend_, a_.qp, 4, &msg, 1), 0);
  EXPECT_THAT(PollN(backend_, a_.cq, 1), ElementsAre(Field(&ibv_wc::wr_id, 4u)));
  std::vector<ibv_wc> got = PollN(backend_, b_.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(got[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(got[0].byte_len, 6u);
  EXPECT_EQ(got[0].src_qp, a_.qp->qp_num);
  EXPECT_STREQ(reinterpret_cast<char*>(b_buf.data() + 48), "hello");
}

// An RDMA WRITE needs IBV_ACCESS_REMOTE_WRITE on the responder's QP and an RDMA READ
// IBV_ACCESS_REMOTE_READ, whatever the MR grants: without it the requester completes with
// IBV_WC_REM_ACCESS_ERR and both QPs go to ERROR, as for an MR without the access.
TEST_F(VerbsQpTest, QpWithoutTheRemoteAccessRefusesTheRequest) {
  struct Case {
    const char* name;
    int b_access;
    bool read;
  };
  for (const Case& c : {Case{"write without REMOTE_WRITE",
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, false},
                        Case{"read without REMOTE_READ",
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, true}}) {
    SCOPED_TRACE(c.name);
    TearDown();
    SetUp();
    ConnectPair(c.b_access);
    TestBuffer a_buf(backend_, a_.pd, 64, kRemoteAccess);
    TestBuffer b_buf(backend_, b_.pd, 64, kRemoteAccess);
    std::memcpy(a_buf.data(), "from a", 7);
    std::memcpy(b_buf.data(), "from b", 7);
    ibv_sge sge = a_buf.Sge(c.read ? 32 : 0, 7);
    ASSERT_EQ(c.read ? PostRead(backend_, a_.qp, 1, &sge, 1, b_buf.addr(0), b_buf.mr()->rkey)
                     : PostWrite(backend_, a_.qp, 1, &sge, 1, b_buf.addr(32), b_buf.mr()->rkey),
              0);
    EXPECT_THAT(PollN(backend_, a_.cq, 1),
                ElementsAre(Field(&ibv_wc::status, IBV_WC_REM_ACCESS_ERR)));
    EXPECT_EQ(b_buf.data()[32], 0) << "the write reached memory";
    EXPECT_EQ(a_buf.data()[32], 0) << "the read brought data";
    EXPECT_EQ(a_.qp->state, IBV_QPS_ERR);
    EXPECT_EQ(b_.qp->state, IBV_QPS_ERR);
  }
}

TEST_F(VerbsQpTest, QpBoundToItselfLoopsBack) {
  ConnectAToItself();
  ExpectAWritesToItself("loop");
}

TEST_F(VerbsQpTest, ResetAndRebindToAnotherQp) {
  ConnectPair();
  for (Side* side : {&a_, &b_}) ASSERT_EQ(Modify(side->qp, StateAttr(IBV_QPS_RESET), IBV_QP_STATE), 0);
  // a and b again, b binding first this time.
  for (Side* side : {&a_, &b_}) ASSERT_EQ(Modify(side->qp, InitAttr(), kInitMask), 0);
  ASSERT_EQ(Modify(b_.qp, RtrAttr(a_.qp->qp_num, OurGid()), kRtrMask), 0);
  ASSERT_EQ(Modify(a_.qp, RtrAttr(b_.qp->qp_num, OurGid()), kRtrMask), 0);
  for (Side* side : {&a_, &b_}) ASSERT_EQ(Modify(side->qp, RtsAttr(), kRtsMask), 0);
  EXPECT_EQ(to_sim(a_.qp)->link, to_sim(b_.qp)->link);
  TestBuffer a_buf(backend_, a_.pd, 64, kRemoteAccess);
  TestBuffer b_buf(backend_, b_.pd, 64, kRemoteAccess);
  std::memcpy(b_buf.data(), "again", 6);
  ibv_sge src = b_buf.Sge(0, 6);
  ASSERT_EQ(PostWrite(backend_, b_.qp, 1, &src, 1, a_buf.addr(0), a_buf.mr()->rkey), 0);
  EXPECT_THAT(PollN(backend_, b_.cq, 1), ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
  EXPECT_STREQ(reinterpret_cast<char*>(a_buf.data()), "again");
}

TEST_F(VerbsQpTest, ResetThenBoundToItselfLeavesTheSharedLink) {
  ConnectPair();
  ASSERT_EQ(Modify(a_.qp, StateAttr(IBV_QPS_RESET), IBV_QP_STATE), 0);
  ConnectAToItself();
  EXPECT_NE(to_sim(a_.qp)->link, to_sim(b_.qp)->link);
  ExpectAWritesToItself("mine");
}

// A link's carrier follows its binding: LOCAL for two QPs of this process on one link, HOST
// while the QP is bound through the fabric (to itself: its own endpoint), LOCAL again after
// RESET, with no connection left on the link.
TEST_F(VerbsQpTest, TheLinksCarrierFollowsTheBinding) {
  EXPECT_EQ(CarrierOf(a_.qp), "local");
  ConnectPair();
  EXPECT_EQ(CarrierOf(a_.qp), "local");
  EXPECT_EQ(CarrierOf(b_.qp), "local");
  ASSERT_EQ(Modify(a_.qp, StateAttr(IBV_QPS_RESET), IBV_QP_STATE), 0);
  ConnectAToItself();
  EXPECT_EQ(CarrierOf(a_.qp), "host");
  ExpectAWritesToItself("carried");
  ASSERT_EQ(Modify(a_.qp, StateAttr(IBV_QPS_RESET), IBV_QP_STATE), 0);
  EXPECT_EQ(CarrierOf(a_.qp), "local");
  {
    SimLink* link = to_sim(a_.qp)->link.get();
    softrpma::MutexLock lock(&link->mu);
    EXPECT_EQ(link->remote, nullptr);
  }
  // And a LOCAL link again works as one: a and b bound to each other.
  ASSERT_EQ(Modify(b_.qp, StateAttr(IBV_QPS_RESET), IBV_QP_STATE), 0);
  ConnectPair();
  EXPECT_EQ(CarrierOf(a_.qp), "local");
  EXPECT_EQ(to_sim(a_.qp)->link, to_sim(b_.qp)->link);
}

// mlx5 takes a QP's completions out of its CQs when the QP is destroyed or moved to RESET
// (__mlx5_cq_clean), polled or not; the other QPs' stay, in order. rxe and siw leave them.
// libfabric's verbs provider closes an endpoint and then reads its CQ: a receive completion
// left behind names an endpoint that is gone.
TEST_F(VerbsQpTest, DestroyAndResetTakeTheQpsCompletionsOutOfItsCqOnMlx5Only) {
  for (const DeviceProfile& profile : DeviceProfiles()) {
    for (bool reset : {false, true}) {
      SCOPED_TRACE(std::string(profile.name) + (reset ? ", RESET" : ", destroy"));
      TearDown();
      SetActiveProfile(profile);
      SetUp();
      ConnectPair();
      // c, on b's CQ, bound to itself: one completion of another QP on that CQ.
      ibv_qp* c = MakeQp(&b_);
      ASSERT_NE(c, nullptr);
      ASSERT_EQ(Modify(c, InitAttr(), kInitMask), 0);
      ASSERT_EQ(Modify(c, RtrAttr(c->qp_num, OurGid()), kRtrMask), 0);
      ASSERT_EQ(Modify(c, RtsAttr(), kRtsMask), 0);
      TestBuffer a_buf(backend_, a_.pd, 64, kRemoteAccess);
      TestBuffer b_buf(backend_, b_.pd, 64, kRemoteAccess);
      ibv_sge recv = b_buf.Sge(0, 16);
      ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 10, &recv, 1), 0);
      ibv_sge msg = a_buf.Sge(0, 8);
      ASSERT_EQ(PostSendMsg(backend_, a_.qp, 11, &msg, 1), 0);
      // The send completes once b's receive took the message: b's completion is in b's CQ.
      ASSERT_THAT(PollN(backend_, a_.cq, 1), ElementsAre(Field(&ibv_wc::wr_id, 11u)));
      ibv_sge src = b_buf.Sge(16, 8);
      ASSERT_EQ(PostWrite(backend_, c, 12, &src, 1, b_buf.addr(32), b_buf.mr()->rkey), 0);
      if (reset) {
        ASSERT_EQ(Modify(b_.qp, StateAttr(IBV_QPS_RESET), IBV_QP_STATE), 0);
      } else {
        ASSERT_EQ(backend_->IbvDestroyQp(b_.qp), 0);
        b_.qp = nullptr;
      }
      const bool cleaned = profile.cq_cleaned_at_destroy_qp;
      std::vector<ibv_wc> got = PollN(backend_, b_.cq, cleaned ? 1 : 2);
      std::vector<uint64_t> ids;
      for (const ibv_wc& wc : got) ids.push_back(wc.wr_id);
      if (cleaned) {
        EXPECT_THAT(ids, ElementsAre(12u));
      } else {
        EXPECT_THAT(ids, ::testing::UnorderedElementsAre(10u, 12u));
      }
      int polled = -1;
      ibv_wc more;
      EXPECT_EQ(backend_->IbvPollCq(b_.cq, 1, &more, &polled), 0);
      EXPECT_EQ(polled, 0);
      EXPECT_EQ(backend_->IbvDestroyQp(c), 0);
      if (reset) {  // b's QP is usable again: its queue has every slot free
        EXPECT_EQ(to_sim(b_.qp)->rq_in_use.load(), 0u);
      }
    }
  }
  SetActiveProfile(DeviceProfiles()[0]);
}

TEST_F(VerbsQpTest, AbsentQpNumberEndsInRetryExceeded) {
  ASSERT_EQ(Modify(a_.qp, InitAttr(), kInitMask), 0);
  ASSERT_EQ(Modify(a_.qp, RtrAttr(0xabcdef, OurGid()), kRtrMask), 0);  // nobody has it
  ASSERT_EQ(Modify(a_.qp, RtsAttr(), kRtsMask), 0);
  TestBuffer buf(backend_, a_.pd, 16, kRemoteAccess);
  ibv_sge sge = buf.Sge(0, 8);
  ASSERT_EQ(PostWrite(backend_, a_.qp, 1, &sge, 1, 0x1000, 1), 0);
  EXPECT_THAT(PollN(backend_, a_.cq, 1),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_RETRY_EXC_ERR)));
  EXPECT_EQ(a_.qp->state, IBV_QPS_ERR);
}

TEST_F(VerbsQpTest, PeerNotYetRtrEndsInRetryExceeded) {
  ASSERT_EQ(Modify(a_.qp, InitAttr(), kInitMask), 0);
  ASSERT_EQ(Modify(b_.qp, InitAttr(), kInitMask), 0);  // b stays INIT
  ASSERT_EQ(Modify(a_.qp, RtrAttr(b_.qp->qp_num, OurGid()), kRtrMask), 0);
  ASSERT_EQ(Modify(a_.qp, RtsAttr(), kRtsMask), 0);
  TestBuffer buf(backend_, a_.pd, 16, kRemoteAccess);
  ibv_sge sge = buf.Sge(0, 8);
  ASSERT_EQ(PostSendMsg(backend_, a_.qp, 1, &sge, 1), 0);
  EXPECT_THAT(PollN(backend_, a_.cq, 1),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_RETRY_EXC_ERR)));
}

TEST_F(VerbsQpTest, GidNobodyHasEndsInRetryExceeded) {
  ibv_gid gid = OurGid();
  gid.raw[13] ^= 0x80;  // a pid no process of this fabric has (pids are below 2^22)
  ASSERT_EQ(Modify(a_.qp, InitAttr(), kInitMask), 0);
  ASSERT_EQ(Modify(a_.qp, RtrAttr(0x11, gid), kRtrMask), 0);
  ASSERT_EQ(Modify(a_.qp, RtsAttr(), kRtsMask), 0);
  TestBuffer buf(backend_, a_.pd, 16, kRemoteAccess);
  ibv_sge sge = buf.Sge(0, 8);
  ASSERT_EQ(PostWrite(backend_, a_.qp, 1, &sge, 1, 0x1000, 1), 0);
  EXPECT_THAT(PollN(backend_, a_.cq, 1),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_RETRY_EXC_ERR)));
}

// A hostile peer at this process's endpoint: what it gets back.
class Recorder final : public host::Conn::Handler {
 public:
  void OnMessage(const wire::Header& header, const uint8_t* body) override {
    softrpma::MutexLock lock(&mu);
    got.push_back(header);
  }
  void OnClosed() override {
    softrpma::MutexLock lock(&mu);
    closed = true;
  }
  softrpma::Mutex mu;
  std::vector<wire::Header> got;
  bool closed = false;
};

std::string OurEndpoint() {
  const ibv_gid gid = OurGid();
  std::string name = "gid-";
  char hex[3];
  for (uint8_t byte : gid.raw) {
    std::snprintf(hex, sizeof(hex), "%02x", byte);
    name += hex;
  }
  return name;
}

bool WaitFor(Recorder* recorder, size_t messages, bool closed) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      softrpma::MutexLock lock(&recorder->mu);
      if (recorder->got.size() >= messages && recorder->closed == closed) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST_F(VerbsQpTest, EndpointAnswersAnUnknownQpAndClosesOnAMessageBeforeTheBind) {
  // A write before any kQpBind: the connection ends, nothing is answered.
  auto first = std::make_shared<Recorder>();
  std::shared_ptr<host::Conn> conn;
  ASSERT_EQ(host::DialEndpoint(OurEndpoint(), first, &conn), 0);
  wire::Header write = wire::MakeHeader(wire::Type::kWrite);
  write.seq = 1;
  conn->Send(write, nullptr, 0);
  EXPECT_TRUE(WaitFor(first.get(), 0, true));
  conn->Close();

  // A bind of a version this one does not know: the same.
  auto second = std::make_shared<Recorder>();
  ASSERT_EQ(host::DialEndpoint(OurEndpoint(), second, &conn), 0);
  wire::QpBindBody bind;
  std::memset(&bind, 0, sizeof(bind));
  bind.version = wire::kQpBindVersion + 1;
  bind.dst_qp_num = a_.qp->qp_num;
  wire::Header header = wire::MakeHeader(wire::Type::kQpBind);
  header.body_len = sizeof(bind);
  iovec iov{&bind, sizeof(bind)};
  conn->Send(header, &iov, 1);
  EXPECT_TRUE(WaitFor(second.get(), 0, true));
  conn->Close();

  // A bind of this version for another GID's QP (a stale name): the same.
  auto other_gid = std::make_shared<Recorder>();
  ASSERT_EQ(host::DialEndpoint(OurEndpoint(), other_gid, &conn), 0);
  bind.version = wire::kQpBindVersion;
  bind.src_qp_num = 0x11;
  std::memset(bind.src_gid, 0xab, sizeof(bind.src_gid));
  conn->Send(header, &iov, 1);
  EXPECT_TRUE(WaitFor(other_gid.get(), 0, true));
  conn->Close();

  // Binds whose sender lies about itself, as the kernel (SO_PEERCRED) knows it: another pid,
  // or a GID that is not the sender's own (a third process's). Each ends the connection.
  const ibv_gid ours = OurGid();
  std::memcpy(bind.dst_gid, ours.raw, sizeof(bind.dst_gid));
  for (int lie = 0; lie < 2; ++lie) {
    auto liar = std::make_shared<Recorder>();
    ASSERT_EQ(host::DialEndpoint(OurEndpoint(), liar, &conn), 0);
    bind.pid = lie == 0 ? getpid() + 1 : getpid();
    std::memcpy(bind.src_gid, ours.raw, sizeof(bind.src_gid));
    if (lie == 1) bind.src_gid[15] ^= 1;  // the GID of pid ^ 1
    conn->Send(header, &iov, 1);
    conn->Send(write, nullptr, 0);
    EXPECT_TRUE(WaitFor(liar.get(), 0, true)) << "lie " << lie;
    conn->Close();
  }

  // A good bind (this process's own pid and GID) to a QP that is not connected to the sender:
  // each request is dropped, as a real responder drops it (answered RETRY_EXC_ERR: the
  // requester's retries run out).
  auto third = std::make_shared<Recorder>();
  ASSERT_EQ(host::DialEndpoint(OurEndpoint(), third, &conn), 0);
  bind.pid = getpid();
  std::memcpy(bind.src_gid, ours.raw, sizeof(bind.src_gid));
  conn->Send(header, &iov, 1);
  conn->Send(write, nullptr, 0);
  ASSERT_TRUE(WaitFor(third.get(), 1, false));
  {
    softrpma::MutexLock lock(&third->mu);
    EXPECT_EQ(third->got[0].type, static_cast<uint16_t>(wire::Type::kAck));
    EXPECT_EQ(third->got[0].seq, 1u);
    EXPECT_EQ(third->got[0].status, IBV_WC_RETRY_EXC_ERR);
  }
  conn->Close();
}

// A UD peer at this process's endpoint, as hostile as it likes: datagrams land only after a
// bind whose pid and GID the kernel confirms, their source GID is the bind's, and a prefix out
// of range or a request on a UD connection ends that connection with nothing delivered.
TEST_F(VerbsQpTest, EndpointUdDatagrams_LandOnlyAfterAnHonestBind_BadOnesEndTheConnection) {
  ibv_qp* ud = MakeQp(&b_, IBV_QPT_UD);
  ASSERT_NE(ud, nullptr);
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qkey = 0x77;
  ASSERT_EQ(Modify(ud, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  attr.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(Modify(ud, attr, IBV_QP_STATE), 0);
  TestBuffer in(backend_, b_.pd, 256, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = in.Sge(0, 256);
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_EQ(PostRecvBuf(backend_, ud, id, &sge, 1), 0);

  const ibv_gid ours = OurGid();
  wire::QpBindBody bind;
  std::memset(&bind, 0, sizeof(bind));
  bind.version = wire::kQpBindVersion;
  bind.src_qp_num = 0x42;
  bind.dst_qp_num = wire::kUdBindQpNum;
  bind.pid = getpid();
  std::memcpy(bind.src_gid, ours.raw, 16);
  std::memcpy(bind.dst_gid, ours.raw, 16);
  wire::Header bind_header = wire::MakeHeader(wire::Type::kQpBind);
  bind_header.body_len = sizeof(bind);
  iovec bind_iov{&bind, sizeof(bind)};
  struct Datagram {
    wire::UdSendPrefix prefix;
    char message[8];  // "hello" and its NUL: 6 bytes of it are sent
  } datagram;
  std::memset(&datagram, 0, sizeof(datagram));
  datagram.prefix.src_qp_num = 0x42;
  datagram.prefix.dst_qp_num = ud->qp_num;
  datagram.prefix.qkey = 0x77;
  datagram.prefix.hop_limit = 9;
  std::memcpy(datagram.message, "hello", 6);
  wire::Header send = wire::MakeHeader(wire::Type::kUdSend);
  send.body_len = sizeof(wire::UdSendPrefix) + 6;
  iovec send_iov{&datagram, send.body_len};

  // A datagram before any bind, and after a bind naming another pid: ended, nothing lands.
  auto unbound = std::make_shared<Recorder>();
  std::shared_ptr<host::Conn> conn;
  ASSERT_EQ(host::DialEndpoint(OurEndpoint(), unbound, &conn), 0);
  conn->Send(send, &send_iov, 1);
  EXPECT_TRUE(WaitFor(unbound.get(), 0, true));
  conn->Close();
  auto liar = std::make_shared<Recorder>();
  ASSERT_EQ(host::DialEndpoint(OurEndpoint(), liar, &conn), 0);
  bind.pid = getpid() + 1;
  conn->Send(bind_header, &bind_iov, 1);
  conn->Send(send, &send_iov, 1);
  EXPECT_TRUE(WaitFor(liar.get(), 0, true));
  conn->Close();
  EXPECT_TRUE(PollAll(backend_, b_.cq).empty());

  // An honest bind: the datagram lands, named by the bound GID and the prefix's QP number.
  bind.pid = getpid();
  auto honest = std::make_shared<Recorder>();
  ASSERT_EQ(host::DialEndpoint(OurEndpoint(), honest, &conn), 0);
  conn->Send(bind_header, &bind_iov, 1);
  conn->Send(send, &send_iov, 1);
  std::vector<ibv_wc> got = PollN(backend_, b_.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(got[0].src_qp, 0x42u);
  EXPECT_EQ(got[0].byte_len, 40u + 6u);
  EXPECT_STREQ(reinterpret_cast<char*>(in.data() + 40), "hello");
  EXPECT_EQ(std::memcmp(in.data() + 20 + 12, ours.raw + 12, 4), 0);  // the IPv4 source: the bind's
  EXPECT_EQ(in.data()[20 + 8], 9);                                   // TTL: the prefix's hop limit
  // On the same connection: another Q_Key is dropped; reserved bytes set, or a request, end it.
  datagram.prefix.qkey = 0x78;
  conn->Send(send, &send_iov, 1);
  datagram.prefix.qkey = 0x77;
  datagram.prefix.reserved[0] = 1;
  conn->Send(send, &send_iov, 1);
  EXPECT_TRUE(WaitFor(honest.get(), 0, true));
  conn->Close();
  auto requester = std::make_shared<Recorder>();
  ASSERT_EQ(host::DialEndpoint(OurEndpoint(), requester, &conn), 0);
  conn->Send(bind_header, &bind_iov, 1);
  wire::Header write = wire::MakeHeader(wire::Type::kWrite);
  write.seq = 1;
  conn->Send(write, nullptr, 0);
  EXPECT_TRUE(WaitFor(requester.get(), 0, true));  // no answer: ended
  conn->Close();
  EXPECT_TRUE(PollAll(backend_, b_.cq).empty());
  EXPECT_EQ(backend_->IbvDestroyQp(ud), 0);
}

TEST_F(VerbsQpTest, GidIsThisProcesssLoopbackAddress) {
  const ibv_gid gid = OurGid();
  const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  EXPECT_EQ(std::memcmp(gid.raw, prefix, 12), 0);
  EXPECT_EQ(gid.raw[12], 127);
  const uint32_t pid = (uint32_t{gid.raw[13]} << 16) | (uint32_t{gid.raw[14]} << 8) | gid.raw[15];
  EXPECT_EQ(pid, static_cast<uint32_t>(getpid()) & 0xffffff);
}

// ---- The extended post API on QPs of ibv_create_qp_ex (qp.h, "The extended post API") --------

constexpr uint64_t kRcOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                            IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                            IBV_QP_EX_WITH_RDMA_READ;

class ExtendedPostTest : public VerbsQpTest {
 protected:
  // Both QPs again, as extended QPs with `send_ops_flags`, connected.
  void Remake(uint64_t send_ops_flags) {
    for (Side* side : {&a_, &b_}) {
      ASSERT_EQ(backend_->IbvDestroyQp(side->qp), 0);
      side->qp = nullptr;
      int err = 0;
      side->qp = MakeQpEx(side, send_ops_flags, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                          &err);
      ASSERT_NE(side->qp, nullptr) << err;
    }
    ConnectPair();
    ASSERT_EQ(backend_->IbvQpToQpEx(a_.qp, &qpx_), 0);
    ASSERT_NE(qpx_, nullptr);
  }

  ibv_qp* MakeQpEx(Side* side, uint64_t send_ops_flags, uint32_t comp_mask, int* err) {
    ibv_qp_init_attr_ex attr = QpAttr<ibv_qp_init_attr_ex>(side, /*max_send_sge=*/2);
    attr.cap.max_inline_data = 64;
    attr.comp_mask = comp_mask;
    attr.pd = side->pd;
    attr.send_ops_flags = send_ops_flags;
    ibv_qp* qp = nullptr;
    *err = backend_->IbvCreateQpEx(SimContext(), &attr, &qp);
    return *err == 0 ? qp : nullptr;
  }

  void NextWr(uint64_t wr_id) {
    qpx_->wr_id = wr_id;
    qpx_->wr_flags = IBV_SEND_SIGNALED;
  }

  ibv_qp_ex* qpx_ = nullptr;
};

TEST_F(ExtendedPostTest, EveryBuilderMovesDataAsIbvPostSendWould) {
  Remake(kRcOps);
  TestBuffer a_buf(backend_, a_.pd, 128, kRemoteAccess);
  TestBuffer b_buf(backend_, b_.pd, 128, kRemoteAccess);
  std::memcpy(a_buf.data(), "two ", 4);
  std::memcpy(a_buf.data() + 8, "sges", 5);
  std::memcpy(b_buf.data() + 64, "read from b", 12);
  ibv_sge recv1 = b_buf.Sge(32, 16);
  ibv_sge recv2 = b_buf.Sge(48, 16);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 100, &recv1, 1), 0);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 101, &recv2, 1), 0);

  ibv_wr_start(qpx_);
  NextWr(1);  // RDMA WRITE of two SGEs
  ibv_wr_rdma_write(qpx_, b_buf.mr()->rkey, b_buf.addr(0));
  const ibv_sge two[2] = {a_buf.Sge(0, 4), a_buf.Sge(8, 5)};
  ibv_wr_set_sge_list(qpx_, 2, two);
  NextWr(2);  // RDMA WRITE with immediate data, inline: consumes recv 100
  ibv_wr_rdma_write_imm(qpx_, b_buf.mr()->rkey, b_buf.addr(16), htobe32(0x1234));
  char imm_text[] = "imm";
  ibv_wr_set_inline_data(qpx_, imm_text, sizeof(imm_text));
  NextWr(3);  // SEND with immediate data: recv 101
  ibv_wr_send_imm(qpx_, htobe32(0x5678));
  ibv_wr_set_sge(qpx_, a_buf.mr()->lkey, a_buf.addr(0), 4);
  NextWr(4);  // RDMA READ
  ibv_wr_rdma_read(qpx_, b_buf.mr()->rkey, b_buf.addr(64));
  ibv_wr_set_sge(qpx_, a_buf.mr()->lkey, a_buf.addr(64), 12);
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);

  std::vector<ibv_wc> sent = PollN(backend_, a_.cq, 4);
  ASSERT_EQ(sent.size(), 4u);
  const ibv_wc_opcode expected[] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_SEND,
                                    IBV_WC_RDMA_READ};
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(sent[i].status, IBV_WC_SUCCESS) << i;
    EXPECT_EQ(sent[i].wr_id, i + 1);
    EXPECT_EQ(sent[i].opcode, expected[i]) << i;
  }
  EXPECT_EQ(std::memcmp(b_buf.data(), "two sges", 9), 0);
  EXPECT_STREQ(reinterpret_cast<char*>(b_buf.data() + 16), "imm");
  EXPECT_STREQ(reinterpret_cast<char*>(a_buf.data() + 64), "read from b");

  std::vector<ibv_wc> got = PollN(backend_, b_.cq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 100u);
  EXPECT_EQ(got[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(got[0].imm_data, htobe32(0x1234));
  EXPECT_NE(got[0].wc_flags & IBV_WC_WITH_IMM, 0u);
  EXPECT_EQ(got[1].wr_id, 101u);
  EXPECT_EQ(got[1].opcode, IBV_WC_RECV);
  EXPECT_EQ(got[1].byte_len, 4u);
  EXPECT_EQ(got[1].imm_data, htobe32(0x5678));
  EXPECT_EQ(std::memcmp(b_buf.data() + 48, "two ", 4), 0);
}

TEST_F(ExtendedPostTest, InlineDataIsCopiedWhenItIsSet) {
  Remake(IBV_QP_EX_WITH_RDMA_WRITE);
  TestBuffer b_buf(backend_, b_.pd, 64, kRemoteAccess);
  char text[] = "as set";
  ibv_wr_start(qpx_);
  NextWr(1);
  ibv_wr_rdma_write(qpx_, b_buf.mr()->rkey, b_buf.addr(0));
  ibv_wr_set_inline_data(qpx_, text, sizeof(text));
  std::memcpy(text, "later", 6);  // before the batch is posted
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);
  EXPECT_THAT(PollN(backend_, a_.cq, 1), ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
  EXPECT_STREQ(reinterpret_cast<char*>(b_buf.data()), "as set");
}

TEST_F(ExtendedPostTest, ABadBuilderFailsTheWholeBatchAndPostsNothing) {
  Remake(IBV_QP_EX_WITH_RDMA_WRITE);
  TestBuffer a_buf(backend_, a_.pd, 64, kRemoteAccess);
  TestBuffer b_buf(backend_, b_.pd, 64, kRemoteAccess);
  std::memcpy(a_buf.data(), "data", 5);
  auto write_then = [&](const std::function<void()>& bad) {
    ibv_wr_start(qpx_);
    NextWr(1);
    ibv_wr_rdma_write(qpx_, b_buf.mr()->rkey, b_buf.addr(0));
    ibv_wr_set_sge(qpx_, a_buf.mr()->lkey, a_buf.addr(0), 5);
    bad();
    return ibv_wr_complete(qpx_);
  };
  // A builder the simulator does not model (a provider's NULL); more SGEs than the QP has and
  // inline data beyond max_inline_data (ENOMEM, as mlx5's setters: the default profile).
  EXPECT_EQ(write_then([&] { ibv_wr_local_inv(qpx_, 1); }), EINVAL);
  EXPECT_EQ(write_then([&] { ibv_wr_atomic_fetch_add(qpx_, b_buf.mr()->rkey, b_buf.addr(8), 1); }),
            EINVAL);
  const ibv_sge three[3] = {a_buf.Sge(0, 1), a_buf.Sge(1, 1), a_buf.Sge(2, 1)};
  EXPECT_EQ(write_then([&] { ibv_wr_set_sge_list(qpx_, 3, three); }), ENOMEM);
  std::vector<char> big(4096, 'x');
  EXPECT_EQ(write_then([&] { ibv_wr_set_inline_data(qpx_, big.data(), big.size()); }), ENOMEM);
  // A setter before any builder.
  ibv_wr_start(qpx_);
  ibv_wr_set_sge(qpx_, a_buf.mr()->lkey, a_buf.addr(0), 5);
  EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL);
  // Nothing of those batches was posted; an aborted one neither.
  ibv_wr_start(qpx_);
  NextWr(9);
  ibv_wr_rdma_write(qpx_, b_buf.mr()->rkey, b_buf.addr(0));
  ibv_wr_set_sge(qpx_, a_buf.mr()->lkey, a_buf.addr(0), 5);
  ibv_wr_abort(qpx_);
  ExecutePosted(backend_, a_.cq);
  int polled = -1;
  ibv_wc wc;
  EXPECT_EQ(backend_->IbvPollCq(a_.cq, 1, &wc, &polled), 0);
  EXPECT_EQ(polled, 0);
  EXPECT_EQ(b_buf.data()[0], 0);
  // The QP still posts.
  EXPECT_EQ(write_then([] {}), 0);
  EXPECT_THAT(PollN(backend_, a_.cq, 1), ElementsAre(Field(&ibv_wc::wr_id, 1u)));
  EXPECT_STREQ(reinterpret_cast<char*>(b_buf.data()), "data");
}

// A send WR beyond its QP's max_send_sge or max_inline_data: each profile answers as its
// provider does (docs/DEVICES.md, "Errnos of the SGE and inline limits"), from ibv_post_send
// and from the ibv_wr_* setters; ibv_post_recv's EINVAL is every profile's.
TEST_F(ExtendedPostTest, SgeAndInlineLimits_EachProfilesErrno) {
  Remake(IBV_QP_EX_WITH_RDMA_WRITE);
  const ibv_qp_cap cap = to_sim(a_.qp)->cap;
  TestBuffer a_buf(backend_, a_.pd, 4096, kRemoteAccess);
  TestBuffer b_buf(backend_, b_.pd, 4096, kRemoteAccess);
  std::vector<ibv_sge> sges;
  for (uint32_t i = 0; i <= cap.max_send_sge; ++i) sges.push_back(a_buf.Sge(i, 1));
  ibv_sge too_long = a_buf.Sge(0, cap.max_inline_data + 1);
  ibv_sge recv_sges[2] = {a_buf.Sge(0, 1), a_buf.Sge(1, 1)};
  ASSERT_LT(cap.max_recv_sge, 2u);
  std::vector<char> big(cap.max_inline_data + 1, 'x');
  struct Expected {
    const char* profile;
    int post_send;
    int wr_setter;
  };
  for (const Expected& want : {Expected{"mlx5", ENOMEM, ENOMEM}, Expected{"rxe", EINVAL, ENOSPC},
                               Expected{"siw", EINVAL, EINVAL}}) {
    SetActiveProfile(**FindDeviceProfile(want.profile));
    EXPECT_EQ(PostWrite(backend_, a_.qp, 1, sges.data(), static_cast<int>(sges.size()),
                        b_buf.addr(0), b_buf.mr()->rkey),
              want.post_send)
        << want.profile;
    EXPECT_EQ(PostWrite(backend_, a_.qp, 2, &too_long, 1, b_buf.addr(0), b_buf.mr()->rkey,
                        IBV_SEND_SIGNALED | IBV_SEND_INLINE),
              want.post_send)
        << want.profile;
    EXPECT_EQ(PostRecvBuf(backend_, a_.qp, 3, recv_sges, 2), EINVAL) << want.profile;
    ibv_wr_start(qpx_);
    NextWr(4);
    ibv_wr_rdma_write(qpx_, b_buf.mr()->rkey, b_buf.addr(0));
    ibv_wr_set_sge_list(qpx_, sges.size(), sges.data());
    EXPECT_EQ(ibv_wr_complete(qpx_), want.wr_setter) << want.profile;
    ibv_wr_start(qpx_);
    NextWr(5);
    ibv_wr_rdma_write(qpx_, b_buf.mr()->rkey, b_buf.addr(0));
    ibv_wr_set_inline_data(qpx_, big.data(), big.size());
    EXPECT_EQ(ibv_wr_complete(qpx_), want.wr_setter) << want.profile;
  }
  SetActiveProfile(DeviceProfiles()[0]);
  // Nothing was posted.
  ExecutePosted(backend_, a_.cq);
  EXPECT_TRUE(PollAll(backend_, a_.cq).empty());
}

// ibv_wr_post(3): "the entire posting will be aborted". Errors found only when the batch is
// posted (no room behind outstanding WRs, a WR ibv_post_send would refuse) post none of it.
TEST_F(ExtendedPostTest, ABatchThatCannotBePostedWholePostsNothing) {
  Remake(IBV_QP_EX_WITH_RDMA_WRITE);
  TestBuffer a_buf(backend_, a_.pd, 64, kRemoteAccess);
  TestBuffer b_buf(backend_, b_.pd, 64, kRemoteAccess);
  const uint32_t room = to_sim(a_.qp)->cap.max_send_wr;
  auto batch = [&](uint32_t n, uint64_t first_wr_id) {
    ibv_wr_start(qpx_);
    for (uint32_t i = 0; i < n; ++i) {
      NextWr(first_wr_id + i);
      ibv_wr_rdma_write(qpx_, b_buf.mr()->rkey, b_buf.addr(0));
      ibv_wr_set_sge(qpx_, a_buf.mr()->lkey, a_buf.addr(0), 8);
    }
    return ibv_wr_complete(qpx_);
  };
  ASSERT_EQ(batch(room - 2, 1), 0);  // outstanding: not polled
  EXPECT_EQ(batch(3, 100), ENOMEM);  // fits the queue, not behind them
  std::vector<ibv_wc> done = PollN(backend_, a_.cq, room - 2);
  ASSERT_EQ(done.size(), room - 2);
  for (const ibv_wc& wc : done) EXPECT_LT(wc.wr_id, 100u);
  ExecutePosted(backend_, a_.cq);
  EXPECT_TRUE(PollAll(backend_, a_.cq).empty());
  // A READ with inline data, behind a good WRITE: neither is posted.
  ibv_wr_start(qpx_);
  NextWr(200);
  ibv_wr_rdma_write(qpx_, b_buf.mr()->rkey, b_buf.addr(0));
  ibv_wr_set_sge(qpx_, a_buf.mr()->lkey, a_buf.addr(0), 8);
  NextWr(201);
  ibv_wr_rdma_read(qpx_, b_buf.mr()->rkey, b_buf.addr(0));
  ibv_wr_set_inline_data(qpx_, a_buf.data(), 8);
  EXPECT_EQ(ibv_wr_complete(qpx_), EINVAL);
  ExecutePosted(backend_, a_.cq);
  EXPECT_TRUE(PollAll(backend_, a_.cq).empty());
}

// As on mlx5 / rxe: an extended QP has every builder the device has (send_ops_flags only
// name what the program means to use), and IBV_SEND_INLINE in wr_flags means nothing (inline
// is what ibv_wr_set_inline_data does).
TEST_F(ExtendedPostTest, EveryModelledBuilderAndNoInlineFlag) {
  Remake(IBV_QP_EX_WITH_RDMA_WRITE);
  TestBuffer a_buf(backend_, a_.pd, 256, kRemoteAccess);
  TestBuffer b_buf(backend_, b_.pd, 256, kRemoteAccess);
  std::memcpy(b_buf.data(), "read anyway", 12);
  std::memset(a_buf.data() + 128, 'z', 100);  // more than max_inline_data (64)
  ibv_wr_start(qpx_);
  NextWr(1);
  ibv_wr_rdma_read(qpx_, b_buf.mr()->rkey, b_buf.addr(0));
  ibv_wr_set_sge(qpx_, a_buf.mr()->lkey, a_buf.addr(0), 12);
  qpx_->wr_id = 2;
  qpx_->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  ibv_wr_rdma_write(qpx_, b_buf.mr()->rkey, b_buf.addr(128));
  ibv_wr_set_sge(qpx_, a_buf.mr()->lkey, a_buf.addr(128), 100);
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);
  std::vector<ibv_wc> done = PollN(backend_, a_.cq, 2);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(done[1].status, IBV_WC_SUCCESS);
  EXPECT_STREQ(reinterpret_cast<char*>(a_buf.data()), "read anyway");
  EXPECT_EQ(std::memcmp(b_buf.data() + 128, a_buf.data() + 128, 100), 0);
}

TEST_F(ExtendedPostTest, CreateFlagsZero_APlainQp) {
  int err = 0;
  ibv_qp* qp = MakeQpEx(&a_, 0, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS, &err);
  ASSERT_NE(qp, nullptr) << err;
  EXPECT_EQ(qp->qp_type, IBV_QPT_RC);
  EXPECT_EQ(backend_->IbvDestroyQp(qp), 0);
}

TEST_F(ExtendedPostTest, CreationRefusesWhatIsNotModelled) {
  int err = 0;
  for (uint64_t other : {IBV_QP_EX_WITH_LOCAL_INV, IBV_QP_EX_WITH_BIND_MW,
                         IBV_QP_EX_WITH_SEND_WITH_INV}) {
    EXPECT_EQ(MakeQpEx(&a_, other | IBV_QP_EX_WITH_SEND,
                       IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, &err),
              nullptr);
    EXPECT_EQ(err, EOPNOTSUPP) << other;
  }
  EXPECT_EQ(MakeQpEx(&a_, 0, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, &err),
            nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
  ibv_qp_init_attr_ex flagged = QpAttr<ibv_qp_init_attr_ex>(&a_, /*max_send_sge=*/1);
  flagged.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  flagged.pd = a_.pd;
  flagged.create_flags = IBV_QP_CREATE_SCATTER_FCS;
  ibv_qp* refused = nullptr;
  EXPECT_EQ(backend_->IbvCreateQpEx(SimContext(), &flagged, &refused), EINVAL);
  EXPECT_EQ(MakeQpEx(&a_, 0, 0, &err), nullptr);  // no PD
  EXPECT_EQ(err, EINVAL);
  SetAtomicWriteSupported(false);
  EXPECT_EQ(MakeQpEx(&a_, IBV_QP_EX_WITH_ATOMIC_WRITE,
                     IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, &err),
            nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
  ResetDeviceOverrides();
  // siw has no immediate data: its builders are not offered.
  absl::StatusOr<const DeviceProfile*> siw = FindDeviceProfile("siw");
  ASSERT_TRUE(siw.ok());
  SetActiveProfile(**siw);
  EXPECT_EQ(MakeQpEx(&a_, IBV_QP_EX_WITH_SEND_WITH_IMM,
                     IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, &err),
            nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
  // siw reports atomic_cap IBV_ATOMIC_NONE: no compare-and-swap or fetch-and-add builders.
  for (uint64_t atomic : {IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD}) {
    EXPECT_EQ(MakeQpEx(&a_, atomic | IBV_QP_EX_WITH_SEND,
                       IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, &err),
              nullptr);
    EXPECT_EQ(err, EOPNOTSUPP) << atomic;
  }
  ibv_qp* plain = MakeQpEx(&a_, IBV_QP_EX_WITH_SEND,
                           IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, &err);
  EXPECT_NE(plain, nullptr) << err;
  if (plain != nullptr) {
    EXPECT_EQ(backend_->IbvDestroyQp(plain), 0);
  }
  SetActiveProfile(DeviceProfiles()[0]);
}

}  // namespace
}  // namespace softrpma::sim::testing
