// The extended CQ of the simulator (ibv_create_cq_ex(3)), through the Backend interface and
// verbs.h's inline calls on what it hands out: creation and its errors, the start_poll /
// next_poll / end_poll iterator and the read_* ops against what ibv_poll_cq gives, the same CQ
// through ibv_cq_ex_to_cq, faults of ibv_poll_cq on the iterator, and the batch's thread-safety.

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/nic/cq.h"
#include "simverbs/sim/sim_control.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

ibv_cq_init_attr_ex CqAttr(uint32_t cqe, uint64_t wc_flags) {
  ibv_cq_init_attr_ex attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.cqe = cqe;
  attr.wc_flags = wc_flags;
  return attr;
}

// What a batch read of the current completion gives, field by field as an ibv_wc, through the
// readers of IBV_WC_STANDARD_FLAGS.
ibv_wc ReadCurrent(ibv_cq_ex* cq) {
  ibv_wc wc;
  std::memset(&wc, 0, sizeof(wc));
  wc.wr_id = cq->wr_id;
  wc.status = cq->status;
  wc.opcode = ibv_wc_read_opcode(cq);
  wc.vendor_err = ibv_wc_read_vendor_err(cq);
  wc.byte_len = ibv_wc_read_byte_len(cq);
  wc.imm_data = ibv_wc_read_imm_data(cq);
  wc.qp_num = ibv_wc_read_qp_num(cq);
  wc.src_qp = ibv_wc_read_src_qp(cq);
  wc.wc_flags = ibv_wc_read_wc_flags(cq);
  wc.slid = static_cast<uint16_t>(ibv_wc_read_slid(cq));
  wc.sl = ibv_wc_read_sl(cq);
  wc.dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
  return wc;
}

// Every field an ibv_wc reader gives, but wr_id.
void ExpectSameButWrId(const ibv_wc& got, const ibv_wc& want) {
  EXPECT_EQ(got.status, want.status);
  EXPECT_EQ(got.opcode, want.opcode);
  EXPECT_EQ(got.vendor_err, want.vendor_err);
  EXPECT_EQ(got.byte_len, want.byte_len);
  EXPECT_EQ(got.imm_data, want.imm_data);
  EXPECT_EQ(got.qp_num, want.qp_num);
  EXPECT_EQ(got.src_qp, want.src_qp);
  EXPECT_EQ(got.wc_flags, want.wc_flags);
  EXPECT_EQ(got.slid, want.slid);
  EXPECT_EQ(got.sl, want.sl);
  EXPECT_EQ(got.dlid_path_bits, want.dlid_path_bits);
}

class CqExTest : public ::testing::Test {
 protected:
  // An extended CQ with every standard field, the active side's send and receive CQ of a new
  // connection; buffers on both sides.
  void Connect() {
    ibv_cq_init_attr_ex attr = CqAttr(16, IBV_WC_STANDARD_FLAGS);
    ASSERT_EQ(backend_->IbvCreateCqEx(SimContext(), &attr, &cq_), 0);
    ConnectionOptions options;
    options.active_cq = ibv_cq_ex_to_cq(cq_);
    conn_ = std::make_unique<TestConnection>(backend_);
    absl::Status status = conn_->Connect(options);
    ASSERT_TRUE(status.ok()) << status;
    active_buf_ = std::make_unique<TestBuffer>(backend_, conn_->active.pd, 64, kRemoteAccess);
    passive_buf_ = std::make_unique<TestBuffer>(backend_, conn_->passive.pd, 64, kRemoteAccess);
  }

  // One signaled 8-byte RDMA WRITE from the active side; its completion comes to cq_.
  int Write(uint64_t wr_id, uint32_t rkey_delta = 0) {
    ibv_sge sge = active_buf_->Sge(0, 8);
    return PostWrite(backend_, conn_->active.qp(), wr_id, &sge, 1, passive_buf_->addr(),
                     passive_buf_->mr()->rkey + rkey_delta);
  }

