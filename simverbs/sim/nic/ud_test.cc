// ud_test: UD QPs and address handles in one process (qp.h, "UD QPs"): the UD column of the
// state machine, a send landing behind its GRH, what drops a datagram, the path MTU, and the
// address handle's checks.

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/nic/device.h"
#include "simverbs/sim/nic/qp.h"
#include "simverbs/sim/profiles/device_profile.h"
#include "simverbs/sim/sim_control.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;

constexpr uint32_t kQkey = 0x11111111;
constexpr int kGrh = 40;

class UdTest : public ::testing::Test {
 protected:
  struct Side {
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
  };

  void SetUp() override {
    backend_ = SimBackend();
    ASSERT_NE(backend_, nullptr);
    for (Side* side : {&a_, &b_}) {
      ASSERT_EQ(backend_->IbvAllocPd(SimContext(), &side->pd), 0);
      ASSERT_EQ(backend_->IbvCreateCq(SimContext(), 64, nullptr, nullptr, 0, &side->cq), 0);
      side->qp = MakeUdQp(side);
      ASSERT_NE(side->qp, nullptr);
    }
  }
  void TearDown() override {
    for (ibv_ah* ah : ahs_) EXPECT_EQ(backend_->IbvDestroyAh(ah), 0);
    for (Side* side : {&a_, &b_}) {
      EXPECT_EQ(backend_->IbvDestroyQp(side->qp), 0);
      EXPECT_EQ(backend_->IbvDestroyCq(side->cq), 0);
      EXPECT_EQ(backend_->IbvDeallocPd(side->pd), 0);
    }
  }

  ibv_qp* MakeUdQp(Side* side, ibv_srq* srq = nullptr) {
    ibv_qp_init_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.send_cq = side->cq;
    attr.recv_cq = side->cq;
    attr.srq = srq;
    attr.cap.max_send_wr = 16;
    attr.cap.max_recv_wr = 16;
    attr.cap.max_send_sge = 2;
    attr.cap.max_recv_sge = 2;
    attr.cap.max_inline_data = 64;
    attr.qp_type = IBV_QPT_UD;
    ibv_qp* qp = nullptr;
    return backend_->IbvCreateQp(side->pd, &attr, &qp) == 0 ? qp : nullptr;
  }

  int Modify(ibv_qp* qp, ibv_qp_attr attr, int mask) {
    return backend_->IbvModifyQp(qp, &attr, mask);
  }

