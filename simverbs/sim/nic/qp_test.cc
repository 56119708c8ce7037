// The RC data path of the simulator, through the Backend interface: WRITE / READ / SEND /
// RECV (with and without immediate data), RNR waiting, order, signaling, send-queue occupancy,
// SGE limits, receive length errors, flushing, SRQs, inline data, atomic write (inline, aligned,
// never torn), compare-and-swap and fetch-and-add (their former values, their checks, no
// addition lost between two connections), a read ordered after earlier writes, inline verbs.

#include <arpa/inet.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/nic/cq.h"
#include "simverbs/sim/nic/device.h"
#include "simverbs/sim/nic/qp.h"
#include "simverbs/sim/sim_control.h"
#include "simverbs/sim/test_util.h"
#include "simverbs/sim/nic/torn_word_reader.h"

namespace softrpma::sim::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;

class QpTest : public ::testing::Test {
 protected:
  void Connect(const ConnectionOptions& options = ConnectionOptions()) {
    absl::Status status = conn_.Connect(options);
    ASSERT_TRUE(status.ok()) << status;
  }

  Backend* backend_ = SimBackend();
  TestConnection conn_{backend_};
};

TEST_F(QpTest, Write_CopiesLocalToRemote_CompletesWithWcFields) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 64, kRemoteAccess);
  std::memcpy(local.data(), "hello, remote", 13);
  ibv_sge sge = local.Sge(0, 13);

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 42, &sge, 1, remote.addr(8), remote.mr()->rkey),
            0);

  std::vector<ibv_wc> wcs = PollAll(backend_, conn_.active.send_cq);
  EXPECT_EQ(std::memcmp(remote.data() + 8, "hello, remote", 13), 0);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 42u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_WRITE);
  // verbs defines byte_len for receives, RDMA READ and atomics only: poison here (cq.h).
  EXPECT_EQ(wcs[0].byte_len, kWcPoison);
  EXPECT_EQ(wcs[0].qp_num, conn_.active.qp()->qp_num);
  EXPECT_EQ(wcs[0].vendor_err, 0u);
  EXPECT_TRUE(PollAll(backend_, conn_.passive.recv_cq).empty());  // one-sided: nothing there
}

TEST_F(QpTest, Write_GathersSeveralSges) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 64, kRemoteAccess);
  std::memcpy(local.data(), "abcdefgh", 8);
  ibv_sge sges[3] = {local.Sge(6, 2), local.Sge(0, 3), local.Sge(3, 3)};

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, sges, 3, remote.addr(), remote.mr()->rkey),
            0);

  std::vector<ibv_wc> wcs = PollAll(backend_, conn_.active.send_cq);
  EXPECT_EQ(std::memcmp(remote.data(), "ghabcdef", 8), 0);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
}

TEST_F(QpTest, Read_CopiesRemoteToLocal_ByteLenIsBytesRead) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 64, kRemoteAccess);
  std::memcpy(remote.data() + 4, "remote bytes", 12);
  ibv_sge sge = local.Sge(0, 12);

  ASSERT_EQ(PostRead(backend_, conn_.active.qp(), 7, &sge, 1, remote.addr(4), remote.mr()->rkey),
            0);

  std::vector<ibv_wc> wcs = PollAll(backend_, conn_.active.send_cq);
  EXPECT_EQ(std::memcmp(local.data(), "remote bytes", 12), 0);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 7u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wcs[0].byte_len, 12u);
}

TEST_F(QpTest, SendRecv_RecvPostedFirst_DataAndBothCompletions) {
  Connect();
  TestBuffer out(backend_, conn_.active.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, conn_.passive.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  std::memcpy(out.data(), "message", 7);
  ibv_sge recv_sge = in.Sge(0, 32);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 100, &recv_sge, 1), 0);
  ibv_sge send_sge = out.Sge(0, 7);

  ASSERT_EQ(PostSendMsg(backend_, conn_.active.qp(), 200, &send_sge, 1), 0);

  std::vector<ibv_wc> recvs = PollAll(backend_, conn_.passive.recv_cq);
  EXPECT_EQ(std::memcmp(in.data(), "message", 7), 0);
  ASSERT_EQ(recvs.size(), 1u);
  EXPECT_EQ(recvs[0].wr_id, 100u);
  EXPECT_EQ(recvs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(recvs[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(recvs[0].byte_len, 7u);
  EXPECT_EQ(recvs[0].qp_num, conn_.passive.qp()->qp_num);
  EXPECT_EQ(recvs[0].src_qp, conn_.active.qp()->qp_num);
  EXPECT_EQ(recvs[0].wc_flags & IBV_WC_WITH_IMM, 0u);
  std::vector<ibv_wc> sends = PollAll(backend_, conn_.active.send_cq);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].wr_id, 200u);
  EXPECT_EQ(sends[0].opcode, IBV_WC_SEND);
}

TEST_F(QpTest, Send_NoRecvPosted_WaitsUntilRecvPosted) {
  Connect();
  TestBuffer out(backend_, conn_.active.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, conn_.passive.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  std::memcpy(out.data(), "late", 4);
  ibv_sge send_sge = out.Sge(0, 4);

  ASSERT_EQ(PostSendMsg(backend_, conn_.active.qp(), 1, &send_sge, 1), 0);
  EXPECT_TRUE(PollAll(backend_, conn_.active.send_cq).empty());  // receiver not ready: waits

  ibv_sge recv_sge = in.Sge(0, 32);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 2, &recv_sge, 1), 0);

  EXPECT_EQ(std::memcmp(in.data(), "late", 4), 0);
  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
  EXPECT_THAT(PollAll(backend_, conn_.passive.recv_cq), ElementsAre(Field(&ibv_wc::byte_len, 4u)));
}

TEST_F(QpTest, InOrderPerQp_WriteBehindWaitingSendWaitsToo) {
  Connect();
  TestBuffer out(backend_, conn_.active.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, conn_.passive.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 32, kRemoteAccess);
  std::memcpy(out.data(), "XY", 2);
  ibv_sge send_sge = out.Sge(0, 1);
  ibv_sge write_sge = out.Sge(1, 1);

  ASSERT_EQ(PostSendMsg(backend_, conn_.active.qp(), 1, &send_sge, 1), 0);
  ASSERT_EQ(
      PostWrite(backend_, conn_.active.qp(), 2, &write_sge, 1, remote.addr(), remote.mr()->rkey),
      0);
  EXPECT_EQ(remote.data()[0], 0);  // the write waits behind the send
  EXPECT_TRUE(PollAll(backend_, conn_.active.send_cq).empty());

  ibv_sge recv_sge = in.Sge(0, 32);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 9, &recv_sge, 1), 0);

  EXPECT_EQ(remote.data()[0], 'Y');
  EXPECT_EQ(in.data()[0], 'X');
  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::wr_id, 1u), Field(&ibv_wc::wr_id, 2u)));
}