  // An 8-byte RDMA WRITE WITH IMM from the passive side into the active side's buffer: it
  // consumes a receive of the active side, whose completion comes to cq_.
  int WriteWithImmToActive(uint64_t wr_id, uint32_t imm_host) {
    ibv_sge sge = passive_buf_->Sge(0, 8);
    ibv_send_wr wr;
    std::memset(&wr, 0, sizeof(wr));
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm_host);
    wr.wr.rdma.remote_addr = active_buf_->addr(8);
    wr.wr.rdma.rkey = active_buf_->mr()->rkey;
    ibv_send_wr* bad = nullptr;
    return backend_->IbvPostSend(conn_->passive.qp(), &wr, &bad);
  }

  // The CQ's next completion through ibv_poll_cq (`polled_id`), then the one after it
  // (`read_id`) through start_poll and the readers into *read: the same fields but wr_id (the
  // batch is left open).
  void PollOneThenReadOne(uint64_t polled_id, uint64_t read_id, ibv_wc* read) {
    ibv_wc polled_wc;
    int polled = 0;
    ASSERT_EQ(backend_->IbvPollCq(ibv_cq_ex_to_cq(cq_), 1, &polled_wc, &polled), 0);
    ASSERT_EQ(polled, 1);
    EXPECT_EQ(polled_wc.wr_id, polled_id);
    ibv_poll_cq_attr attr = {};
    ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);
    EXPECT_EQ(cq_->wr_id, read_id);
    EXPECT_EQ(cq_->status, IBV_WC_SUCCESS);
    *read = ReadCurrent(cq_);
    ExpectSameButWrId(*read, polled_wc);
  }

  int PostActiveRecv(uint64_t wr_id) {
    ibv_sge sge = active_buf_->Sge(32, 8);
    return PostRecvBuf(backend_, conn_->active.qp(), wr_id, &sge, 1);
  }

  void TearDown() override {
    active_buf_.reset();
    passive_buf_.reset();
    conn_.reset();  // its QP uses cq_
    if (cq_ != nullptr) {
      EXPECT_EQ(backend_->IbvDestroyCq(ibv_cq_ex_to_cq(cq_)), 0);
    }
  }

  Backend* backend_ = SimBackend();
  ibv_cq_ex* cq_ = nullptr;
  std::unique_ptr<TestConnection> conn_;
  std::unique_ptr<TestBuffer> active_buf_;
  std::unique_ptr<TestBuffer> passive_buf_;
};

// ---- Creation ---------------------------------------------------------------------------------

TEST_F(CqExTest, CreateCqEx_FillsFields_OneCqUnderBothNames) {
  ibv_context* ctx = SimContext();
  ibv_comp_channel* channel = nullptr;
  ASSERT_EQ(backend_->IbvCreateCompChannel(ctx, &channel), 0);
  int marker = 0;
  ibv_cq_init_attr_ex attr = CqAttr(10, IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM);
  attr.cq_context = &marker;
  attr.channel = channel;

  ASSERT_EQ(backend_->IbvCreateCqEx(ctx, &attr, &cq_), 0);

  EXPECT_EQ(cq_->context, ctx);
  EXPECT_EQ(cq_->channel, channel);
  EXPECT_EQ(cq_->cq_context, &marker);
  EXPECT_EQ(cq_->cqe, 15);  // as ibv_create_cq's: mlx5 rounds 10 + 1 up to 16, minus one
  ibv_cq* cq = ibv_cq_ex_to_cq(cq_);
  EXPECT_EQ(cq->cqe, 15);
  EXPECT_EQ(to_sim(cq), to_sim(cq_));
  EXPECT_EQ(static_cast<void*>(to_sim(cq_)), static_cast<void*>(cq_));  // the FIRST member
  EXPECT_EQ(backend_->IbvReqNotifyCq(cq, 0), 0);  // a CQ like any: it has its channel
  EXPECT_EQ(backend_->IbvDestroyCompChannel(channel), EBUSY);
  EXPECT_EQ(backend_->IbvDestroyCq(cq), 0);
  cq_ = nullptr;
  EXPECT_EQ(backend_->IbvDestroyCompChannel(channel), 0);
}