  // RESET -> INIT (Q_Key `qkey`) -> RTR -> RTS.
  void ToRts(ibv_qp* qp, uint32_t qkey = kQkey) {
    ibv_qp_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qkey = qkey;
    ASSERT_EQ(Modify(qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
    attr.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(Modify(qp, attr, IBV_QP_STATE), 0);
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = 5;
    ASSERT_EQ(Modify(qp, attr, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  }

  static ibv_ah_attr AhAttrTo(const uint8_t gid[16]) {
    ibv_ah_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.is_global = 1;
    std::memcpy(attr.grh.dgid.raw, gid, 16);
    attr.grh.hop_limit = 64;
    attr.grh.traffic_class = 0x20;
    attr.grh.sgid_index = 0;
    attr.port_num = 1;
    return attr;
  }

  // An AH toward this process's GID, destroyed by TearDown.
  ibv_ah* AhToUs(ibv_pd* pd) {
    uint8_t gid[16];
    ProcessGid(gid);
    ibv_ah_attr attr = AhAttrTo(gid);
    ibv_ah* ah = nullptr;
    EXPECT_EQ(backend_->IbvCreateAh(pd, &attr, &ah), 0);
    if (ah != nullptr) ahs_.push_back(ah);
    return ah;
  }

  int PostUd(ibv_qp* qp, uint64_t wr_id, ibv_sge* sge, int num_sge, ibv_ah* ah,
             uint32_t remote_qpn, uint32_t qkey = kQkey, ibv_wr_opcode opcode = IBV_WR_SEND,
             unsigned int flags = IBV_SEND_SIGNALED) {
    ibv_send_wr wr;
    std::memset(&wr, 0, sizeof(wr));
    wr.wr_id = wr_id;
    wr.sg_list = sge;
    wr.num_sge = num_sge;
    wr.opcode = opcode;
    wr.send_flags = flags;
    wr.imm_data = htonl(0xabcd);
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = remote_qpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr* bad = nullptr;
    return backend_->IbvPostSend(qp, &wr, &bad);
  }

  Backend* backend_ = nullptr;
  Side a_;
  Side b_;
  std::vector<ibv_ah*> ahs_;
};

TEST_F(UdTest, StateMachine_TheUdColumnOfTheTable) {
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qkey = kQkey;
  // RESET -> INIT needs the Q_Key, and takes no access flags (an RC attribute).
  EXPECT_EQ(Modify(a_.qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
  EXPECT_EQ(Modify(a_.qp, attr,
                   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY |
                       IBV_QP_ACCESS_FLAGS),
            EINVAL);
  ASSERT_EQ(Modify(a_.qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  // INIT -> RTR: no peer, no AV (an RC attribute here).
  attr.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(Modify(a_.qp, attr, IBV_QP_STATE | IBV_QP_AV), EINVAL);
  ASSERT_EQ(Modify(a_.qp, attr, IBV_QP_STATE), 0);
  // RTR -> RTS needs the send queue's PSN.
  attr.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(Modify(a_.qp, attr, IBV_QP_STATE), EINVAL);
  attr.sq_psn = 9;
  ASSERT_EQ(Modify(a_.qp, attr, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  // RTS -> RTS may change the Q_Key.
  attr.qkey = 0x2222;
  ASSERT_EQ(Modify(a_.qp, attr, IBV_QP_STATE | IBV_QP_QKEY), 0);
  ibv_qp_init_attr init;
  ASSERT_EQ(backend_->IbvQueryQp(a_.qp, &attr, IBV_QP_STATE | IBV_QP_QKEY, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(attr.qkey, 0x2222u);
  EXPECT_EQ(attr.sq_psn, 9u);
  EXPECT_EQ(init.qp_type, IBV_QPT_UD);
  EXPECT_EQ(a_.qp->qp_type, IBV_QPT_UD);
}

TEST_F(UdTest, SendLandsBehindTheGrh_TheReceiveNamesItsSender) {
  ToRts(a_.qp);
  ToRts(b_.qp);
  TestBuffer out(backend_, a_.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, b_.pd, 128, IBV_ACCESS_LOCAL_WRITE);
  std::memset(in.data(), 0x5a, in.size());
  std::memcpy(out.data(), "datagram", 9);
  ibv_sge recv_sge = in.Sge(0, 128);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 7, &recv_sge, 1), 0);
  ibv_sge sge = out.Sge(0, 9);
  ASSERT_EQ(PostUd(a_.qp, 3, &sge, 1, AhToUs(a_.pd), b_.qp->qp_num, kQkey,
                   IBV_WR_SEND_WITH_IMM),
            0);

  const std::vector<ibv_wc> sent = PollAll(backend_, a_.cq);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sent[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(sent[0].wr_id, 3u);
  const std::vector<ibv_wc> got = PollAll(backend_, b_.cq);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(got[0].wr_id, 7u);
  EXPECT_EQ(got[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(got[0].byte_len, static_cast<uint32_t>(kGrh + 9));  // the GRH counts
  EXPECT_EQ(got[0].src_qp, a_.qp->qp_num);
  EXPECT_EQ(got[0].qp_num, b_.qp->qp_num);
  EXPECT_NE(got[0].wc_flags & IBV_WC_GRH, 0u);
  EXPECT_NE(got[0].wc_flags & IBV_WC_WITH_IMM, 0u);
  EXPECT_EQ(ntohl(got[0].imm_data), 0xabcdu);
  EXPECT_EQ(got[0].sl, ActiveProfile().ud_recv_sl);  // mlx5 on RoCE: the packet type, IPv4
  EXPECT_EQ(got[0].sl, 0xa);
  EXPECT_STREQ(reinterpret_cast<char*>(in.data() + kGrh), "datagram");
  EXPECT_EQ(in.data()[kGrh + 9], 0x5a);  // nothing past the message
  // RoCE v2 over IPv4: the last 20 bytes of the GRH are the packet's IPv4 header.
  const uint8_t* ip = in.data() + 20;
  uint8_t gid[16];
  ProcessGid(gid);
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[1], 0x20);  // the AH's traffic class
  EXPECT_EQ(ip[8], 64);    // its hop limit
  EXPECT_EQ(ip[9], 17);    // UDP
  EXPECT_EQ(std::memcmp(ip + 12, gid + 12, 4), 0);
  EXPECT_EQ(std::memcmp(ip + 16, gid + 12, 4), 0);
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (uint32_t{ip[i]} << 8) | ip[i + 1];
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(sum, 0xffffu) << "the IPv4 header's checksum";
}

TEST_F(UdTest, InlineAndTwoSges_GatheredInOrder) {
  ToRts(a_.qp);
  ToRts(b_.qp);
  TestBuffer out(backend_, a_.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, b_.pd, 128, IBV_ACCESS_LOCAL_WRITE);
  std::memcpy(out.data(), "abcdef", 6);
  ibv_sge recv_sges[2] = {in.Sge(0, kGrh + 2), in.Sge(64, 64)};
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 1, recv_sges, 2), 0);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 2, recv_sges, 2), 0);
  ibv_sge two[2] = {out.Sge(3, 3), out.Sge(0, 3)};
  ibv_ah* ah = AhToUs(a_.pd);
  ASSERT_EQ(PostUd(a_.qp, 1, two, 2, ah, b_.qp->qp_num), 0);
  std::memcpy(out.data(), "xyz", 3);
  ibv_sge inl = out.Sge(0, 3);
  ASSERT_EQ(PostUd(a_.qp, 2, &inl, 1, ah, b_.qp->qp_num, kQkey, IBV_WR_SEND,
                   IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            0);
  std::memcpy(out.data(), "!!!", 3);  // inline: copied at the post
  EXPECT_THAT(PollAll(backend_, b_.cq),
              ElementsAre(Field(&ibv_wc::wr_id, 1u), Field(&ibv_wc::wr_id, 2u)));
  // The second receive overwrote the first: its 3 bytes, 2 behind the GRH and 1 at 64.
  EXPECT_EQ(std::string(reinterpret_cast<char*>(in.data() + kGrh), 2), "xy");
  EXPECT_EQ(in.data()[64], 'z');
  EXPECT_EQ(in.data()[65], 'a');  // the first one's ("de" + "fabc"), left there
}

TEST_F(UdTest, Dropped_WrongQkey_NoReceive_NoSuchQp_NotYetRtr_SendStillSucceeds) {
  ToRts(a_.qp);
  TestBuffer out(backend_, a_.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, b_.pd, 128, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = out.Sge(0, 8);
  ibv_sge recv_sge = in.Sge(0, 128);
  ibv_ah* ah = AhToUs(a_.pd);
  // b_ in INIT with a receive: not receiving yet.
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qkey = kQkey;
  ASSERT_EQ(Modify(b_.qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 1, &recv_sge, 1), 0);
  ASSERT_EQ(PostUd(a_.qp, 1, &sge, 1, ah, b_.qp->qp_num), 0);
  attr.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(Modify(b_.qp, attr, IBV_QP_STATE), 0);
  ASSERT_EQ(PostUd(a_.qp, 2, &sge, 1, ah, b_.qp->qp_num, kQkey + 1), 0);  // another Q_Key
  ASSERT_EQ(PostUd(a_.qp, 3, &sge, 1, ah, 0xfffff0), 0);                 // no such QP
  EXPECT_TRUE(PollAll(backend_, b_.cq).empty());
  EXPECT_THAT(PollAll(backend_, a_.cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS),
                          Field(&ibv_wc::status, IBV_WC_SUCCESS),
                          Field(&ibv_wc::status, IBV_WC_SUCCESS)));
  // The receive is still there for the right one; then none is left, and the next is dropped.
  ASSERT_EQ(PostUd(a_.qp, 4, &sge, 1, ah, b_.qp->qp_num), 0);
  ASSERT_EQ(PostUd(a_.qp, 5, &sge, 1, ah, b_.qp->qp_num), 0);
  EXPECT_THAT(PollAll(backend_, b_.cq), ElementsAre(Field(&ibv_wc::wr_id, 1u)));
  EXPECT_EQ(PollAll(backend_, a_.cq).size(), 2u);
}

// UD loses messages only as a fault: `lost` on ibv_post_send of a UD QP loses the post's first
// datagram (its send still completes successfully), and nothing else.
TEST_F(UdTest, LostFault_TheFirstDatagramArrivesNowhere_TheSendSucceeds) {
  ToRts(a_.qp);
  ToRts(b_.qp);
  TestBuffer out(backend_, a_.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, b_.pd, 128, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge recv_sge = in.Sge(0, 128);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 1, &recv_sge, 1), 0);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 2, &recv_sge, 1), 0);
  ibv_sge sge = out.Sge(0, 8);
  ibv_ah* ah = AhToUs(a_.pd);
  {
    ScopedFaultPlan plan("ibv_post_send:lost:nth=1");
    ASSERT_TRUE(plan.status().ok());
    ASSERT_EQ(PostUd(a_.qp, 1, &sge, 1, ah, b_.qp->qp_num), 0);
    ASSERT_EQ(PostUd(a_.qp, 2, &sge, 1, ah, b_.qp->qp_num), 0);
  }
  EXPECT_THAT(PollAll(backend_, a_.cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS),
                          Field(&ibv_wc::status, IBV_WC_SUCCESS)));
  EXPECT_EQ(a_.qp->state, IBV_QPS_RTS);
  // Only the second arrived, into the first receive.
  EXPECT_THAT(PollAll(backend_, b_.cq), ElementsAre(Field(&ibv_wc::wr_id, 1u)));
}

TEST_F(UdTest, ControlledQkey_TheSendersOwnIsUsed) {
  ToRts(a_.qp, /*qkey=*/0x1234);
  ToRts(b_.qp, /*qkey=*/0x1234);
  TestBuffer out(backend_, a_.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, b_.pd, 128, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = out.Sge(0, 8);
  ibv_sge recv_sge = in.Sge(0, 128);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 1, &recv_sge, 1), 0);
  // The WR's Q_Key has its high-order bit set: the QP's (0x1234) goes instead.
  ASSERT_EQ(PostUd(a_.qp, 1, &sge, 1, AhToUs(a_.pd), b_.qp->qp_num, 0x80000000u), 0);
  EXPECT_THAT(PollAll(backend_, b_.cq), ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
}

TEST_F(UdTest, AboveThePathMtu_LocalLengthError_QpToError) {
  ToRts(a_.qp);
  ToRts(b_.qp);
  const uint32_t mtu = 128u << ActiveProfile().port.active_mtu;
  TestBuffer out(backend_, a_.pd, mtu + 1, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, b_.pd, mtu + 64, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge recv_sge = in.Sge(0, mtu + 64);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 1, &recv_sge, 1), 0);
  ibv_ah* ah = AhToUs(a_.pd);
  ibv_sge whole = out.Sge(0, mtu);
  ASSERT_EQ(PostUd(a_.qp, 1, &whole, 1, ah, b_.qp->qp_num), 0);  // exactly the MTU: fine
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 2, &recv_sge, 1), 0);
  ibv_sge over = out.Sge(0, mtu + 1);
  ASSERT_EQ(PostUd(a_.qp, 2, &over, 1, ah, b_.qp->qp_num), 0);
  EXPECT_THAT(PollAll(backend_, a_.cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS),
                          Field(&ibv_wc::status, IBV_WC_LOC_LEN_ERR)));
  EXPECT_EQ(a_.qp->state, IBV_QPS_ERR);
  EXPECT_THAT(PollAll(backend_, b_.cq), ElementsAre(Field(&ibv_wc::byte_len, mtu + kGrh)));
}

TEST_F(UdTest, ReceiveTooSmallForGrhAndMessage_LocalLengthErrorAtTheReceiver) {
  ToRts(a_.qp);
  ToRts(b_.qp);
  TestBuffer out(backend_, a_.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, b_.pd, 128, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge recv_sge = in.Sge(0, kGrh + 3);  // the message is 8 bytes
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 1, &recv_sge, 1), 0);
  ibv_sge sge = out.Sge(0, 8);
  ASSERT_EQ(PostUd(a_.qp, 1, &sge, 1, AhToUs(a_.pd), b_.qp->qp_num), 0);
  EXPECT_THAT(PollAll(backend_, b_.cq), ElementsAre(Field(&ibv_wc::status, IBV_WC_LOC_LEN_ERR)));
  EXPECT_THAT(PollAll(backend_, a_.cq), ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
}

TEST_F(UdTest, PostChecks_OpcodeAhStateSges) {
  TestBuffer out(backend_, a_.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = out.Sge(0, 8);
  ibv_ah* ah = AhToUs(a_.pd);
  EXPECT_EQ(PostUd(a_.qp, 1, &sge, 1, ah, b_.qp->qp_num), EINVAL);  // RESET: not RTS
  ToRts(a_.qp);
  EXPECT_EQ(PostUd(a_.qp, 1, &sge, 1, ah, b_.qp->qp_num, kQkey, IBV_WR_RDMA_WRITE), EINVAL);
  EXPECT_EQ(PostUd(a_.qp, 1, &sge, 1, nullptr, b_.qp->qp_num), EINVAL);
  ibv_sge three[3] = {sge, sge, sge};
  EXPECT_EQ(PostUd(a_.qp, 1, three, 3, ah, b_.qp->qp_num),
            ActiveProfile().post_send_limit_errno);
  // A bad lkey: a local protection error at execution, the QP to ERROR.
  ibv_sge bad = sge;
  bad.lkey += 1000;
  ASSERT_EQ(PostUd(a_.qp, 2, &bad, 1, ah, b_.qp->qp_num), 0);
  EXPECT_THAT(PollAll(backend_, a_.cq), ElementsAre(Field(&ibv_wc::status, IBV_WC_LOC_PROT_ERR)));
  EXPECT_EQ(a_.qp->state, IBV_QPS_ERR);
  ASSERT_EQ(PostUd(a_.qp, 3, &sge, 1, ah, b_.qp->qp_num), 0);
  EXPECT_THAT(PollAll(backend_, a_.cq), ElementsAre(Field(&ibv_wc::status, IBV_WC_WR_FLUSH_ERR)));
}

TEST_F(UdTest, SharedReceiveQueue_TheUdQpTakesItsReceives) {
  ibv_srq_init_attr srq_attr;
  std::memset(&srq_attr, 0, sizeof(srq_attr));
  srq_attr.attr.max_wr = 8;
  srq_attr.attr.max_sge = 1;
  ibv_srq* srq = nullptr;
  ASSERT_EQ(backend_->IbvCreateSrq(b_.pd, &srq_attr, &srq), 0);
  ibv_qp* c = MakeUdQp(&b_, srq);
  ASSERT_NE(c, nullptr);
  ToRts(a_.qp);
  ToRts(c);
  TestBuffer out(backend_, a_.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, b_.pd, 128, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge recv_sge = in.Sge(0, 128);
  ibv_recv_wr recv;
  std::memset(&recv, 0, sizeof(recv));
  recv.wr_id = 9;
  recv.sg_list = &recv_sge;
  recv.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(backend_->IbvPostSrqRecv(srq, &recv, &bad), 0);
  ibv_sge sge = out.Sge(0, 8);
  ASSERT_EQ(PostUd(a_.qp, 1, &sge, 1, AhToUs(a_.pd), c->qp_num), 0);
  EXPECT_THAT(PollAll(backend_, b_.cq),
              ElementsAre(::testing::AllOf(Field(&ibv_wc::wr_id, 9u),
                                           Field(&ibv_wc::qp_num, c->qp_num))));
  EXPECT_EQ(backend_->IbvDestroyQp(c), 0);
  EXPECT_EQ(backend_->IbvDestroySrq(srq), 0);
}

TEST_F(UdTest, AddressHandle_NeedsAGrhPortOneAndThePopulatedGid_HoldsItsPd) {
  uint8_t gid[16];
  ProcessGid(gid);
  ibv_ah* ah = nullptr;
  ibv_ah_attr attr = AhAttrTo(gid);
  attr.is_global = 0;
  EXPECT_EQ(backend_->IbvCreateAh(a_.pd, &attr, &ah), EINVAL);
  attr = AhAttrTo(gid);
  attr.port_num = 2;
  EXPECT_EQ(backend_->IbvCreateAh(a_.pd, &attr, &ah), EINVAL);
  attr = AhAttrTo(gid);
  attr.grh.sgid_index = 1;
  EXPECT_EQ(backend_->IbvCreateAh(a_.pd, &attr, &ah), EINVAL);
  EXPECT_EQ(backend_->IbvCreateAh(a_.pd, nullptr, &ah), EINVAL);
  attr = AhAttrTo(gid);
  ibv_pd* pd = nullptr;
  ASSERT_EQ(backend_->IbvAllocPd(SimContext(), &pd), 0);
  ASSERT_EQ(backend_->IbvCreateAh(pd, &attr, &ah), 0);
  EXPECT_EQ(ah->pd, pd);
  EXPECT_EQ(ah->context, SimContext());
  EXPECT_EQ(backend_->IbvDeallocPd(pd), EBUSY);  // the AH holds it
  EXPECT_EQ(backend_->IbvDestroyAh(ah), 0);
  EXPECT_EQ(backend_->IbvDeallocPd(pd), 0);
}

TEST_F(UdTest, SiwHasNoUd_RxeReportsSlZero) {
  absl::StatusOr<const DeviceProfile*> siw = FindDeviceProfile("siw");
  ASSERT_TRUE(siw.ok());
  SetActiveProfile(**siw);
  EXPECT_EQ(MakeUdQp(&a_), nullptr);  // iWARP: no UD QPs (EOPNOTSUPP)
  absl::StatusOr<const DeviceProfile*> rxe = FindDeviceProfile("rxe");
  ASSERT_TRUE(rxe.ok());
  SetActiveProfile(**rxe);
  ToRts(a_.qp);
  ToRts(b_.qp);
  TestBuffer out(backend_, a_.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, b_.pd, 128, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge recv_sge = in.Sge(0, 128);
  ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 1, &recv_sge, 1), 0);
  ibv_sge sge = out.Sge(0, 8);
  ASSERT_EQ(PostUd(a_.qp, 1, &sge, 1, AhToUs(a_.pd), b_.qp->qp_num), 0);
  const std::vector<ibv_wc> got = PollAll(backend_, b_.cq);
  SetActiveProfile(DeviceProfiles()[0]);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].sl, 0);
  EXPECT_NE(got[0].wc_flags & IBV_WC_GRH, 0u);
}