TEST_F(QpTest, SendWithImm_RecvCarriesImmData) {
  Connect();
  TestBuffer out(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, conn_.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge recv_sge = in.Sge(0, 16);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 1, &recv_sge, 1), 0);
  ibv_sge sge = out.Sge(0, 4);
  ibv_send_wr wr{};
  wr.wr_id = 5;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(0xC0FFEE);
  ibv_send_wr* bad = nullptr;

  ASSERT_EQ(backend_->IbvPostSend(conn_.active.qp(), &wr, &bad), 0);

  std::vector<ibv_wc> recvs = PollAll(backend_, conn_.passive.recv_cq);
  ASSERT_EQ(recvs.size(), 1u);
  EXPECT_EQ(recvs[0].opcode, IBV_WC_RECV);
  EXPECT_NE(recvs[0].wc_flags & IBV_WC_WITH_IMM, 0u);
  EXPECT_EQ(ntohl(recvs[0].imm_data), 0xC0FFEEu);
}

TEST_F(QpTest, WriteWithImm_WritesRemoteAndConsumesRecv) {
  Connect();
  TestBuffer out(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  std::memcpy(out.data(), "imm!", 4);
  ibv_sge sge = out.Sge(0, 4);
  ibv_send_wr wr{};
  wr.wr_id = 5;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(77);
  wr.wr.rdma.remote_addr = remote.addr();
  wr.wr.rdma.rkey = remote.mr()->rkey;
  ibv_send_wr* bad = nullptr;

  ASSERT_EQ(backend_->IbvPostSend(conn_.active.qp(), &wr, &bad), 0);
  EXPECT_EQ(remote.data()[0], 0);  // needs a receive first
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 3, nullptr, 0), 0);

  std::vector<ibv_wc> recvs = PollAll(backend_, conn_.passive.recv_cq);
  EXPECT_EQ(std::memcmp(remote.data(), "imm!", 4), 0);
  ASSERT_EQ(recvs.size(), 1u);
  EXPECT_EQ(recvs[0].wr_id, 3u);
  EXPECT_EQ(recvs[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(recvs[0].byte_len, 4u);
  EXPECT_NE(recvs[0].wc_flags & IBV_WC_WITH_IMM, 0u);
  EXPECT_EQ(ntohl(recvs[0].imm_data), 77u);
  // The sender is told the write carried immediate data, as mlx5 does.
  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(AllOf(Field(&ibv_wc::opcode, IBV_WC_RDMA_WRITE),
                                Field(&ibv_wc::wc_flags, static_cast<unsigned>(IBV_WC_WITH_IMM)))));
}

// Of an error completion, verbs defines only wr_id, status, qp_num and vendor_err: the rest is
// poison, so a program that reads them (the opcode, typically) reads nonsense here as on a NIC.
TEST_F(QpTest, ErrorCompletion_OnlyWrIdStatusQpNumVendorErrAreDefined) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = local.Sge(0, 8);
  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 9, &sge, 1, 0x1000, /*rkey=*/0xBAD), 0);

  std::vector<ibv_wc> wcs = PollAll(backend_, conn_.active.send_cq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 9u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(wcs[0].qp_num, conn_.active.qp()->qp_num);
  EXPECT_EQ(wcs[0].vendor_err, 0u);
  EXPECT_EQ(wcs[0].opcode, kWcPoisonOpcode);
  EXPECT_EQ(wcs[0].byte_len, kWcPoison);
  EXPECT_EQ(wcs[0].src_qp, kWcPoison);
  EXPECT_EQ(static_cast<uint32_t>(wcs[0].wc_flags), kWcPoison);
}

TEST_F(QpTest, Unsignaled_NoSuccessCompletion_ButErrorCompletion) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  ibv_sge sge = local.Sge(0, 8);

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey,
                      /*flags=*/0),
            0);
  EXPECT_TRUE(PollAll(backend_, conn_.active.send_cq).empty());

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 2, &sge, 1, remote.addr(),
                      remote.mr()->rkey + 1000, /*flags=*/0),
            0);
  EXPECT_THAT(
      PollAll(backend_, conn_.active.send_cq),
      ElementsAre(AllOf(Field(&ibv_wc::wr_id, 2u), Field(&ibv_wc::status, IBV_WC_REM_ACCESS_ERR))));
}

// IB class C: a remote access error moves the responder's QP to ERROR too; its posted
// receives flush, and it takes no more.
TEST_F(QpTest, RemoteAccessError_ResponderQpGoesToErrorAndFlushesItsReceives) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);  // no remote write
  TestBuffer inbox(backend_, conn_.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge inbox_sge = inbox.Sge(0, 16);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 5, &inbox_sge, 1), 0);
  ibv_sge sge = local.Sge(0, 8);

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_REM_ACCESS_ERR)));
  EXPECT_EQ(conn_.passive.qp()->state, IBV_QPS_ERR);
  EXPECT_THAT(PollAll(backend_, conn_.passive.recv_cq),
              ElementsAre(AllOf(Field(&ibv_wc::wr_id, 5u),
                                Field(&ibv_wc::status, IBV_WC_WR_FLUSH_ERR))));
}

// The passive QP's remote access narrowed to `access` (RTS -> RTS, IBV_QP_ACCESS_FLAGS), then
// a request of `opcode` from the active side to an MR that grants everything: refused with
// IBV_WC_REM_ACCESS_ERR whatever the MR says, the target untouched and the responder in ERROR,
// as for an MR without the access.
void ExpectQpAccessRefuses(Backend* backend, TestConnection* conn, int access,
                           ibv_wr_opcode opcode) {
  ibv_qp_attr attr{};
  attr.qp_access_flags = access;
  ASSERT_EQ(backend->IbvModifyQp(conn->passive.qp(), &attr, IBV_QP_ACCESS_FLAGS), 0);
  TestBuffer local(backend, conn->active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend, conn->passive.pd, 16, kRemoteAccess);
  std::memcpy(local.data(), "local", 6);
  std::memcpy(remote.data(), "remote", 7);
  ibv_sge sge = local.Sge(8, 7);
  if (opcode == IBV_WR_RDMA_READ) {
    ASSERT_EQ(PostRead(backend, conn->active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey),
              0);
  } else {
    sge = local.Sge(0, 6);
    ASSERT_EQ(
        PostWrite(backend, conn->active.qp(), 1, &sge, 1, remote.addr(8), remote.mr()->rkey), 0);
  }

  EXPECT_THAT(PollAll(backend, conn->active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_REM_ACCESS_ERR)));
  EXPECT_EQ(local.data()[8], 0) << "the refused read brought data";
  EXPECT_EQ(remote.data()[8], 0) << "the refused write reached memory";
  EXPECT_EQ(conn->passive.qp()->state, IBV_QPS_ERR);
}

TEST_F(QpTest, Write_ResponderQpWithoutRemoteWrite_RemAccessErr) {
  Connect();
  ExpectQpAccessRefuses(backend_, &conn_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
                        IBV_WR_RDMA_WRITE);
}

TEST_F(QpTest, Read_ResponderQpWithoutRemoteRead_RemAccessErr) {
  Connect();
  ExpectQpAccessRefuses(backend_, &conn_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                        IBV_WR_RDMA_READ);
}

TEST_F(QpTest, SqSigAll_EveryWrCompletes) {
  ConnectionOptions options;
  options.sq_sig_all = 1;
  Connect(options);
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  ibv_sge sge = local.Sge(0, 8);

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey,
                      /*flags=*/0),
            0);

  EXPECT_EQ(PollAll(backend_, conn_.active.send_cq).size(), 1u);
}