// As mlx5: the iterator, read_opcode, read_vendor_err and read_wc_flags always; the other
// readers only for the fields wc_flags asks for.
TEST_F(CqExTest, CreateCqEx_SetsTheReadersWcFlagsAskFor) {
  ibv_cq_init_attr_ex attr = CqAttr(4, IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM);

  ASSERT_EQ(backend_->IbvCreateCqEx(SimContext(), &attr, &cq_), 0);

  EXPECT_NE(cq_->start_poll, nullptr);
  EXPECT_NE(cq_->next_poll, nullptr);
  EXPECT_NE(cq_->end_poll, nullptr);
  EXPECT_NE(cq_->read_opcode, nullptr);
  EXPECT_NE(cq_->read_vendor_err, nullptr);
  EXPECT_NE(cq_->read_wc_flags, nullptr);
  EXPECT_NE(cq_->read_byte_len, nullptr);
  EXPECT_NE(cq_->read_imm_data, nullptr);
  EXPECT_EQ(cq_->read_qp_num, nullptr);
  EXPECT_EQ(cq_->read_src_qp, nullptr);
  EXPECT_EQ(cq_->read_slid, nullptr);
  EXPECT_EQ(cq_->read_sl, nullptr);
  EXPECT_EQ(cq_->read_dlid_path_bits, nullptr);
  EXPECT_EQ(cq_->read_completion_ts, nullptr);  // never given: refused at creation
  EXPECT_EQ(cq_->read_completion_wallclock_ns, nullptr);
}

struct BadAttr {
  const char* name;
  void (*edit)(ibv_cq_init_attr_ex* attr, ibv_pd* pd);
  int err;
};

class CqExCreateErrorTest : public ::testing::TestWithParam<BadAttr> {};

TEST_P(CqExCreateErrorTest, CreateCqEx_BadAttr_ReturnsErrno_WritesNothing) {
  Backend* backend = SimBackend();
  ibv_context* ctx = SimContext();
  ibv_pd* pd = nullptr;
  ASSERT_EQ(backend->IbvAllocPd(ctx, &pd), 0);
  ibv_cq_init_attr_ex attr = CqAttr(16, IBV_WC_EX_WITH_BYTE_LEN);
  GetParam().edit(&attr, pd);
  ibv_cq_ex* cq = nullptr;

  EXPECT_EQ(backend->IbvCreateCqEx(ctx, &attr, &cq), GetParam().err);

  EXPECT_EQ(cq, nullptr);
  EXPECT_EQ(backend->IbvDeallocPd(pd), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, CqExCreateErrorTest,
    ::testing::Values(
        BadAttr{"CqeZero", [](ibv_cq_init_attr_ex* a, ibv_pd*) { a->cqe = 0; }, EINVAL},
        BadAttr{"CqeAboveDeviceLimit",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) {
                  ibv_device_attr_ex device;
                  ASSERT_EQ(SimBackend()->IbvQueryDeviceEx(SimContext(), &device), 0);
                  a->cqe = static_cast<uint32_t>(device.orig_attr.max_cqe) + 1;
                },
                EINVAL},
        BadAttr{"CqeAboveIntMax", [](ibv_cq_init_attr_ex* a, ibv_pd*) { a->cqe = 0x80000000u; },
                EINVAL},
        BadAttr{"CompVectorOutOfRange",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) {
                  a->comp_vector = static_cast<uint32_t>(SimContext()->num_comp_vectors);
                },
                EINVAL},
        BadAttr{"UnknownCompMaskBit",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) { a->comp_mask = 1u << 2; }, EINVAL},
        BadAttr{"UnknownWcFlagsBit",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) { a->wc_flags |= uint64_t{1} << 12; },
                EOPNOTSUPP},
        BadAttr{"CompletionTimestampNotGiven",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) {
                  a->wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
                },
                EOPNOTSUPP},
        BadAttr{"WallclockNotGiven",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) {
                  a->wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
                },
                EOPNOTSUPP},
        BadAttr{"CvlanNotGiven",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) { a->wc_flags |= IBV_WC_EX_WITH_CVLAN; },
                EOPNOTSUPP},
        BadAttr{"FlowTagNotGiven",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) { a->wc_flags |= IBV_WC_EX_WITH_FLOW_TAG; },
                EOPNOTSUPP},
        BadAttr{"TmInfoNotGiven",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) { a->wc_flags |= IBV_WC_EX_WITH_TM_INFO; },
                EOPNOTSUPP},
        BadAttr{"UnknownFlagsBit",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) {
                  a->comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
                  a->flags = 1u << 2;
                },
                EINVAL},
        BadAttr{"IgnoreOverrunNotGiven",
                [](ibv_cq_init_attr_ex* a, ibv_pd*) {
                  a->comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
                  a->flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
                },
                EOPNOTSUPP},
        BadAttr{"PdIsNoParentDomain",
                [](ibv_cq_init_attr_ex* a, ibv_pd* pd) {
                  a->comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
                  a->parent_domain = pd;
                },
                EINVAL}),
    [](const ::testing::TestParamInfo<BadAttr>& info) { return std::string(info.param.name); });