// The extended post API on a UD QP, as mlx5 and rxe have it: the send builders and
// ibv_wr_set_ud_addr. A batch is posted whole or not at all; another op is refused at creation
// (EOPNOTSUPP) and its builder fails the batch.
TEST_F(UdTest, ExtendedPostApi_SendBuildersAndSetUdAddr_WholeBatchOrNothing) {
  ibv_qp_init_attr_ex attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.send_cq = a_.cq;
  attr.recv_cq = a_.cq;
  attr.cap.max_send_wr = 4;
  attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.qp_type = IBV_QPT_UD;
  attr.pd = a_.pd;
  attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  attr.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
  ibv_qp* refused = nullptr;
  EXPECT_EQ(backend_->IbvCreateQpEx(SimContext(), &attr, &refused), EOPNOTSUPP);
  attr.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
  ibv_qp* qp = nullptr;
  ASSERT_EQ(backend_->IbvCreateQpEx(SimContext(), &attr, &qp), 0);
  ToRts(qp);
  ToRts(b_.qp);
  ibv_qp_ex* qpx = nullptr;
  ASSERT_EQ(backend_->IbvQpToQpEx(qp, &qpx), 0);
  TestBuffer out(backend_, a_.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, b_.pd, 256, IBV_ACCESS_LOCAL_WRITE);
  std::memcpy(out.data(), "one\0two", 8);
  for (int i = 0; i < 2; ++i) {
    ibv_sge recv_sge = in.Sge(128 * i, 128);
    ASSERT_EQ(PostRecvBuf(backend_, b_.qp, 10 + i, &recv_sge, 1), 0);
  }
  ibv_ah* ah = AhToUs(a_.pd);

  // A WR without an AH fails the batch, and the WR before it does not leave either.
  backend_->IbvWrStart(qpx);
  qpx->wr_id = 1;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qpx);
  ibv_wr_set_ud_addr(qpx, ah, b_.qp->qp_num, kQkey);
  ibv_wr_set_sge(qpx, out.mr()->lkey, out.addr(), 4);
  qpx->wr_id = 2;
  ibv_wr_send(qpx);
  ibv_wr_set_sge(qpx, out.mr()->lkey, out.addr(), 4);
  EXPECT_EQ(backend_->IbvWrComplete(qpx), EINVAL);
  EXPECT_TRUE(PollAll(backend_, a_.cq).empty());
  EXPECT_TRUE(PollAll(backend_, b_.cq).empty());
  // An RDMA write's builder on a UD QP fails the batch.
  backend_->IbvWrStart(qpx);
  ibv_wr_rdma_write(qpx, 0, 0);
  EXPECT_EQ(backend_->IbvWrComplete(qpx), EINVAL);

  backend_->IbvWrStart(qpx);
  qpx->wr_id = 3;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qpx);
  ibv_wr_set_ud_addr(qpx, ah, b_.qp->qp_num, kQkey);
  ibv_wr_set_sge(qpx, out.mr()->lkey, out.addr(), 4);
  qpx->wr_id = 4;
  ibv_wr_send_imm(qpx, htonl(0x1234));
  ibv_wr_set_ud_addr(qpx, ah, b_.qp->qp_num, kQkey);
  ibv_wr_set_sge(qpx, out.mr()->lkey, out.addr() + 4, 4);
  ASSERT_EQ(backend_->IbvWrComplete(qpx), 0);

  const std::vector<ibv_wc> sent = PollAll(backend_, a_.cq);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].wr_id, 3u);
  EXPECT_EQ(sent[1].wr_id, 4u);
  const std::vector<ibv_wc> got = PollAll(backend_, b_.cq);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].src_qp, qp->qp_num);
  EXPECT_EQ(got[0].wc_flags & IBV_WC_WITH_IMM, 0u);
  EXPECT_NE(got[1].wc_flags & IBV_WC_WITH_IMM, 0u);
  EXPECT_EQ(ntohl(got[1].imm_data), 0x1234u);
  EXPECT_STREQ(reinterpret_cast<char*>(in.data() + kGrh), "one");
  EXPECT_STREQ(reinterpret_cast<char*>(in.data() + 128 + kGrh), "two");
  EXPECT_EQ(backend_->IbvDestroyQp(qp), 0);
}

}  // namespace
}  // namespace softrpma::sim::testing