TEST_F(QpTest, SendQueueFull_Enomem_SlotsFreedWhenCompletionPolled) {
  ConnectionOptions options;
  options.max_send_wr = 4;
  Connect(options);
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  ibv_sge sge = local.Sge(0, 8);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), i, &sge, 1, remote.addr(), remote.mr()->rkey,
                        /*flags=*/0),
              0);
  }
  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 3, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);

  // 3 unsignaled + 1 signaled hold all 4 slots until the completion is polled.
  EXPECT_EQ(PostWrite(backend_, conn_.active.qp(), 4, &sge, 1, remote.addr(), remote.mr()->rkey),
            ENOMEM);
  ASSERT_EQ(PollAll(backend_, conn_.active.send_cq).size(), 1u);  // retires all four
  EXPECT_EQ(PostWrite(backend_, conn_.active.qp(), 5, &sge, 1, remote.addr(), remote.mr()->rkey),
            0);
}

TEST_F(QpTest, PostSend_BadWrStopsTheChain_EarlierWrsPosted) {
  ConnectionOptions options;
  options.max_sge = 2;
  Connect(options);
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  ibv_sge sges[3] = {local.Sge(0, 1), local.Sge(1, 1), local.Sge(2, 1)};
  ibv_send_wr second{};
  second.wr_id = 2;
  second.opcode = IBV_WR_RDMA_WRITE;
  second.sg_list = sges;
  second.num_sge = 3;  // above max_send_sge
  second.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr first = second;
  first.wr_id = 1;
  first.num_sge = 1;
  first.next = &second;
  first.wr.rdma.remote_addr = second.wr.rdma.remote_addr = remote.addr();
  first.wr.rdma.rkey = second.wr.rdma.rkey = remote.mr()->rkey;
  ibv_send_wr* bad = nullptr;

  // ENOMEM: mlx5's answer to too many SGEs, the default profile's (docs/DEVICES.md).
  EXPECT_EQ(backend_->IbvPostSend(conn_.active.qp(), &first, &bad), ENOMEM);

  EXPECT_EQ(bad, &second);
  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq), ElementsAre(Field(&ibv_wc::wr_id, 1u)));
}

TEST_F(QpTest, PostRecv_TooManySges_Einval) {
  ConnectionOptions options;
  options.max_sge = 1;
  Connect(options);
  TestBuffer in(backend_, conn_.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sges[2] = {in.Sge(0, 8), in.Sge(8, 8)};

  EXPECT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 1, sges, 2), EINVAL);
}

TEST_F(QpTest, PostRecv_QueueFull_Enomem) {
  ConnectionOptions options;
  options.max_recv_wr = 2;
  Connect(options);
  TestBuffer in(backend_, conn_.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = in.Sge(0, 8);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 1, &sge, 1), 0);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 2, &sge, 1), 0);

  EXPECT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 3, &sge, 1), ENOMEM);
}

// As on mlx5 (the default profile): a consumed receive keeps its slot until its completion is
// polled.
TEST_F(QpTest, Receive_HoldsItsSlotUntilItsCompletionIsPolled) {
  for (const bool with_srq : {false, true}) {
    SCOPED_TRACE(with_srq ? "SRQ" : "RQ");
    TestConnection conn(backend_);
    ConnectionOptions options;
    options.max_recv_wr = 2;
    options.passive_srq = with_srq;
    ASSERT_TRUE(conn.Connect(options).ok());
    TestBuffer out(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
    TestBuffer in(backend_, conn.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
    ibv_sge recv_sge = in.Sge(0, 8);
    auto post_recv = [&](uint64_t wr_id) {
      ibv_recv_wr recv{};
      recv.wr_id = wr_id;
      recv.sg_list = &recv_sge;
      recv.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      return with_srq ? backend_->IbvPostSrqRecv(conn.passive.srq, &recv, &bad)
                      : backend_->IbvPostRecv(conn.passive.qp(), &recv, &bad);
    };
    ASSERT_EQ(post_recv(1), 0);
    ASSERT_EQ(post_recv(2), 0);
    ibv_sge send_sge = out.Sge(0, 4);
    ASSERT_EQ(PostSendMsg(backend_, conn.active.qp(), 9, &send_sge, 1), 0);
    ASSERT_EQ(PollAll(backend_, conn.active.send_cq).size(), 1u);  // receive 1 consumed

    EXPECT_EQ(post_recv(3), ENOMEM) << "its completion is not polled yet";
    ASSERT_EQ(PollAll(backend_, conn.passive.recv_cq).size(), 1u);
    EXPECT_EQ(post_recv(3), 0);
  }
}

// rxe and siw free a WR's slot as it completes, signaled or not, and a receive's as it is
// consumed: the kernel consumes the WQE then (mlx5 frees them when the completion is polled:
// the two tests above).
TEST_F(QpTest, SlotsFreedAtCompletion_OnRxeAndSiw) {
  for (const char* name : {"rxe", "siw"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<const DeviceProfile*> profile = FindDeviceProfile(name);
    ASSERT_TRUE(profile.ok());
    SetActiveProfile(**profile);
    TestConnection conn(backend_);
    ConnectionOptions options;
    options.max_send_wr = 3;  // reported as 3 by both (rxe: 2^k - 1 >= 3; siw: as asked)
    options.max_recv_wr = 3;
    const absl::Status connected = conn.Connect(options);
    SetActiveProfile(DeviceProfiles()[0]);  // the QPs keep the profile they were made with
    ASSERT_TRUE(connected.ok()) << connected;
    TestBuffer local(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
    TestBuffer remote(backend_, conn.passive.pd, 16, kRemoteAccess | IBV_ACCESS_LOCAL_WRITE);
    ibv_sge sge = local.Sge(0, 8);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(PostWrite(backend_, conn.active.qp(), i, &sge, 1, remote.addr(),
                          remote.mr()->rkey, /*flags=*/0),
                0);
    }
    // A poll point: the three execute and complete, unsignaled, and nothing is there to poll.
    EXPECT_TRUE(PollAll(backend_, conn.active.send_cq).empty());
    for (int i = 3; i < 6; ++i) {
      EXPECT_EQ(PostWrite(backend_, conn.active.qp(), i, &sge, 1, remote.addr(),
                          remote.mr()->rkey, /*flags=*/0),
                0)
          << "the slot of an unsignaled WR that completed is free";
    }
    EXPECT_TRUE(PollAll(backend_, conn.active.send_cq).empty());

    ibv_sge recv_sge = remote.Sge(8, 8);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 10 + i, &recv_sge, 1), 0);
    }
    ibv_sge send_sge = local.Sge(0, 4);
    ASSERT_EQ(PostSendMsg(backend_, conn.active.qp(), 20, &send_sge, 1), 0);
    ASSERT_EQ(PollAll(backend_, conn.active.send_cq).size(), 1u);  // receive 10 consumed
    EXPECT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 13, &recv_sge, 1), 0)
        << "a consumed receive's slot is free before its completion is polled";
    EXPECT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 14, &recv_sge, 1), ENOMEM);
    EXPECT_THAT(PollAll(backend_, conn.passive.recv_cq), ElementsAre(Field(&ibv_wc::wr_id, 10u)));
  }
}