TEST_F(CqExTest, CreateCqEx_SingleThreadedFlag_Accepted) {
  ibv_cq_init_attr_ex attr = CqAttr(4, 0);
  attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  attr.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;

  EXPECT_EQ(backend_->IbvCreateCqEx(SimContext(), &attr, &cq_), 0);
}

TEST_F(CqExTest, CreateCqEx_NullAttrOrForeignContext_Einval) {
  ibv_cq_ex* cq = nullptr;
  EXPECT_EQ(backend_->IbvCreateCqEx(SimContext(), nullptr, &cq), EINVAL);
  ibv_cq_init_attr_ex attr = CqAttr(4, 0);
  ibv_context other;
  std::memset(&other, 0, sizeof(other));
  EXPECT_EQ(backend_->IbvCreateCqEx(&other, &attr, &cq), EINVAL);
  EXPECT_EQ(cq, nullptr);
}

TEST_F(CqExTest, CreateCqEx_FaultPoint_FailsWithItsErrno) {
  ScopedFaultPlan plan("ibv_create_cq_ex:fail=ENOMEM:nth=1");
  ASSERT_TRUE(plan.status().ok()) << plan.status();
  ibv_cq_init_attr_ex attr = CqAttr(4, 0);

  EXPECT_EQ(backend_->IbvCreateCqEx(SimContext(), &attr, &cq_), ENOMEM);
  EXPECT_EQ(cq_, nullptr);
  EXPECT_EQ(backend_->IbvCreateCqEx(SimContext(), &attr, &cq_), 0);  // the second hit
}

// ---- The iterator -----------------------------------------------------------------------------

TEST_F(CqExTest, StartPoll_Empty_Enoent_NoBatchLeftOpen) {
  Connect();
  ibv_poll_cq_attr attr = {};

  EXPECT_EQ(ibv_start_poll(cq_, &attr), ENOENT);

  EXPECT_EQ(ibv_next_poll(cq_), EINVAL);         // no batch: ENOENT closed it
  EXPECT_EQ(ibv_start_poll(cq_, &attr), ENOENT);  // and the lock is free (no deadlock)
}

