// verbs_qp_test: QPs of ibv_create_qp connected by ibv_modify_qp, without the CM (qp.h, "QPs of
// ibv_create_qp"): the state machine and its attribute masks, the binding at RTR, the data
// moving, and traffic toward a QP that is not there.

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdio>
#include <cstring>
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
#include "simverbs/sim/qp.h"
#include "simverbs/sim/sim_backend.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;

constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
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
    ibv_qp_init_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.send_cq = side->cq;
    attr.recv_cq = side->cq;
    attr.cap.max_send_wr = 16;
    attr.cap.max_recv_wr = 16;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.qp_type = type;
    ibv_qp* qp = nullptr;
    const int rc = backend_->IbvCreateQp(side->pd, &attr, &qp);
    if (err != nullptr) *err = rc;
    return rc == 0 ? qp : nullptr;
  }

  int Modify(ibv_qp* qp, ibv_qp_attr attr, int mask) {
    return backend_->IbvModifyQp(qp, &attr, mask);
  }

  // Both QPs to RTS, each bound to the other.
  void ConnectPair() {
    for (Side* side : {&a_, &b_}) ASSERT_EQ(Modify(side->qp, InitAttr(), kInitMask), 0);
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

TEST_F(VerbsQpTest, OnlyRc) {
  int err = 0;
  EXPECT_EQ(MakeQp(&a_, IBV_QPT_UD, &err), nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
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

  // A good bind to a QP that is not connected to the sender: each request is dropped, as a
  // real responder drops it (answered RETRY_EXC_ERR: the requester's retries run out).
  auto third = std::make_shared<Recorder>();
  ASSERT_EQ(host::DialEndpoint(OurEndpoint(), third, &conn), 0);
  const ibv_gid ours = OurGid();
  std::memcpy(bind.dst_gid, ours.raw, sizeof(bind.dst_gid));
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

TEST_F(VerbsQpTest, GidIsThisProcesssLoopbackAddress) {
  const ibv_gid gid = OurGid();
  const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  EXPECT_EQ(std::memcmp(gid.raw, prefix, 12), 0);
  EXPECT_EQ(gid.raw[12], 127);
  const uint32_t pid = (uint32_t{gid.raw[13]} << 16) | (uint32_t{gid.raw[14]} << 8) | gid.raw[15];
  EXPECT_EQ(pid, static_cast<uint32_t>(getpid()) & 0xffffff);
}

}  // namespace
}  // namespace softrpma::sim::testing