TEST_F(QpTest, PostSend_BeforeConnected_Einval) {
  ASSERT_TRUE(conn_.Listen("127.0.0.1", NextTestPort()).ok());
  ASSERT_TRUE(conn_.StartActive(ConnectionOptions(), conn_.port).ok());
  EXPECT_EQ(conn_.active.qp()->state, IBV_QPS_INIT);
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = local.Sge(0, 8);

  EXPECT_EQ(PostSendMsg(backend_, conn_.active.qp(), 1, &sge, 1), EINVAL);
  // Receives may be posted from INIT on.
  EXPECT_EQ(PostRecvBuf(backend_, conn_.active.qp(), 2, &sge, 1), 0);
}

TEST_F(QpTest, RecvTooSmall_LocLenErrOnReceiver_RemInvReqErrOnSender_BothQpsError) {
  Connect();
  TestBuffer out(backend_, conn_.active.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, conn_.passive.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge recv_sge = in.Sge(0, 4);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 1, &recv_sge, 1), 0);
  ibv_sge send_sge = out.Sge(0, 16);

  ASSERT_EQ(PostSendMsg(backend_, conn_.active.qp(), 2, &send_sge, 1), 0);

  EXPECT_THAT(PollAll(backend_, conn_.passive.recv_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_LOC_LEN_ERR)));
  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_REM_INV_REQ_ERR)));
  EXPECT_EQ(conn_.active.qp()->state, IBV_QPS_ERR);
  EXPECT_EQ(conn_.passive.qp()->state, IBV_QPS_ERR);
}

TEST_F(QpTest, Disconnect_FlushesOutstandingWrs_LaterPostsFlushToo) {
  Connect();
  TestBuffer buf(backend_, conn_.active.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = buf.Sge(0, 8);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.active.qp(), 11, &sge, 1), 0);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.active.qp(), 12, &sge, 1), 0);
  ASSERT_EQ(PostSendMsg(backend_, conn_.active.qp(), 13, &sge, 1), 0);  // waits: no recv there

  ASSERT_TRUE(conn_.Disconnect().ok());

  EXPECT_EQ(conn_.active.qp()->state, IBV_QPS_ERR);
  EXPECT_EQ(conn_.passive.qp()->state, IBV_QPS_ERR);
  std::vector<ibv_wc> wcs = PollAll(backend_, conn_.active.send_cq);  // send and recv CQ
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].wr_id, 13u);
  EXPECT_EQ(wcs[1].wr_id, 11u);
  EXPECT_EQ(wcs[1].opcode, kWcPoisonOpcode);  // undefined on an error
  EXPECT_EQ(wcs[2].wr_id, 12u);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);

  ASSERT_EQ(PostSendMsg(backend_, conn_.active.qp(), 14, &sge, 1, /*flags=*/0), 0);
  EXPECT_THAT(
      PollAll(backend_, conn_.active.send_cq),
      ElementsAre(AllOf(Field(&ibv_wc::wr_id, 14u), Field(&ibv_wc::status, IBV_WC_WR_FLUSH_ERR))));
}

TEST_F(QpTest, Srq_SenderWaitsForSrqReceive_ResumedBySrqPost) {
  ConnectionOptions options;
  options.passive_srq = true;
  Connect(options);
  TestBuffer out(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer in(backend_, conn_.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  std::memcpy(out.data(), "srq", 3);
  ibv_sge send_sge = out.Sge(0, 3);
  ASSERT_EQ(PostSendMsg(backend_, conn_.active.qp(), 1, &send_sge, 1), 0);
  EXPECT_TRUE(PollAll(backend_, conn_.active.send_cq).empty());
  // Receives go to the SRQ, not the QP.
  ibv_sge recv_sge = in.Sge(0, 16);
  EXPECT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 2, &recv_sge, 1), EINVAL);
  ibv_recv_wr recv{};
  recv.wr_id = 3;
  recv.sg_list = &recv_sge;
  recv.num_sge = 1;
  ibv_recv_wr* bad = nullptr;

  ASSERT_EQ(backend_->IbvPostSrqRecv(conn_.passive.srq, &recv, &bad), 0);

  std::vector<ibv_wc> recvs = PollAll(backend_, conn_.passive.recv_cq);
  EXPECT_EQ(std::memcmp(in.data(), "srq", 3), 0);
  ASSERT_EQ(recvs.size(), 1u);
  EXPECT_EQ(recvs[0].wr_id, 3u);
  EXPECT_EQ(recvs[0].qp_num, conn_.passive.qp()->qp_num);
  EXPECT_EQ(PollAll(backend_, conn_.active.send_cq).size(), 1u);
  EXPECT_EQ(backend_->IbvDestroySrq(conn_.passive.srq), EBUSY);  // the QP still uses it
}

TEST_F(QpTest, Inline_NoLkeyNeeded) {
  Connect();
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  char data[] = "inline";
  ibv_sge sge{reinterpret_cast<uintptr_t>(data), 6, /*lkey=*/0};

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey,
                      IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_SUCCESS)));
  EXPECT_EQ(std::memcmp(remote.data(), "inline", 6), 0);
}

// ENOMEM: mlx5's set_data_inl_seg, the default profile's (docs/DEVICES.md); rxe and siw answer
// EINVAL (verbs_qp_test, SgeAndInlineLimits_EachProfilesErrno).
TEST_F(QpTest, Inline_AboveMaxInlineData_Enomem) {
  ConnectionOptions options;
  options.max_inline_data = 4;
  Connect(options);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  char data[8] = {};
  ibv_sge sge{reinterpret_cast<uintptr_t>(data), 8, 0};

  EXPECT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, remote.addr(), remote.mr()->rkey,
                      IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            ENOMEM);
}

// ---- 8-byte atomic write ---------------------------------------------------------------------

// A device with native atomic write and a connection whose QPs are extended QPs with the
// atomic write builder (IBV_QP_EX_WITH_ATOMIC_WRITE).
class AtomicWriteTest : public QpTest {
 protected:
  void SetUp() override { SetAtomicWriteSupported(true); }
  void TearDown() override { SetAtomicWriteSupported(false); }

  void ConnectExtended(ConnectionOptions options = ConnectionOptions()) {
    options.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
    Connect(options);
    ASSERT_EQ(backend_->IbvQpToQpEx(conn_.active.qp(), &qpx_), 0);
  }

  // One batch of one signaled atomic write of *value (copied by the builder).
  int PostAtomicWrite(uint64_t wr_id, const uint64_t* value, uint64_t remote_addr, uint32_t rkey) {
    backend_->IbvWrStart(qpx_);
    qpx_->wr_id = wr_id;
    qpx_->wr_flags = IBV_SEND_SIGNALED;
    backend_->IbvWrAtomicWrite(qpx_, rkey, remote_addr, value);
    return backend_->IbvWrComplete(qpx_);
  }

  ibv_qp_ex* qpx_ = nullptr;
};

TEST_F(AtomicWriteTest, Writes8Bytes_CompletesAsAtomicWrite) {
  ConnectExtended();
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  const uint64_t value = 0x1122334455667788ULL;

  ASSERT_EQ(PostAtomicWrite(1, &value, remote.addr(8), remote.mr()->rkey), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(AllOf(Field(&ibv_wc::wr_id, 1u), Field(&ibv_wc::byte_len, 8u),
                                Field(&ibv_wc::status, IBV_WC_SUCCESS),
                                Field(&ibv_wc::opcode, IBV_WC_ATOMIC_WRITE))));
  uint64_t got = 0;
  std::memcpy(&got, remote.data() + 8, 8);
  EXPECT_EQ(got, value);
}