TEST_F(CqExTest, StartPoll_BadAttr_Einval) {
  Connect();
  ASSERT_EQ(Write(1), 0);
  ibv_poll_cq_attr attr = {};
  attr.comp_mask = 1;

  EXPECT_EQ(ibv_start_poll(cq_, &attr), EINVAL);
  EXPECT_EQ(ibv_start_poll(cq_, nullptr), EINVAL);

  attr.comp_mask = 0;
  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);  // the completion is still there
  EXPECT_EQ(cq_->wr_id, 1u);
  ibv_end_poll(cq_);
}

// The same RDMA WRITE twice: the first completion through ibv_poll_cq on ibv_cq_ex_to_cq, the
// second through start_poll and the readers: the same fields.
TEST_F(CqExTest, StartPoll_SendCompletion_ReadsWhatPollCqGives) {
  Connect();
  ASSERT_EQ(Write(1), 0);
  ASSERT_EQ(Write(2), 0);
  ibv_wc read;
  ASSERT_NO_FATAL_FAILURE(PollOneThenReadOne(1, 2, &read));
  EXPECT_EQ(read.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(read.qp_num, conn_->active.qp()->qp_num);
  EXPECT_EQ(ibv_next_poll(cq_), ENOENT);
  ibv_end_poll(cq_);
}

// Two WRITE WITH IMM into the active side: their receive completions, one through ibv_poll_cq,
// one through the batch, carry the same opcode, byte_len, qp_num, IBV_WC_WITH_IMM and imm.
TEST_F(CqExTest, StartPoll_ReceiveWithImm_ReadsWhatPollCqGives) {
  Connect();
  ASSERT_EQ(PostActiveRecv(11), 0);
  ASSERT_EQ(PostActiveRecv(12), 0);
  ASSERT_EQ(WriteWithImmToActive(21, 0x1234), 0);
  ASSERT_EQ(WriteWithImmToActive(22, 0x1234), 0);
  ExecutePosted(backend_, conn_->passive.send_cq);  // the passive side's NIC sends them
  std::vector<ibv_wc> passive = PollAll(backend_, conn_->passive.send_cq);
  ASSERT_EQ(passive.size(), 2u);
  ibv_wc read;
  ASSERT_NO_FATAL_FAILURE(PollOneThenReadOne(11, 12, &read));
  EXPECT_EQ(read.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(read.byte_len, 8u);
  EXPECT_EQ(read.qp_num, conn_->active.qp()->qp_num);
  EXPECT_NE(read.wc_flags & IBV_WC_WITH_IMM, 0u);
  EXPECT_EQ(ntohl(read.imm_data), 0x1234u);
  ibv_end_poll(cq_);
}

TEST_F(CqExTest, NextPoll_WalksSeveral_OldestFirst_ThenEnoent) {
  Connect();
  for (uint64_t wr_id = 1; wr_id <= 3; ++wr_id) ASSERT_EQ(Write(wr_id), 0);
  ibv_poll_cq_attr attr = {};
  std::vector<uint64_t> seen;

  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);
  seen.push_back(cq_->wr_id);
  while (ibv_next_poll(cq_) == 0) {
    EXPECT_EQ(cq_->status, IBV_WC_SUCCESS);
    EXPECT_EQ(ibv_wc_read_opcode(cq_), IBV_WC_RDMA_WRITE);
    seen.push_back(cq_->wr_id);
  }
  ibv_end_poll(cq_);

  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(ibv_start_poll(cq_, &attr), ENOENT);  // each was handed out once
}

// A batch may end early: what it did not reach stays for the next batch, or for ibv_poll_cq.
TEST_F(CqExTest, EndPoll_Early_RestStaysForTheNextPoll) {
  Connect();
  for (uint64_t wr_id = 1; wr_id <= 3; ++wr_id) ASSERT_EQ(Write(wr_id), 0);
  ibv_poll_cq_attr attr = {};
  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);
  EXPECT_EQ(cq_->wr_id, 1u);
  ibv_end_poll(cq_);

  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);
  EXPECT_EQ(cq_->wr_id, 2u);
  ibv_end_poll(cq_);
  std::vector<ibv_wc> rest = PollAll(backend_, ibv_cq_ex_to_cq(cq_));
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].wr_id, 3u);
}