// The verbs.h inline functions reach the simulator through the QP's ops, as with a provider.
TEST_F(AtomicWriteTest, InlineVerbsOfTheExtendedQp_Post) {
  ConnectExtended();
  TestBuffer remote(backend_, conn_.passive.pd, 8, kRemoteAccess);
  const uint64_t value = 42;

  ibv_wr_start(qpx_);
  qpx_->wr_id = 9;
  qpx_->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_write(qpx_, remote.mr()->rkey, remote.addr(0), &value);
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq), ElementsAre(Field(&ibv_wc::wr_id, 9u)));
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(remote.data()), 42u);
}

// As mlx5: the legacy post path does not take the opcode, on any QP.
TEST_F(AtomicWriteTest, PostSendOfAtomicWriteOpcode_Einval) {
  ConnectExtended();
  TestBuffer remote(backend_, conn_.passive.pd, 8, kRemoteAccess);
  uint64_t value = 1;
  ibv_sge sge{reinterpret_cast<uintptr_t>(&value), sizeof(value), 0};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_ATOMIC_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = remote.addr(0);
  wr.wr.rdma.rkey = remote.mr()->rkey;
  ibv_send_wr* bad = nullptr;

  EXPECT_EQ(backend_->IbvPostSend(conn_.active.qp(), &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  EXPECT_TRUE(PollAll(backend_, conn_.active.send_cq).empty());
}

TEST_F(AtomicWriteTest, PlainQp_HasNoExtendedPostApi) {
  Connect();
  ibv_qp_ex* qpx = nullptr;
  EXPECT_EQ(backend_->IbvQpToQpEx(conn_.active.qp(), &qpx), kNoErrno);
  EXPECT_EQ(qpx, nullptr);
}

TEST_F(AtomicWriteTest, ValueIsCopiedWhenBuilt) {
  ConnectExtended();
  TestBuffer msg(backend_, conn_.active.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer inbox(backend_, conn_.passive.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  // A send with no receive posted waits at the head of the send queue, and the atomic write
  // behind it: the value must be the one given when built, not at execution time.
  ibv_sge msg_sge = msg.Sge(0, 8);
  ASSERT_EQ(PostSendMsg(backend_, conn_.active.qp(), 1, &msg_sge, 1), 0);
  uint64_t value = 0x1122334455667788ULL;
  ASSERT_EQ(PostAtomicWrite(2, &value, remote.addr(8), remote.mr()->rkey), 0);
  value = 0;  // the caller may reuse its buffer once the post returned
  EXPECT_TRUE(PollAll(backend_, conn_.active.send_cq).empty());

  ibv_sge inbox_sge = inbox.Sge(0, 8);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 3, &inbox_sge, 1), 0);

  uint64_t got = 0;
  std::memcpy(&got, remote.data() + 8, 8);
  EXPECT_EQ(got, 0x1122334455667788ULL);
  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::opcode, IBV_WC_SEND),
                          AllOf(Field(&ibv_wc::wr_id, 2u),
                                Field(&ibv_wc::opcode, IBV_WC_ATOMIC_WRITE))));
}

TEST_F(AtomicWriteTest, MisalignedRemoteAddress_RemInvReqErr) {
  ConnectExtended();
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  std::memset(remote.data(), 0x5A, 16);
  const uint64_t value = ~uint64_t{0};

  ASSERT_EQ(PostAtomicWrite(7, &value, remote.addr(4), remote.mr()->rkey), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(AllOf(Field(&ibv_wc::wr_id, 7u),
                                Field(&ibv_wc::status, IBV_WC_REM_INV_REQ_ERR))));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(remote.data()[i], 0x5A) << "byte " << i;
}

// The responder checks in one order on every transport: the key before an atomic's alignment.
// Either error moves the responder's QP to ERROR as well, before the requester learns of it.
TEST_F(AtomicWriteTest, MisalignedWithABadKey_RemAccessErr_ResponderInError) {
  ConnectExtended();
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  std::memset(remote.data(), 0x5A, 16);
  const uint64_t value = ~uint64_t{0};

  ASSERT_EQ(PostAtomicWrite(7, &value, remote.addr(4), remote.mr()->rkey + 1), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(AllOf(Field(&ibv_wc::wr_id, 7u),
                                Field(&ibv_wc::status, IBV_WC_REM_ACCESS_ERR))));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(remote.data()[i], 0x5A) << "byte " << i;
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(backend_->IbvQueryQp(conn_.passive.qp(), &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
}

// A batch larger than the send queue fails whole at ibv_wr_complete, as mlx5's builders do.
TEST_F(AtomicWriteTest, BatchAboveSendQueue_EnomemAndNothingPosted) {
  ConnectionOptions options;
  options.max_send_wr = 2;
  ConnectExtended(options);
  TestBuffer remote(backend_, conn_.passive.pd, 8, kRemoteAccess);
  const uint64_t value = 5;
  backend_->IbvWrStart(qpx_);
  for (int i = 0; i < 3; ++i) {
    qpx_->wr_id = i;
    qpx_->wr_flags = IBV_SEND_SIGNALED;
    backend_->IbvWrAtomicWrite(qpx_, remote.mr()->rkey, remote.addr(0), &value);
  }
  EXPECT_EQ(backend_->IbvWrComplete(qpx_), ENOMEM);
  EXPECT_TRUE(PollAll(backend_, conn_.active.send_cq).empty());
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(remote.data()), 0u);
  // The batch ended: the next one works.
  EXPECT_EQ(PostAtomicWrite(3, &value, remote.addr(0), remote.mr()->rkey), 0);
  EXPECT_EQ(PollAll(backend_, conn_.active.send_cq).size(), 1u);
}

TEST_F(AtomicWriteTest, InjectedWrCompleteFailure_EndsTheBatch) {
  ConnectExtended();
  TestBuffer remote(backend_, conn_.passive.pd, 8, kRemoteAccess);
  const uint64_t value = 6;
  ScopedFaultPlan plan("ibv_wr_complete:fail=EIO:nth=1");
  ASSERT_TRUE(plan.status().ok()) << plan.status();

  EXPECT_EQ(PostAtomicWrite(1, &value, remote.addr(0), remote.mr()->rkey), EIO);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(remote.data()), 0u);
  EXPECT_EQ(PostAtomicWrite(2, &value, remote.addr(0), remote.mr()->rkey), 0);
  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq), ElementsAre(Field(&ibv_wc::wr_id, 2u)));
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(remote.data()), 6u);
}

// A concurrent reader of the target word sees the old or the new value, never a mix: for the
// native atomic write, and for librpma's emulation (an inline, fenced 8-byte RDMA WRITE, which
// a NIC delivers as one PCIe write).
TEST_F(AtomicWriteTest, ConcurrentReader_NeverSeesATornValue) {
  for (const bool native : {true, false}) {
    SCOPED_TRACE(native ? "native" : "emulated");
    TestConnection conn(backend_);
    ConnectionOptions options;
    options.max_inline_data = 8;
    if (native) options.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
    absl::Status status = conn.Connect(options);
    ASSERT_TRUE(status.ok()) << status;
    ibv_qp_ex* qpx = nullptr;
    if (native) {
      ASSERT_EQ(backend_->IbvQpToQpEx(conn.active.qp(), &qpx), 0);
    }
    TestBuffer remote(backend_, conn.passive.pd, 16, kRemoteAccess);
    TornWordReader reader(reinterpret_cast<uint64_t*>(remote.data() + 8));

    constexpr int kWrites = 20000;
    int failed_posts = 0;
    for (int i = 0; i < kWrites; ++i) {
      const uint64_t value = TornWordReader::Pattern(i);
      int err = 0;
      if (native) {
        backend_->IbvWrStart(qpx);
        qpx->wr_id = i;
        qpx->wr_flags = IBV_SEND_SIGNALED;
        backend_->IbvWrAtomicWrite(qpx, remote.mr()->rkey, remote.addr(8), &value);
        err = backend_->IbvWrComplete(qpx);
      } else {
        ibv_sge sge{reinterpret_cast<uintptr_t>(&value), sizeof(value), 0};
        err = PostWrite(backend_, conn.active.qp(), i, &sge, 1, remote.addr(8), remote.mr()->rkey,
                        IBV_SEND_SIGNALED | IBV_SEND_INLINE | IBV_SEND_FENCE);
      }
      if (err != 0) ++failed_posts;
      PollAll(backend_, conn.active.send_cq);  // retires the slot
    }
    reader.Stop();

    EXPECT_EQ(failed_posts, 0);
    EXPECT_EQ(reader.torn(), 0u) << "a reader saw a mix of the two patterns";
    EXPECT_GT(reader.reads(), 0u);
    EXPECT_EQ(reader.now(), TornWordReader::Pattern(kWrites - 1));
  }
}

// What rpma_flush(3) relies on: a READ completes only after every earlier WRITE of its QP is
// in the responder's memory, even when those writes are held up (here behind a send waiting
// for a receive).
// ---- 64-bit atomics: compare-and-swap and fetch-and-add --------------------------------------

constexpr int kAtomicAccess = kRemoteAccess | IBV_ACCESS_REMOTE_ATOMIC;

// One compare-and-swap or fetch-and-add of the word at remote_addr (its former value into
// `sges`), as ibv_post_send(3) takes it: the operands and key in wr.atomic.
int PostAtomic(Backend* backend, ibv_qp* qp, uint64_t wr_id, ibv_wr_opcode opcode, ibv_sge* sges,
               int num_sge, uint64_t remote_addr, uint32_t rkey, uint64_t compare_add,
               uint64_t swap = 0, unsigned int flags = IBV_SEND_SIGNALED) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  wr.sg_list = sges;
  wr.num_sge = num_sge;
  wr.send_flags = flags;
  wr.wr.atomic.remote_addr = remote_addr;
  wr.wr.atomic.rkey = rkey;
  wr.wr.atomic.compare_add = compare_add;
  wr.wr.atomic.swap = swap;
  ibv_send_wr* bad = nullptr;
  return backend->IbvPostSend(qp, &wr, &bad);
}

uint64_t WordAt(TestBuffer* buffer, size_t offset) {
  uint64_t word = 0;
  std::memcpy(&word, buffer->data() + offset, sizeof(word));
  return word;
}

void SetWordAt(TestBuffer* buffer, size_t offset, uint64_t word) {
  std::memcpy(buffer->data() + offset, &word, sizeof(word));
}

auto AtomicDone(uint64_t wr_id, ibv_wc_opcode opcode) {
  return AllOf(Field(&ibv_wc::wr_id, wr_id), Field(&ibv_wc::status, IBV_WC_SUCCESS),
               Field(&ibv_wc::opcode, opcode), Field(&ibv_wc::byte_len, 8u));
}

TEST_F(QpTest, CompareAndSwap_SwapsOnlyWhenEqual_ReturnsTheFormerValue) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 24, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kAtomicAccess);
  SetWordAt(&remote, 8, 5);
  ibv_sge sges[3] = {local.Sge(0, 8), local.Sge(8, 8), local.Sge(16, 8)};
  const uint32_t rkey = remote.mr()->rkey;

  ASSERT_EQ(PostAtomic(backend_, conn_.active.qp(), 1, IBV_WR_ATOMIC_CMP_AND_SWP, &sges[0], 1,
                       remote.addr(8), rkey, /*compare=*/4, /*swap=*/9), 0);
  ASSERT_EQ(PostAtomic(backend_, conn_.active.qp(), 2, IBV_WR_ATOMIC_CMP_AND_SWP, &sges[1], 1,
                       remote.addr(8), rkey, 5, 9), 0);
  ASSERT_EQ(PostAtomic(backend_, conn_.active.qp(), 3, IBV_WR_ATOMIC_CMP_AND_SWP, &sges[2], 1,
                       remote.addr(8), rkey, 5, 1), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(AtomicDone(1, IBV_WC_COMP_SWAP), AtomicDone(2, IBV_WC_COMP_SWAP),
                          AtomicDone(3, IBV_WC_COMP_SWAP)));
  EXPECT_EQ(WordAt(&local, 0), 5u);   // 4 != 5: not swapped
  EXPECT_EQ(WordAt(&local, 8), 5u);   // swapped to 9
  EXPECT_EQ(WordAt(&local, 16), 9u);  // 5 != 9: not swapped
  EXPECT_EQ(WordAt(&remote, 8), 9u);
  EXPECT_EQ(WordAt(&remote, 0), 0u);
  EXPECT_TRUE(PollAll(backend_, conn_.passive.recv_cq).empty());  // one-sided
}

TEST_F(QpTest, FetchAndAdd_AddsWrapping_ReturnsTheFormerValue) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 8, kAtomicAccess);
  SetWordAt(&remote, 0, 40);
  ibv_sge sges[2] = {local.Sge(0, 8), local.Sge(8, 8)};

  ASSERT_EQ(PostAtomic(backend_, conn_.active.qp(), 1, IBV_WR_ATOMIC_FETCH_AND_ADD, &sges[0], 1,
                       remote.addr(), remote.mr()->rkey, 2), 0);
  ASSERT_EQ(PostAtomic(backend_, conn_.active.qp(), 2, IBV_WR_ATOMIC_FETCH_AND_ADD, &sges[1], 1,
                       remote.addr(), remote.mr()->rkey, ~uint64_t{0}), 0);  // adds -1

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(AtomicDone(1, IBV_WC_FETCH_ADD), AtomicDone(2, IBV_WC_FETCH_ADD)));
  EXPECT_EQ(WordAt(&local, 0), 40u);
  EXPECT_EQ(WordAt(&local, 8), 42u);
  EXPECT_EQ(WordAt(&remote, 0), 41u);
}