// An RDMA WRITE to a wrong rkey: status and wr_id in the CQ's fields, and the readers give what
// ibv_poll_cq gives of an error completion (poison but for qp_num and vendor_err).
TEST_F(CqExTest, StartPoll_ErrorCompletion_StatusAndWhatPollCqGives) {
  Connect();
  ASSERT_EQ(Write(7, /*rkey_delta=*/1000), 0);
  ibv_poll_cq_attr attr = {};

  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);

  EXPECT_EQ(cq_->wr_id, 7u);
  EXPECT_EQ(cq_->status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_wc_read_qp_num(cq_), conn_->active.qp()->qp_num);
  EXPECT_EQ(ibv_wc_read_opcode(cq_), kWcPoisonOpcode);  // undefined on an error, as from poll
  EXPECT_EQ(ibv_wc_read_byte_len(cq_), kWcPoison);
  ibv_end_poll(cq_);
  ASSERT_EQ(Write(8), 0);  // the QP went to ERROR: it flushes
  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);
  EXPECT_EQ(cq_->wr_id, 8u);
  EXPECT_EQ(cq_->status, IBV_WC_WR_FLUSH_ERR);
  ibv_end_poll(cq_);
}

// ---- Faults of ibv_poll_cq, which start_poll and next_poll are ---------------------------------

TEST_F(CqExTest, StartPoll_PollFault_ReturnsItsErrno_NoBatchLeftOpen) {
  Connect();
  ASSERT_EQ(Write(1), 0);
  ScopedFaultPlan plan("ibv_poll_cq:fail=EIO:nth=1; ibv_poll_cq:fail=none:nth=2");
  ASSERT_TRUE(plan.status().ok()) << plan.status();
  ibv_poll_cq_attr attr = {};

  EXPECT_EQ(ibv_start_poll(cq_, &attr), EIO);
  EXPECT_EQ(ibv_start_poll(cq_, &attr), EIO);  // no errno value (fail=none): EIO

  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);  // the completion was not taken
  EXPECT_EQ(cq_->wr_id, 1u);
  ibv_end_poll(cq_);
}

TEST_F(CqExTest, NextPoll_PollFault_ReturnsItsErrno_BatchStillEnds) {
  Connect();
  ASSERT_EQ(Write(1), 0);
  ASSERT_EQ(Write(2), 0);
  ScopedFaultPlan plan("ibv_poll_cq:fail=EOVERFLOW:nth=2");
  ASSERT_TRUE(plan.status().ok()) << plan.status();
  ibv_poll_cq_attr attr = {};
  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);

  EXPECT_EQ(ibv_next_poll(cq_), EOVERFLOW);

  EXPECT_EQ(cq_->wr_id, 1u);  // still the first's
  ibv_end_poll(cq_);
  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);
  EXPECT_EQ(cq_->wr_id, 2u);
  ibv_end_poll(cq_);
}

// ---- Misuse that would deadlock or corrupt the batch -------------------------------------------

TEST_F(CqExTest, Batch_Misuse_FailsInsteadOfDeadlocking) {
  Connect();
  ASSERT_EQ(Write(1), 0);
  ASSERT_EQ(Write(2), 0);
  ibv_poll_cq_attr attr = {};
  EXPECT_EQ(ibv_next_poll(cq_), EINVAL);  // outside a batch
  ibv_end_poll(cq_);                      // outside a batch: nothing
  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);

  EXPECT_EQ(ibv_start_poll(cq_, &attr), EINVAL);  // a batch of this thread is open

  EXPECT_EQ(cq_->wr_id, 1u);
  ASSERT_EQ(ibv_next_poll(cq_), 0);  // the batch goes on
  EXPECT_EQ(cq_->wr_id, 2u);
  ibv_end_poll(cq_);
}