// The former value fills the first 8 bytes of the SGEs, across them; the rest is not touched.
TEST_F(QpTest, FetchAndAdd_FormerValueScatteredOverTwoSges) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 32, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 8, kAtomicAccess);
  std::memset(local.data(), 0xEE, local.size());
  SetWordAt(&remote, 0, 0x1122334455667788ULL);
  ibv_sge sges[2] = {local.Sge(0, 3), local.Sge(16, 16)};

  ASSERT_EQ(PostAtomic(backend_, conn_.active.qp(), 1, IBV_WR_ATOMIC_FETCH_AND_ADD, sges, 2,
                       remote.addr(), remote.mr()->rkey, 1), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(AtomicDone(1, IBV_WC_FETCH_ADD)));
  const uint64_t former = 0x1122334455667788ULL;
  uint8_t expected[8];
  std::memcpy(expected, &former, sizeof(former));
  EXPECT_EQ(std::memcmp(local.data(), expected, 3), 0);
  EXPECT_EQ(std::memcmp(local.data() + 16, expected + 3, 5), 0);
  for (size_t i = 21; i < local.size(); ++i) EXPECT_EQ(local.data()[i], 0xEE) << "byte " << i;
  for (size_t i = 3; i < 16; ++i) EXPECT_EQ(local.data()[i], 0xEE) << "byte " << i;
  EXPECT_EQ(WordAt(&remote, 0), former + 1);
}

// The extended post API's builders (ibv_wr_atomic_cmp_swp, ibv_wr_atomic_fetch_add).
TEST_F(QpTest, AtomicBuildersOfTheExtendedPostApi) {
  ConnectionOptions options;
  options.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
  Connect(options);
  ibv_qp_ex* qpx = nullptr;
  ASSERT_EQ(backend_->IbvQpToQpEx(conn_.active.qp(), &qpx), 0);
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 8, kAtomicAccess);
  SetWordAt(&remote, 0, 100);

  ibv_wr_start(qpx);
  qpx->wr_id = 1;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_fetch_add(qpx, remote.mr()->rkey, remote.addr(), 7);
  ibv_wr_set_sge(qpx, local.mr()->lkey, local.addr(0), 8);
  qpx->wr_id = 2;
  ibv_wr_atomic_cmp_swp(qpx, remote.mr()->rkey, remote.addr(), /*compare=*/107, /*swap=*/3);
  ibv_wr_set_sge(qpx, local.mr()->lkey, local.addr(8), 8);
  ASSERT_EQ(ibv_wr_complete(qpx), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(AtomicDone(1, IBV_WC_FETCH_ADD), AtomicDone(2, IBV_WC_COMP_SWAP)));
  EXPECT_EQ(WordAt(&local, 0), 100u);
  EXPECT_EQ(WordAt(&local, 8), 107u);
  EXPECT_EQ(WordAt(&remote, 0), 3u);
}

TEST_F(QpTest, Atomic_MisalignedRemoteAddress_RemInvReqErr_NothingChanges) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kAtomicAccess);
  std::memset(remote.data(), 0x5A, remote.size());
  std::memset(local.data(), 0xEE, local.size());
  ibv_sge sge = local.Sge(0, 8);

  ASSERT_EQ(PostAtomic(backend_, conn_.active.qp(), 1, IBV_WR_ATOMIC_FETCH_AND_ADD, &sge, 1,
                       remote.addr(4), remote.mr()->rkey, 1), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_REM_INV_REQ_ERR)));
  for (size_t i = 0; i < remote.size(); ++i) EXPECT_EQ(remote.data()[i], 0x5A) << "byte " << i;
  for (size_t i = 0; i < local.size(); ++i) EXPECT_EQ(local.data()[i], 0xEE) << "byte " << i;
  EXPECT_EQ(conn_.passive.qp()->state, IBV_QPS_ERR);
}

// rxe's provider checks the alignment when the WR is posted (validate_send_wr: EINVAL), so
// nothing leaves and nothing completes; mlx5's posts it (the test above).
TEST_F(QpTest, Atomic_MisalignedRemoteAddress_OnRxe_EinvalAtThePost) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kAtomicAccess);
  std::memset(remote.data(), 0x5A, remote.size());
  ibv_sge sge = local.Sge(0, 8);
  absl::StatusOr<const DeviceProfile*> rxe = FindDeviceProfile("rxe");
  ASSERT_TRUE(rxe.ok());
  SetActiveProfile(**rxe);

  const int misaligned = PostAtomic(backend_, conn_.active.qp(), 1, IBV_WR_ATOMIC_FETCH_AND_ADD,
                                    &sge, 1, remote.addr(4), remote.mr()->rkey, 1);
  const int aligned = PostAtomic(backend_, conn_.active.qp(), 2, IBV_WR_ATOMIC_FETCH_AND_ADD,
                                 &sge, 1, remote.addr(8), remote.mr()->rkey, 1);

  SetActiveProfile(DeviceProfiles()[0]);
  EXPECT_EQ(misaligned, EINVAL);
  EXPECT_EQ(aligned, 0);
  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(AtomicDone(2, IBV_WC_FETCH_ADD)));
  EXPECT_EQ(conn_.passive.qp()->state, IBV_QPS_RTS);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(remote.data()[i], 0x5A) << "byte " << i;
}

// IBV_ACCESS_REMOTE_ATOMIC is what the target region needs (read and write access are not it).
TEST_F(QpTest, Atomic_RegionWithoutRemoteAtomic_RemAccessErr) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 8, kRemoteAccess);
  SetWordAt(&remote, 0, 5);
  ibv_sge sge = local.Sge(0, 8);

  ASSERT_EQ(PostAtomic(backend_, conn_.active.qp(), 1, IBV_WR_ATOMIC_CMP_AND_SWP, &sge, 1,
                       remote.addr(), remote.mr()->rkey, 5, 6), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_REM_ACCESS_ERR)));
  EXPECT_EQ(WordAt(&remote, 0), 5u);
  EXPECT_EQ(conn_.passive.qp()->state, IBV_QPS_ERR);
}

TEST_F(QpTest, Atomic_ResponderQpWithoutRemoteAtomic_RemAccessErr) {
  Connect();
  ibv_qp_attr attr{};
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(backend_->IbvModifyQp(conn_.passive.qp(), &attr, IBV_QP_ACCESS_FLAGS), 0);
  TestBuffer local(backend_, conn_.active.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 8, kAtomicAccess);
  ibv_sge sge = local.Sge(0, 8);

  ASSERT_EQ(PostAtomic(backend_, conn_.active.qp(), 1, IBV_WR_ATOMIC_FETCH_AND_ADD, &sge, 1,
                       remote.addr(), remote.mr()->rkey, 1), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_REM_ACCESS_ERR)));
  EXPECT_EQ(WordAt(&remote, 0), 0u);
}

// What the post refuses: fewer than 8 bytes for the former value (rxe's provider), inline
// (the SGEs are a destination), and the opcodes on a device without atomics (siw).
TEST_F(QpTest, Atomic_PostRefusals_Einval) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 8, kAtomicAccess);
  ibv_sge short_sge = local.Sge(0, 4);
  ibv_sge sge = local.Sge(0, 8);
  const uint32_t rkey = remote.mr()->rkey;

  EXPECT_EQ(PostAtomic(backend_, conn_.active.qp(), 1, IBV_WR_ATOMIC_FETCH_AND_ADD, &short_sge, 1,
                       remote.addr(), rkey, 1), EINVAL);
  EXPECT_EQ(PostAtomic(backend_, conn_.active.qp(), 2, IBV_WR_ATOMIC_CMP_AND_SWP, &sge, 1,
                       remote.addr(), rkey, 0, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE), EINVAL);
  absl::StatusOr<const DeviceProfile*> siw = FindDeviceProfile("siw");
  ASSERT_TRUE(siw.ok());
  SetActiveProfile(**siw);
  EXPECT_EQ(PostAtomic(backend_, conn_.active.qp(), 3, IBV_WR_ATOMIC_FETCH_AND_ADD, &sge, 1,
                       remote.addr(), rkey, 1), EINVAL);
  SetActiveProfile(DeviceProfiles()[0]);
  EXPECT_TRUE(PollAll(backend_, conn_.active.send_cq).empty());
  EXPECT_EQ(WordAt(&remote, 0), 0u);
}