// A CQ whose batch is open is not destroyed under its reader (a waiting start_poll of another
// thread would use freed memory): EBUSY, then destroyable once the batch ends.
TEST_F(CqExTest, Destroy_DuringABatch_Ebusy) {
  Connect();
  ASSERT_EQ(Write(1), 0);
  ibv_poll_cq_attr attr = {};
  int ret = ENOENT;
  for (int spin = 0; spin < 1000 && ret == ENOENT; ++spin) ret = ibv_start_poll(cq_, &attr);
  ASSERT_EQ(ret, 0);
  active_buf_.reset();
  passive_buf_.reset();
  conn_.reset();  // no QP uses cq_ any more; its completion stays
  EXPECT_EQ(backend_->IbvDestroyCq(ibv_cq_ex_to_cq(cq_)), EBUSY);
  ibv_end_poll(cq_);
  EXPECT_EQ(backend_->IbvDestroyCq(ibv_cq_ex_to_cq(cq_)), 0);
  cq_ = nullptr;
}

// ---- Thread-safety of a batch ------------------------------------------------------------------

// A batch holds only its own CQ: another thread's whole batch on another CQ runs while it is
// open.
TEST_F(CqExTest, Batch_OtherThreadsBatchOnAnotherCq_DoesNotWait) {
  Connect();
  ASSERT_EQ(Write(1), 0);
  ibv_cq_init_attr_ex other_attr = CqAttr(4, 0);
  ibv_cq_ex* other = nullptr;
  ASSERT_EQ(backend_->IbvCreateCqEx(SimContext(), &other_attr, &other), 0);
  ibv_poll_cq_attr attr = {};
  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);

  absl::Notification done;
  std::atomic<int> other_result{-1};
  std::thread poller([&] {
    ibv_poll_cq_attr other_poll = {};
    other_result = ibv_start_poll(other, &other_poll);
    done.Notify();
  });
  const bool finished = done.WaitForNotificationWithTimeout(absl::Seconds(30));
  ibv_end_poll(cq_);
  poller.join();

  EXPECT_TRUE(finished) << "a batch on one CQ blocked a poll of another";
  EXPECT_EQ(other_result.load(), ENOENT);
  EXPECT_EQ(backend_->IbvDestroyCq(ibv_cq_ex_to_cq(other)), 0);
}

// As mlx5's CQ lock: another thread's start_poll of the same CQ waits for the open batch's
// end_poll, then takes the next completion.
TEST_F(CqExTest, Batch_OtherThreadsStartPollOnTheSameCq_WaitsForEndPoll) {
  Connect();
  ASSERT_EQ(Write(1), 0);
  ASSERT_EQ(Write(2), 0);
  ibv_poll_cq_attr attr = {};
  ASSERT_EQ(ibv_start_poll(cq_, &attr), 0);
  ASSERT_EQ(cq_->wr_id, 1u);

  std::atomic<bool> started{false};
  absl::Notification polled;
  uint64_t other_wr_id = 0;
  std::thread other([&] {
    ibv_poll_cq_attr other_attr = {};
    started = true;
    if (ibv_start_poll(cq_, &other_attr) == 0) {
      other_wr_id = cq_->wr_id;
      ibv_end_poll(cq_);
    }
    polled.Notify();
  });
  while (!started) std::this_thread::yield();
  EXPECT_FALSE(polled.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "start_poll did not wait for the other thread's batch";
  EXPECT_EQ(cq_->wr_id, 1u);  // the open batch's current completion is untouched
  ibv_end_poll(cq_);
  other.join();

  EXPECT_EQ(other_wr_id, 2u);
}

}  // namespace
}  // namespace softrpma::sim::testing