// Atomic toward each other and toward the target's CPU: two connections, each driven by its own
// thread, add to one word of the passive side's memory (registered in both passive PDs) while a
// third thread, the target's own CPU, adds to it with atomic instructions until both are done.
// No addition is lost, and the former values the requesters get are all different.
TEST_F(QpTest, FetchAndAdd_TwoConnectionsAndTheTargetsCpuOnOneWord_NoAdditionLost) {
  Connect();
  TestConnection other(backend_);
  ASSERT_TRUE(other.Connect(ConnectionOptions()).ok());
  alignas(8) static uint64_t word;
  word = 0;
  ibv_mr* mrs[2] = {nullptr, nullptr};
  ASSERT_EQ(backend_->IbvRegMr(conn_.passive.pd, &word, sizeof(word), kAtomicAccess, &mrs[0]), 0);
  ASSERT_EQ(backend_->IbvRegMr(other.passive.pd, &word, sizeof(word), kAtomicAccess, &mrs[1]), 0);
  constexpr int kPerConnection = 300;
  std::vector<uint64_t> formers[2];
  std::atomic<int> requesters_done{0};
  auto requester = [&](int side) {
    TestConnection* conn = side == 0 ? &conn_ : &other;
    TestBuffer local(backend_, conn->active.pd, 8, IBV_ACCESS_LOCAL_WRITE);
    ibv_sge sge = local.Sge(0, 8);
    for (int i = 0; i < kPerConnection; ++i) {
      if (PostAtomic(backend_, conn->active.qp(), i, IBV_WR_ATOMIC_FETCH_AND_ADD, &sge, 1,
                     reinterpret_cast<uintptr_t>(&word), mrs[side]->rkey, 1) != 0) {
        break;
      }
      std::vector<ibv_wc> wcs;
      while (wcs.empty()) wcs = PollAll(backend_, conn->active.send_cq);
      if (wcs[0].status != IBV_WC_SUCCESS) break;
      formers[side].push_back(WordAt(&local, 0));
    }
    requesters_done.fetch_add(1);
  };
  uint64_t cpu_adds = 0;
  std::thread cpu([&] {
    while (requesters_done.load() < 2) {
      __atomic_fetch_add(&word, 1, __ATOMIC_SEQ_CST);
      ++cpu_adds;
    }
  });
  std::thread a(requester, 0);
  std::thread b(requester, 1);
  a.join();
  b.join();
  cpu.join();

  EXPECT_EQ(__atomic_load_n(&word, __ATOMIC_SEQ_CST), 2 * kPerConnection + cpu_adds);
  ASSERT_EQ(formers[0].size() + formers[1].size(), size_t{2 * kPerConnection});
  std::set<uint64_t> distinct(formers[0].begin(), formers[0].end());
  distinct.insert(formers[1].begin(), formers[1].end());
  EXPECT_EQ(distinct.size(), size_t{2 * kPerConnection});
  EXPECT_EQ(backend_->IbvDeregMr(mrs[0]), 0);
  EXPECT_EQ(backend_->IbvDeregMr(mrs[1]), 0);
}

TEST_F(QpTest, Read_CompletesOnlyAfterEarlierWritesAreApplied) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 64, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer inbox(backend_, conn_.passive.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 64, kRemoteAccess);
  std::memcpy(local.data(), "first...second..", 16);
  ibv_sge msg = local.Sge(0, 8);
  ASSERT_EQ(PostSendMsg(backend_, conn_.active.qp(), 1, &msg, 1), 0);  // waits: no receive
  ibv_sge first = local.Sge(0, 8);
  ibv_sge second = local.Sge(8, 8);
  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 2, &first, 1, remote.addr(0),
                      remote.mr()->rkey, /*flags=*/0),
            0);
  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 3, &second, 1, remote.addr(8),
                      remote.mr()->rkey, /*flags=*/0),
            0);
  ibv_sge into = local.Sge(32, 8);
  ASSERT_EQ(PostRead(backend_, conn_.active.qp(), 4, &into, 1, remote.addr(8), remote.mr()->rkey),
            0);

  EXPECT_TRUE(PollAll(backend_, conn_.active.send_cq).empty());
  EXPECT_EQ(std::memcmp(remote.data(), std::vector<uint8_t>(16, 0).data(), 16), 0)
      << "no write may overtake the waiting send";

  ibv_sge inbox_sge = inbox.Sge(0, 8);
  ASSERT_EQ(PostRecvBuf(backend_, conn_.passive.qp(), 5, &inbox_sge, 1), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::wr_id, 1u),
                          AllOf(Field(&ibv_wc::wr_id, 4u), Field(&ibv_wc::opcode, IBV_WC_RDMA_READ),
                                Field(&ibv_wc::status, IBV_WC_SUCCESS))));
  EXPECT_EQ(std::memcmp(remote.data(), "first...second..", 16), 0);
  EXPECT_EQ(std::memcmp(local.data() + 32, "second..", 8), 0) << "the read saw the second write";
}

TEST_F(QpTest, InlineVerbs_ReachTheSimulator) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  std::memcpy(local.data(), "ops", 3);
  ibv_sge sge = local.Sge(0, 3);
  ibv_send_wr wr{};
  wr.wr_id = 9;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote.addr();
  wr.wr.rdma.rkey = remote.mr()->rkey;
  ibv_send_wr* bad = nullptr;

  ASSERT_EQ(ibv_post_send(conn_.active.qp(), &wr, &bad), 0);
  ibv_wc wc[2];
  ASSERT_EQ(ibv_poll_cq(conn_.active.send_cq, 2, wc), 1);

  EXPECT_EQ(wc[0].wr_id, 9u);
  EXPECT_EQ(std::memcmp(remote.data(), "ops", 3), 0);
  EXPECT_EQ(ibv_poll_cq(conn_.active.send_cq, 2, wc), 0);
}

TEST_F(QpTest, PeerQpDestroyed_RetryExceeded) {
  Connect();
  TestBuffer local(backend_, conn_.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer remote(backend_, conn_.passive.pd, 16, kRemoteAccess);
  const uint32_t rkey = remote.mr()->rkey;
  const uint64_t remote_addr = remote.addr();
  backend_->RdmaDestroyQp(conn_.passive.id);
  ibv_sge sge = local.Sge(0, 8);
  const uint64_t posted_ns = SimClockNs();

  ASSERT_EQ(PostWrite(backend_, conn_.active.qp(), 1, &sge, 1, remote_addr, rkey), 0);

  EXPECT_THAT(PollAll(backend_, conn_.active.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_RETRY_EXC_ERR)));
  EXPECT_GE(SimClockNs() - posted_ns, kRetryTimeoutNs);  // ready once the retries ran out
  EXPECT_EQ(conn_.active.qp()->state, IBV_QPS_ERR);
}

}  // namespace
}  // namespace softrpma::sim::testing
