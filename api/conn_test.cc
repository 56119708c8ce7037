// Tests of connection requests, connections, endpoints and CQs (rpma_conn_req_*(3),
// rpma_conn_*(3), rpma_ep_*(3), rpma_cq_*(3)) on a mock backend: every argument error of the
// man pages, the provider failure mappings, and the verbs / rdma_cm calls each function makes.

#include <arpa/inet.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "api/testing/alloc_failure.h"
#include "api/testing/log_capture.h"
#include "api/testing/mock_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/backend.h"

namespace {

using softrpma::testing::FakeProvider;
using softrpma::testing::MockBackend;
using softrpma::testing::ScopedAllocFailure;
using softrpma::testing::ScopedLogCapture;
using ::testing::_;
using ::testing::AllOf;
using ::testing::DoAll;
using ::testing::Field;
using ::testing::InSequence;
using ::testing::Invoke;
using ::testing::NiceMock;
using ::testing::NotNull;
using ::testing::Pointee;
using ::testing::Return;
using ::testing::SetArgPointee;

class ConnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(rpma_peer_new(fake_.Context(), &peer_), 0);
    ASSERT_EQ(rpma_conn_cfg_new(&cfg_), 0);
  }
  void TearDown() override {
    rpma_conn_cfg_delete(&cfg_);
    ASSERT_EQ(rpma_peer_delete(&peer_), 0);
  }

  // An outgoing request, then its connection (active side).
  rpma_conn* Connect(const rpma_conn_cfg* cfg) {
    rpma_conn_req* req = nullptr;
    EXPECT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", cfg, &req), 0);
    rpma_conn* conn = nullptr;
    EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
    EXPECT_EQ(req, nullptr);
    return conn;
  }

  NiceMock<MockBackend> backend_;
  FakeProvider fake_{&backend_};
  rpma_peer* peer_ = nullptr;
  rpma_conn_cfg* cfg_ = nullptr;
};

// ---- rpma_conn_req_new ----------------------------------------------------------------------

TEST_F(ConnTest, ConnReqNew_NullArguments_ReturnInval) {
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(nullptr, "a", "1", nullptr, &req), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_new(peer_, nullptr, "1", nullptr, &req), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_new(peer_, "a", nullptr, nullptr, &req), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_new(peer_, "a", "1", nullptr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
}

TEST_F(ConnTest, ConnReqNew_OutOfMemory_ReturnsNomem) {
  rpma_conn_req* req = nullptr;
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), RPMA_E_NOMEM);
  EXPECT_EQ(req, nullptr);
}

TEST_F(ConnTest, ConnReqNew_DefaultCfg_MakesResolvedIdCqAndQp) {
  InSequence in_order;
  // The hints librpma gives (info.c): an RC QP over the TCP port space, active side.
  EXPECT_CALL(backend_,
              RdmaGetaddrinfo(_, _,
                              Pointee(AllOf(Field(&rdma_addrinfo::ai_flags, 0),
                                            Field(&rdma_addrinfo::ai_qp_type, IBV_QPT_RC),
                                            Field(&rdma_addrinfo::ai_port_space, RDMA_PS_TCP))),
                              _));
  EXPECT_CALL(backend_, RdmaCreateId(nullptr, _, _, RDMA_PS_TCP));
  EXPECT_CALL(backend_, RdmaResolveAddr(_, _, _, RPMA_DEFAULT_TIMEOUT_MS));
  EXPECT_CALL(backend_, RdmaResolveRoute(_, RPMA_DEFAULT_TIMEOUT_MS));
  EXPECT_CALL(backend_, RdmaFreeaddrinfo(_));
  EXPECT_CALL(backend_, IbvCreateCompChannel(fake_.Context(), _));
  EXPECT_CALL(backend_, IbvCreateCq(fake_.Context(), 10, NotNull(), NotNull(), 0, _));
  EXPECT_CALL(backend_, IbvReqNotifyCq(_, 0));
  EXPECT_CALL(
      backend_,
      RdmaCreateQpEx(
          _, AllOf(Field(&ibv_qp_init_attr_ex::qp_type, IBV_QPT_RC),
                   Field(&ibv_qp_init_attr_ex::sq_sig_all, 0),
                   Field(&ibv_qp_init_attr_ex::srq, nullptr),
                   // As librpma: on the peer's PD, not an extended QP on a device without
                   // native atomic write, 8 bytes inline for the emulated atomic write.
                   Field(&ibv_qp_init_attr_ex::comp_mask, IBV_QP_INIT_ATTR_PD),
                   Field(&ibv_qp_init_attr_ex::pd, NotNull()),
                   Field(&ibv_qp_init_attr_ex::cap,
                         AllOf(Field(&ibv_qp_cap::max_send_wr, 10u),
                               Field(&ibv_qp_cap::max_recv_wr, 10u),
                               Field(&ibv_qp_cap::max_send_sge, 1u),
                               Field(&ibv_qp_cap::max_recv_sge, 1u),
                               Field(&ibv_qp_cap::max_inline_data, 8u))))));
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  ::testing::Mock::VerifyAndClearExpectations(&backend_);
  ASSERT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(req, nullptr);
}

TEST_F(ConnTest, ConnReqNew_CfgSizesAndTimeout_AreUsed) {
  ASSERT_EQ(rpma_conn_cfg_set_timeout(cfg_, 333), 0);
  ASSERT_EQ(rpma_conn_cfg_set_cq_size(cfg_, 20), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg_, 30), 0);
  ASSERT_EQ(rpma_conn_cfg_set_sq_size(cfg_, 40), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rq_size(cfg_, 50), 0);
  EXPECT_CALL(backend_, RdmaResolveAddr(_, _, _, 333));
  EXPECT_CALL(backend_, RdmaResolveRoute(_, 333));
  EXPECT_CALL(backend_, IbvCreateCompChannel(_, _)).Times(2);  // one per CQ
  EXPECT_CALL(backend_, IbvCreateCq(_, 20, _, _, _, _));
  EXPECT_CALL(backend_, IbvCreateCq(_, 30, _, _, _, _));
  EXPECT_CALL(backend_, RdmaCreateQpEx(_, Field(&ibv_qp_init_attr_ex::cap,
                                                AllOf(Field(&ibv_qp_cap::max_send_wr, 40u),
                                                      Field(&ibv_qp_cap::max_recv_wr, 50u)))));
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", cfg_, &req), 0);
  ASSERT_EQ(rpma_conn_req_delete(&req), 0);
}

TEST_F(ConnTest, ConnReqNew_WithRcq_QpReceivesOnRcq) {
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg_, 30), 0);
  rpma_conn* conn = Connect(cfg_);
  ASSERT_NE(conn, nullptr);
  rpma_cq* cq = nullptr;
  rpma_cq* rcq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  ASSERT_NE(cq, nullptr);
  ASSERT_NE(rcq, nullptr);
  EXPECT_NE(cq, rcq);
  ibv_qp* qp = fake_.last_id()->qp;
  ASSERT_NE(qp, nullptr);
  EXPECT_NE(qp->send_cq, qp->recv_cq);
  EXPECT_EQ(qp->recv_cq->cqe, 30);
  ASSERT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(ConnTest, ConnReqNew_NoRcq_GetRcqIsNull) {
  rpma_conn* conn = Connect(nullptr);
  rpma_cq* rcq = reinterpret_cast<rpma_cq*>(0x1);
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  EXPECT_EQ(rcq, nullptr);
  ibv_qp* qp = fake_.last_id()->qp;
  EXPECT_EQ(qp->send_cq, qp->recv_cq);
  ASSERT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(ConnTest, ConnReqNew_SharedChannel_OneChannelForCqAndRcq) {
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg_, 5), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg_, true), 0);
  EXPECT_CALL(backend_, IbvCreateCompChannel(_, _)).Times(1);
  rpma_conn* conn = Connect(cfg_);
  ASSERT_NE(conn, nullptr);
  int fd = -1;
  ASSERT_EQ(rpma_conn_get_compl_fd(conn, &fd), 0);
  EXPECT_EQ(fd, fake_.last_comp_channel()->fd);
  rpma_cq* cq = nullptr;
  rpma_cq* rcq = nullptr;
  ASSERT_EQ(rpma_conn_get_cq(conn, &cq), 0);
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  int cq_fd = -1;
  int rcq_fd = -2;
  ASSERT_EQ(rpma_cq_get_fd(cq, &cq_fd), 0);
  ASSERT_EQ(rpma_cq_get_fd(rcq, &rcq_fd), 0);
  EXPECT_EQ(cq_fd, fd);
  EXPECT_EQ(rcq_fd, fd);
  EXPECT_EQ(rpma_cq_wait(cq), RPMA_E_SHARED_CHANNEL);
  ASSERT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(ConnTest, ConnReqNew_ResolveAddrFails_ReturnsProvider_AndDestroysId) {
  EXPECT_CALL(backend_, RdmaResolveAddr(_, _, _, _)).WillOnce(Return(EHOSTUNREACH));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  EXPECT_CALL(backend_, RdmaFreeaddrinfo(_));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), RPMA_E_PROVIDER);
  EXPECT_EQ(req, nullptr);
}

TEST_F(ConnTest, ConnReqNew_ResolveRouteFails_ReturnsProvider) {
  EXPECT_CALL(backend_, RdmaResolveRoute(_, _)).WillOnce(Return(ETIMEDOUT));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), RPMA_E_PROVIDER);
}

TEST_F(ConnTest, ConnReqNew_CreateIdFails_ReturnsProvider) {
  EXPECT_CALL(backend_, RdmaCreateId(_, _, _, _)).WillOnce(Return(ENOMEM));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), RPMA_E_PROVIDER);
}

TEST_F(ConnTest, ConnReqNew_CreateCqFails_ReturnsProvider_ReleasesInReverse) {
  InSequence in_order;
  EXPECT_CALL(backend_, IbvCreateCompChannel(_, _));
  EXPECT_CALL(backend_, IbvCreateCq(_, _, _, _, _, _)).WillOnce(Return(EINVAL));
  EXPECT_CALL(backend_, IbvDestroyCompChannel(_));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), RPMA_E_PROVIDER);
}

TEST_F(ConnTest, ConnReqNew_RcqFails_ReleasesCq) {
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg_, 5), 0);
  EXPECT_CALL(backend_, IbvCreateCq(_, 10, _, _, _, _));
  EXPECT_CALL(backend_, IbvCreateCq(_, 5, _, _, _, _)).WillOnce(Return(ENOMEM));
  EXPECT_CALL(backend_, IbvDestroyCq(_)).Times(1);
  EXPECT_CALL(backend_, IbvDestroyCompChannel(_)).Times(2);
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", cfg_, &req), RPMA_E_PROVIDER);
}

TEST_F(ConnTest, ConnReqNew_ReqNotifyFails_ReturnsProvider) {
  EXPECT_CALL(backend_, IbvReqNotifyCq(_, _)).WillOnce(Return(EINVAL));
  EXPECT_CALL(backend_, IbvDestroyCq(_));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), RPMA_E_PROVIDER);
}

TEST_F(ConnTest, ConnReqNew_CreateQpFails_ReturnsProvider_ReleasesCq) {
  InSequence in_order;
  EXPECT_CALL(backend_, RdmaCreateQpEx(_, _)).WillOnce(Return(ENOMEM));
  EXPECT_CALL(backend_, IbvDestroyCq(_));
  EXPECT_CALL(backend_, IbvDestroyCompChannel(_));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), RPMA_E_PROVIDER);
}

// ---- rpma_conn_req_connect / delete / get_private_data / recv -------------------------------

TEST_F(ConnTest, ConnReqConnect_NullReqPtr_ReturnsInval) {
  rpma_conn* conn = nullptr;
  EXPECT_EQ(rpma_conn_req_connect(nullptr, nullptr, &conn), RPMA_E_INVAL);
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), RPMA_E_INVAL);
}

TEST_F(ConnTest, ConnReqConnect_NullConnPtr_ReturnsInval_AndConsumesReq) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
}

TEST_F(ConnTest, ConnReqConnect_EmptyPrivateData_ReturnsInval_AndConsumesReq) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  char data[4] = "abc";
  rpma_conn_private_data pdata{data, 0};
  rpma_conn* conn = nullptr;
  EXPECT_CALL(backend_, RdmaConnect(_, _)).Times(0);
  EXPECT_EQ(rpma_conn_req_connect(&req, &pdata, &conn), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(conn, nullptr);
}

TEST_F(ConnTest, ConnReqConnect_Active_MigratesThenConnectsWithPrivateData) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  char data[5] = "hey!";
  rpma_conn_private_data pdata{data, 4};
  {
    InSequence in_order;
    EXPECT_CALL(backend_, RdmaCreateEventChannel(_));
    EXPECT_CALL(backend_, RdmaMigrateId(fake_.last_id(), NotNull()));
    EXPECT_CALL(backend_, RdmaConnect(fake_.last_id(),
                                      AllOf(Field(&rdma_conn_param::private_data, data),
                                            Field(&rdma_conn_param::private_data_len, 4))));
  }
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, &pdata, &conn), 0);
  EXPECT_EQ(req, nullptr);
  ASSERT_NE(conn, nullptr);
  int fd = -1;
  ASSERT_EQ(rpma_conn_get_event_fd(conn, &fd), 0);
  EXPECT_EQ(fd, fake_.last_id()->channel->fd);
  uint32_t qp_num = 0;
  ASSERT_EQ(rpma_conn_get_qp_num(conn, &qp_num), 0);
  EXPECT_EQ(qp_num, fake_.last_id()->qp->qp_num);
  ASSERT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(ConnTest, ConnReqConnect_ConnectFails_ReturnsProvider_AndReleasesAll) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  EXPECT_CALL(backend_, RdmaConnect(_, _)).WillOnce(Return(EINVAL));
  EXPECT_CALL(backend_, RdmaDestroyQp(_));
  EXPECT_CALL(backend_, IbvDestroyCq(_));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  EXPECT_CALL(backend_, RdmaDestroyEventChannel(_));
  rpma_conn* conn = nullptr;
  EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), RPMA_E_PROVIDER);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(conn, nullptr);
}

TEST_F(ConnTest, ConnReqConnect_OutOfMemory_ReturnsNomem_AndConsumesReq) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  rpma_conn* conn = nullptr;
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), RPMA_E_NOMEM);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(conn, nullptr);
}

TEST_F(ConnTest, ConnReqDelete_NullPtr_ReturnsInval) {
  EXPECT_EQ(rpma_conn_req_delete(nullptr), RPMA_E_INVAL);
}

TEST_F(ConnTest, ConnReqDelete_Active_ReleasesInOrder) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  InSequence in_order;
  EXPECT_CALL(backend_, RdmaDestroyQp(_));
  EXPECT_CALL(backend_, IbvDestroyCq(_));
  EXPECT_CALL(backend_, IbvDestroyCompChannel(_));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  EXPECT_CALL(backend_, RdmaReject(_, _, _)).Times(0);
  ASSERT_EQ(rpma_conn_req_delete(&req), 0);
}

TEST_F(ConnTest, ConnReqDelete_DestroyCqFails_ReturnsProvider_StillReleasesId) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  EXPECT_CALL(backend_, IbvDestroyCq(_)).WillOnce(Return(EBUSY));
  EXPECT_CALL(backend_, RdmaDestroyId(_)).WillOnce(Return(EBUSY));
  EXPECT_EQ(rpma_conn_req_delete(&req), RPMA_E_PROVIDER);
  EXPECT_EQ(req, nullptr);
}

TEST_F(ConnTest, ConnReqGetPrivateData_NullArguments_ReturnInval) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  rpma_conn_private_data pdata;
  EXPECT_EQ(rpma_conn_req_get_private_data(nullptr, &pdata), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_get_private_data(req, nullptr), RPMA_E_INVAL);
  ASSERT_EQ(rpma_conn_req_get_private_data(req, &pdata), 0);  // outgoing: none
  EXPECT_EQ(pdata.ptr, nullptr);
  EXPECT_EQ(pdata.len, 0);
  rpma_conn_req_delete(&req);
}

TEST_F(ConnTest, ConnReqRecv_NullArguments_ReturnInval) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  char buffer[8];
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer_, buffer, 8, RPMA_MR_USAGE_RECV, &mr), 0);
  int context = 0;
  EXPECT_EQ(rpma_conn_req_recv(nullptr, mr, 0, 8, &context), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_req_recv(req, nullptr, 0, 8, &context), RPMA_E_INVAL);
  EXPECT_CALL(backend_, IbvPostRecv(fake_.last_id()->qp,
                                    Pointee(AllOf(Field(&ibv_recv_wr::wr_id,
                                                        reinterpret_cast<uint64_t>(&context)),
                                                  Field(&ibv_recv_wr::num_sge, 1))),
                                    _))
      .WillOnce(Return(0))
      .WillOnce(Return(ENOMEM));
  EXPECT_EQ(rpma_conn_req_recv(req, mr, 0, 8, &context), 0);
  EXPECT_EQ(rpma_conn_req_recv(req, mr, 0, 8, &context), RPMA_E_PROVIDER);
  rpma_mr_dereg(&mr);
  rpma_conn_req_delete(&req);
}

// The man page lists a NULL op_context as RPMA_E_INVAL; librpma accepts it and posts the
// receive with wr_id 0, and servers that post their first receive with context 0 rely on it.
TEST_F(ConnTest, ConnReqRecv_NullOpContext_PostsWithWrIdZero) {
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  char buffer[8];
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer_, buffer, 8, RPMA_MR_USAGE_RECV, &mr), 0);
  EXPECT_CALL(backend_, IbvPostRecv(fake_.last_id()->qp,
                                    Pointee(AllOf(Field(&ibv_recv_wr::wr_id, 0u),
                                                  Field(&ibv_recv_wr::num_sge, 1))),
                                    _))
      .WillOnce(Return(0));
  ScopedLogCapture logs;
  EXPECT_EQ(rpma_conn_req_recv(req, mr, 0, 8, nullptr), 0);
  EXPECT_FALSE(logs.AnyAtOrAbove(RPMA_LOG_LEVEL_ERROR)) << logs.Dump();
  rpma_mr_dereg(&mr);
  rpma_conn_req_delete(&req);
}

// ---- Endpoints and incoming requests --------------------------------------------------------

class EpTest : public ConnTest {
 protected:
  void SetUp() override {
    ConnTest::SetUp();
    ASSERT_EQ(rpma_ep_listen(peer_, "10.0.0.1", "7204", &ep_), 0);
    listen_id_ = fake_.last_id();
  }
  void TearDown() override {
    ::testing::Mock::VerifyAndClearExpectations(&backend_);  // before the listening id goes
    ASSERT_EQ(rpma_ep_shutdown(&ep_), 0);
    ConnTest::TearDown();
  }
  // Makes the next RdmaGetCmEvent on the endpoint return `event`.
  void NextEvent(rdma_cm_event* event) {
    EXPECT_CALL(backend_, RdmaGetCmEvent(listen_id_->channel, _))
        .WillOnce(DoAll(SetArgPointee<1>(event), Return(0)));
  }
  rdma_cm_id* IncomingId() {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(backend_.RdmaCreateId(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
    id->verbs = fake_.Context();
    return id;
  }

  rpma_ep* ep_ = nullptr;
  rdma_cm_id* listen_id_ = nullptr;
};

TEST_F(ConnTest, EpListen_NullArguments_ReturnInval) {
  rpma_ep* ep = nullptr;
  EXPECT_EQ(rpma_ep_listen(nullptr, "a", "1", &ep), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_listen(peer_, nullptr, "1", &ep), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_listen(peer_, "a", nullptr, &ep), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_listen(peer_, "a", "1", nullptr), RPMA_E_INVAL);
  EXPECT_EQ(ep, nullptr);
}

TEST_F(ConnTest, EpListen_MakesChannelIdBindsAndListens) {
  InSequence in_order;
  EXPECT_CALL(backend_, RdmaCreateEventChannel(_));
  EXPECT_CALL(backend_, RdmaCreateId(NotNull(), _, _, RDMA_PS_TCP));
  EXPECT_CALL(backend_,
              RdmaGetaddrinfo(_, _,
                              Pointee(AllOf(Field(&rdma_addrinfo::ai_flags, RAI_PASSIVE),
                                            Field(&rdma_addrinfo::ai_qp_type, IBV_QPT_RC),
                                            Field(&rdma_addrinfo::ai_port_space, RDMA_PS_TCP))),
                              _));
  EXPECT_CALL(backend_, RdmaBindAddr(_, _));
  EXPECT_CALL(backend_, RdmaFreeaddrinfo(_));
  EXPECT_CALL(backend_, RdmaListen(_, _));
  rpma_ep* ep = nullptr;
  ASSERT_EQ(rpma_ep_listen(peer_, "10.0.0.1", "7204", &ep), 0);
  int fd = -1;
  ASSERT_EQ(rpma_ep_get_fd(ep, &fd), 0);
  EXPECT_EQ(fd, fake_.last_id()->channel->fd);
  ASSERT_EQ(rpma_ep_shutdown(&ep), 0);
  EXPECT_EQ(ep, nullptr);
}

TEST_F(ConnTest, EpListen_ListenFails_ReturnsProvider_ReleasesAll) {
  EXPECT_CALL(backend_, RdmaListen(_, _)).WillOnce(Return(EADDRINUSE));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  EXPECT_CALL(backend_, RdmaDestroyEventChannel(_));
  rpma_ep* ep = nullptr;
  EXPECT_EQ(rpma_ep_listen(peer_, "10.0.0.1", "7204", &ep), RPMA_E_PROVIDER);
  EXPECT_EQ(ep, nullptr);
}

TEST_F(ConnTest, EpListen_EventChannelFails_ReturnsProvider) {
  EXPECT_CALL(backend_, RdmaCreateEventChannel(_)).WillOnce(Return(EMFILE));
  rpma_ep* ep = nullptr;
  EXPECT_EQ(rpma_ep_listen(peer_, "10.0.0.1", "7204", &ep), RPMA_E_PROVIDER);
}

TEST_F(ConnTest, EpListen_GetaddrinfoFails_ReturnsProvider) {
  EXPECT_CALL(backend_, RdmaGetaddrinfo(_, _, _, _)).WillOnce(Return(EINVAL));
  rpma_ep* ep = nullptr;
  EXPECT_EQ(rpma_ep_listen(peer_, "10.0.0.1", "7204", &ep), RPMA_E_PROVIDER);
}

TEST_F(ConnTest, EpListen_OutOfMemory_ReturnsNomem) {
  rpma_ep* ep = nullptr;
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_ep_listen(peer_, "10.0.0.1", "7204", &ep), RPMA_E_NOMEM);
}

TEST_F(ConnTest, EpShutdown_NullPtr_ReturnsInval) {
  EXPECT_EQ(rpma_ep_shutdown(nullptr), RPMA_E_INVAL);
}

// As librpma (ep.c): the event channel and the endpoint are released and the pointer cleared
// even when the listening id is not.
TEST_F(ConnTest, EpShutdown_DestroyIdFails_ReturnsProvider_ReleasesEp) {
  rpma_ep* ep = nullptr;
  ASSERT_EQ(rpma_ep_listen(peer_, "10.0.0.1", "7204", &ep), 0);
  {
    InSequence in_order;
    EXPECT_CALL(backend_, RdmaDestroyId(_)).WillOnce(Return(EBUSY));
    EXPECT_CALL(backend_, RdmaDestroyEventChannel(_));
  }
  EXPECT_EQ(rpma_ep_shutdown(&ep), RPMA_E_PROVIDER);
  EXPECT_EQ(ep, nullptr);
}

TEST_F(EpTest, EpGetFd_NullArguments_ReturnInval) {
  int fd;
  EXPECT_EQ(rpma_ep_get_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_get_fd(ep_, nullptr), RPMA_E_INVAL);
}

TEST_F(EpTest, EpNextConnReq_NullArguments_ReturnInval) {
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_ep_next_conn_req(nullptr, nullptr, &req), RPMA_E_INVAL);
  EXPECT_EQ(rpma_ep_next_conn_req(ep_, nullptr, nullptr), RPMA_E_INVAL);
}

TEST_F(EpTest, EpNextConnReq_NoEvent_ReturnsNoEvent) {
  EXPECT_CALL(backend_, RdmaGetCmEvent(_, _)).WillOnce(Return(EAGAIN));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), RPMA_E_NO_EVENT);
  EXPECT_EQ(req, nullptr);
}

TEST_F(EpTest, EpNextConnReq_GetEventFails_ReturnsProvider) {
  EXPECT_CALL(backend_, RdmaGetCmEvent(_, _)).WillOnce(Return(EBADF));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), RPMA_E_PROVIDER);
}

TEST_F(EpTest, EpNextConnReq_OtherEvent_AcksAndReturnsInval) {
  rdma_cm_event* event = fake_.Event(RDMA_CM_EVENT_ESTABLISHED, listen_id_);
  NextEvent(event);
  EXPECT_CALL(backend_, RdmaAckCmEvent(event));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
}

// An unexpected event whose acknowledgement fails is not lost either: rpma_ep_shutdown
// acknowledges it before destroying the listening id (which would wait for it).
TEST_F(EpTest, EpNextConnReq_OtherEventAckFails_ShutdownAcksItFirst) {
  rdma_cm_event* event = fake_.Event(RDMA_CM_EVENT_ESTABLISHED, listen_id_);
  NextEvent(event);
  EXPECT_CALL(backend_, RdmaAckCmEvent(event)).WillOnce(Return(EIO));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), RPMA_E_INVAL);
  ::testing::Mock::VerifyAndClearExpectations(&backend_);
  {
    InSequence in_order;
    EXPECT_CALL(backend_, RdmaAckCmEvent(event));
    EXPECT_CALL(backend_, RdmaDestroyId(listen_id_));  // and no other id
  }
  EXPECT_EQ(rpma_ep_shutdown(&ep_), 0);
}

TEST_F(EpTest, EpNextConnReq_OutOfMemory_ReturnsNomem_AndRejects) {
  rdma_cm_id* id = IncomingId();
  rdma_cm_event* event = fake_.Event(RDMA_CM_EVENT_CONNECT_REQUEST, id);
  NextEvent(event);
  EXPECT_CALL(backend_, RdmaReject(id, _, _));
  EXPECT_CALL(backend_, RdmaAckCmEvent(event));
  EXPECT_CALL(backend_, RdmaDestroyId(id));
  rpma_conn_req* req = nullptr;
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), RPMA_E_NOMEM);
  EXPECT_EQ(req, nullptr);
}

// As librpma (ep.c): the CONNECT_REQUEST event is acknowledged by rpma_ep_next_conn_req once the
// request is made, not at connect or delete.
TEST_F(EpTest, Incoming_AckedWhenTaken_KeepsPrivateData_AcceptsMigrates) {
  rdma_cm_id* id = IncomingId();
  rdma_cm_event* event = fake_.Event(RDMA_CM_EVENT_CONNECT_REQUEST, id, {'h', 'i', '!'});
  NextEvent(event);
  rpma_conn_req* req = nullptr;
  {
    InSequence in_order;
    EXPECT_CALL(backend_, RdmaCreateQpEx(id, _));
    EXPECT_CALL(backend_, RdmaAckCmEvent(event));
  }
  ASSERT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), 0);
  ::testing::Mock::VerifyAndClearExpectations(&backend_);
  ASSERT_NE(req, nullptr);
  rpma_conn_private_data pdata{};
  ASSERT_EQ(rpma_conn_req_get_private_data(req, &pdata), 0);
  ASSERT_EQ(pdata.len, 3);
  EXPECT_EQ(std::memcmp(pdata.ptr, "hi!", 3), 0);
  EXPECT_NE(pdata.ptr, event->param.conn.private_data);  // a copy

  {
    InSequence in_order;
    EXPECT_CALL(backend_, RdmaAccept(id, _));
    EXPECT_CALL(backend_, RdmaCreateEventChannel(_));
    EXPECT_CALL(backend_, RdmaMigrateId(id, _));
  }
  EXPECT_CALL(backend_, RdmaAckCmEvent(_)).Times(0);
  rpma_conn* conn = nullptr;
  ASSERT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), 0);
  EXPECT_EQ(req, nullptr);
  ASSERT_EQ(rpma_conn_get_private_data(conn, &pdata), 0);  // kept by the connection
  ASSERT_EQ(pdata.len, 3);
  EXPECT_EQ(std::memcmp(pdata.ptr, "hi!", 3), 0);
  ASSERT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(EpTest, Incoming_Delete_RejectsAndDestroysId) {
  rdma_cm_id* id = IncomingId();
  rdma_cm_event* event = fake_.Event(RDMA_CM_EVENT_CONNECT_REQUEST, id);
  NextEvent(event);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), 0);
  {
    InSequence in_order;
    EXPECT_CALL(backend_, RdmaReject(id, _, _));
    EXPECT_CALL(backend_, RdmaDestroyId(id));
  }
  EXPECT_CALL(backend_, RdmaAckCmEvent(_)).Times(0);  // acknowledged when taken
  ASSERT_EQ(rpma_conn_req_delete(&req), 0);
  EXPECT_EQ(req, nullptr);
}

// The listening id has no unacknowledged event while a request is pending, so the endpoint
// shuts down (on a real NIC rdma_destroy_id would wait for the event forever).
TEST_F(EpTest, EpShutdown_RequestPending_DestroysListeningIdAfterNoAck) {
  rdma_cm_id* id = IncomingId();
  rdma_cm_event* event = fake_.Event(RDMA_CM_EVENT_CONNECT_REQUEST, id);
  NextEvent(event);
  rpma_conn_req* req = nullptr;
  EXPECT_CALL(backend_, RdmaAckCmEvent(event));
  ASSERT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), 0);
  ::testing::Mock::VerifyAndClearExpectations(&backend_);
  EXPECT_CALL(backend_, RdmaAckCmEvent(_)).Times(0);
  EXPECT_CALL(backend_, RdmaDestroyId(listen_id_));
  ASSERT_EQ(rpma_ep_shutdown(&ep_), 0);
  EXPECT_EQ(ep_, nullptr);
  ::testing::Mock::VerifyAndClearExpectations(&backend_);
  ASSERT_EQ(rpma_conn_req_delete(&req), 0);
}

TEST_F(EpTest, Incoming_DeleteRejectFails_ReturnsProvider) {
  rdma_cm_id* id = IncomingId();
  NextEvent(fake_.Event(RDMA_CM_EVENT_CONNECT_REQUEST, id));
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), 0);
  EXPECT_CALL(backend_, RdmaReject(_, _, _)).WillOnce(Return(EINVAL));
  EXPECT_CALL(backend_, RdmaDestroyId(id));
  EXPECT_EQ(rpma_conn_req_delete(&req), RPMA_E_PROVIDER);
  EXPECT_EQ(req, nullptr);
}

TEST_F(EpTest, Incoming_AcceptFails_ReturnsProvider_AndConsumesReq) {
  rdma_cm_id* id = IncomingId();
  NextEvent(fake_.Event(RDMA_CM_EVENT_CONNECT_REQUEST, id));
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), 0);
  EXPECT_CALL(backend_, RdmaAccept(_, _)).WillOnce(Return(EINVAL));
  EXPECT_CALL(backend_, RdmaReject(id, _, _));
  EXPECT_CALL(backend_, RdmaDestroyId(id));
  rpma_conn* conn = nullptr;
  EXPECT_EQ(rpma_conn_req_connect(&req, nullptr, &conn), RPMA_E_PROVIDER);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(conn, nullptr);
}

// As librpma: a failed acknowledgement deletes (rejects) the request and fails the call. The
// event is not lost: rpma_ep_shutdown acknowledges it, then destroys its id, then the listener.
TEST_F(EpTest, EpNextConnReq_AckFails_ReturnsProvider_ShutdownAcksLater) {
  rdma_cm_id* id = IncomingId();
  rdma_cm_event* event = fake_.Event(RDMA_CM_EVENT_CONNECT_REQUEST, id);
  NextEvent(event);
  rpma_conn_req* req = nullptr;
  {
    InSequence in_order;
    EXPECT_CALL(backend_, RdmaAckCmEvent(event)).WillOnce(Return(EIO));
    EXPECT_CALL(backend_, RdmaReject(id, _, _));
  }
  EXPECT_CALL(backend_, RdmaDestroyId(id)).Times(0);  // not before its event is acknowledged
  EXPECT_EQ(rpma_ep_next_conn_req(ep_, nullptr, &req), RPMA_E_PROVIDER);
  EXPECT_EQ(req, nullptr);
  ::testing::Mock::VerifyAndClearExpectations(&backend_);
  {
    InSequence in_order;
    EXPECT_CALL(backend_, RdmaAckCmEvent(event));
    EXPECT_CALL(backend_, RdmaDestroyId(id));
    EXPECT_CALL(backend_, RdmaDestroyId(listen_id_));
  }
  EXPECT_EQ(rpma_ep_shutdown(&ep_), 0);
  EXPECT_EQ(ep_, nullptr);
}

// ---- rpma_conn_next_event -------------------------------------------------------------------

TEST_F(ConnTest, ConnNextEvent_NullArguments_ReturnInval) {
  rpma_conn* conn = Connect(nullptr);
  rpma_conn_event event;
  EXPECT_EQ(rpma_conn_next_event(nullptr, &event), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_next_event(conn, nullptr), RPMA_E_INVAL);
  rpma_conn_delete(&conn);
}

struct EventMapping {
  rdma_cm_event_type cm;
  rpma_conn_event rpma;
};

TEST_F(ConnTest, ConnNextEvent_MapsEveryExpectedEvent_AndAcks) {
  rpma_conn* conn = Connect(nullptr);
  rdma_cm_id* id = fake_.last_id();
  const EventMapping mappings[] = {
      {RDMA_CM_EVENT_ESTABLISHED, RPMA_CONN_ESTABLISHED},
      {RDMA_CM_EVENT_DISCONNECTED, RPMA_CONN_CLOSED},
      {RDMA_CM_EVENT_TIMEWAIT_EXIT, RPMA_CONN_CLOSED},
      {RDMA_CM_EVENT_CONNECT_ERROR, RPMA_CONN_LOST},
      {RDMA_CM_EVENT_DEVICE_REMOVAL, RPMA_CONN_LOST},
      {RDMA_CM_EVENT_REJECTED, RPMA_CONN_REJECTED},
      {RDMA_CM_EVENT_UNREACHABLE, RPMA_CONN_UNREACHABLE},
  };
  for (const EventMapping& m : mappings) {
    rdma_cm_event* cm_event = fake_.Event(m.cm, id);
    EXPECT_CALL(backend_, RdmaGetCmEvent(id->channel, _))
        .WillOnce(DoAll(SetArgPointee<1>(cm_event), Return(0)));
    EXPECT_CALL(backend_, RdmaAckCmEvent(cm_event));
    rpma_conn_event event = RPMA_CONN_UNDEFINED;
    ASSERT_EQ(rpma_conn_next_event(conn, &event), 0) << m.cm;
    EXPECT_EQ(event, m.rpma) << m.cm;
    ::testing::Mock::VerifyAndClearExpectations(&backend_);
  }
  rpma_conn_delete(&conn);
}

TEST_F(ConnTest, ConnNextEvent_UnexpectedEvent_AcksAndReturnsUnknown) {
  rpma_conn* conn = Connect(nullptr);
  rdma_cm_event* cm_event = fake_.Event(RDMA_CM_EVENT_ADDR_RESOLVED, fake_.last_id());
  EXPECT_CALL(backend_, RdmaGetCmEvent(_, _)).WillOnce(DoAll(SetArgPointee<1>(cm_event),
                                                             Return(0)));
  EXPECT_CALL(backend_, RdmaAckCmEvent(cm_event));
  rpma_conn_event event = RPMA_CONN_CLOSED;
  ScopedLogCapture logs;
  EXPECT_EQ(rpma_conn_next_event(conn, &event), RPMA_E_UNKNOWN);
  // A WARNING, as in librpma, not an error.
  EXPECT_TRUE(logs.Contains(RPMA_LOG_LEVEL_WARNING, "unexpected rdma_cm event")) << logs.Dump();
  EXPECT_FALSE(logs.AnyAtOrAbove(RPMA_LOG_LEVEL_ERROR)) << logs.Dump();
  rpma_conn_delete(&conn);
}

TEST_F(ConnTest, ConnNextEvent_GetFails_ReturnsProvider) {
  rpma_conn* conn = Connect(nullptr);
  EXPECT_CALL(backend_, RdmaGetCmEvent(_, _)).WillOnce(Return(EBADF));
  rpma_conn_event event;
  EXPECT_EQ(rpma_conn_next_event(conn, &event), RPMA_E_PROVIDER);
  rpma_conn_delete(&conn);
}

TEST_F(ConnTest, ConnNextEvent_NonBlockingEmpty_ReturnsNoEvent) {
  rpma_conn* conn = Connect(nullptr);
  EXPECT_CALL(backend_, RdmaGetCmEvent(_, _)).WillOnce(Return(EAGAIN));
  rpma_conn_event event;
  EXPECT_EQ(rpma_conn_next_event(conn, &event), RPMA_E_NO_EVENT);
  rpma_conn_delete(&conn);
}

TEST_F(ConnTest, ConnNextEvent_AckFails_ReturnsProvider) {
  rpma_conn* conn = Connect(nullptr);
  rdma_cm_event* cm_event = fake_.Event(RDMA_CM_EVENT_DISCONNECTED, fake_.last_id());
  EXPECT_CALL(backend_, RdmaGetCmEvent(_, _)).WillOnce(DoAll(SetArgPointee<1>(cm_event),
                                                             Return(0)));
  EXPECT_CALL(backend_, RdmaAckCmEvent(cm_event)).WillOnce(Return(EINVAL));
  rpma_conn_event event;
  EXPECT_EQ(rpma_conn_next_event(conn, &event), RPMA_E_PROVIDER);
  rpma_conn_delete(&conn);
}

TEST_F(ConnTest, ConnNextEvent_Established_CopiesPrivateData) {
  rpma_conn* conn = Connect(nullptr);
  rpma_conn_private_data pdata{reinterpret_cast<void*>(0x1), 9};
  ASSERT_EQ(rpma_conn_get_private_data(conn, &pdata), 0);
  EXPECT_EQ(pdata.ptr, nullptr);
  EXPECT_EQ(pdata.len, 0);
  rdma_cm_event* cm_event = fake_.Event(RDMA_CM_EVENT_ESTABLISHED, fake_.last_id(), {1, 2, 3, 4});
  EXPECT_CALL(backend_, RdmaGetCmEvent(_, _)).WillOnce(DoAll(SetArgPointee<1>(cm_event),
                                                             Return(0)));
  rpma_conn_event event;
  ASSERT_EQ(rpma_conn_next_event(conn, &event), 0);
  ASSERT_EQ(rpma_conn_get_private_data(conn, &pdata), 0);
  ASSERT_EQ(pdata.len, 4);
  EXPECT_NE(pdata.ptr, cm_event->param.conn.private_data);
  const uint8_t expected[] = {1, 2, 3, 4};
  EXPECT_EQ(std::memcmp(pdata.ptr, expected, 4), 0);
  rpma_conn_delete(&conn);
}

TEST_F(ConnTest, ConnNextEvent_EstablishedOutOfMemory_ReturnsNomem_AndAcks) {
  rpma_conn* conn = Connect(nullptr);
  rdma_cm_event* cm_event = fake_.Event(RDMA_CM_EVENT_ESTABLISHED, fake_.last_id(), {1});
  EXPECT_CALL(backend_, RdmaGetCmEvent(_, _)).WillOnce(DoAll(SetArgPointee<1>(cm_event),
                                                             Return(0)));
  EXPECT_CALL(backend_, RdmaAckCmEvent(cm_event));
  rpma_conn_event event;
  {
    ScopedAllocFailure fail;
    EXPECT_EQ(rpma_conn_next_event(conn, &event), RPMA_E_NOMEM);
  }
  rpma_conn_delete(&conn);
}

// ---- Other connection functions -------------------------------------------------------------

TEST_F(ConnTest, ConnGetters_NullArguments_ReturnInval) {
  rpma_conn* conn = Connect(nullptr);
  int fd;
  uint32_t qp_num;
  rpma_cq* cq;
  rpma_conn_private_data pdata;
  EXPECT_EQ(rpma_conn_get_event_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_event_fd(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_qp_num(nullptr, &qp_num), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_qp_num(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_cq(nullptr, &cq), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_cq(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_rcq(nullptr, &cq), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_rcq(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_private_data(nullptr, &pdata), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_private_data(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_compl_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_get_compl_fd(conn, nullptr), RPMA_E_INVAL);
  rpma_conn_delete(&conn);
}

TEST_F(ConnTest, ConnGetComplFd_NotShared_ReturnsNotSharedChnl) {
  rpma_conn* conn = Connect(nullptr);
  int fd = -7;
  EXPECT_EQ(rpma_conn_get_compl_fd(conn, &fd), RPMA_E_NOT_SHARED_CHNL);
  EXPECT_EQ(fd, -7);
  rpma_conn_delete(&conn);
}

TEST_F(ConnTest, ConnApplyRemotePeerCfg_NullArguments_ReturnInval) {
  rpma_conn* conn = Connect(nullptr);
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_EQ(rpma_peer_cfg_new(&pcfg), 0);
  EXPECT_EQ(rpma_conn_apply_remote_peer_cfg(nullptr, pcfg), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_apply_remote_peer_cfg(conn, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_apply_remote_peer_cfg(conn, pcfg), 0);
  rpma_peer_cfg_delete(&pcfg);
  rpma_conn_delete(&conn);
}

TEST_F(ConnTest, ConnDisconnect_NullConn_ReturnsInval) {
  EXPECT_EQ(rpma_conn_disconnect(nullptr), RPMA_E_INVAL);
}

TEST_F(ConnTest, ConnDisconnect_Fails_ReturnsProvider) {
  rpma_conn* conn = Connect(nullptr);
  EXPECT_CALL(backend_, RdmaDisconnect(fake_.last_id()))
      .WillOnce(Return(EINVAL))
      .WillOnce(Return(0));
  EXPECT_EQ(rpma_conn_disconnect(conn), RPMA_E_PROVIDER);
  EXPECT_EQ(rpma_conn_disconnect(conn), 0);
  rpma_conn_delete(&conn);
}

TEST_F(ConnTest, ConnDelete_NullPtr_ReturnsInval) {
  EXPECT_EQ(rpma_conn_delete(nullptr), RPMA_E_INVAL);
  rpma_conn* conn = nullptr;
  EXPECT_EQ(rpma_conn_delete(&conn), 0);
}

TEST_F(ConnTest, ConnDelete_ReleasesInVerbsOrder) {
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg_, 4), 0);
  rpma_conn* conn = Connect(cfg_);
  InSequence in_order;
  EXPECT_CALL(backend_, RdmaDestroyQp(_));
  EXPECT_CALL(backend_, IbvDestroyCq(_));           // RCQ
  EXPECT_CALL(backend_, IbvDestroyCompChannel(_));  // its channel
  EXPECT_CALL(backend_, IbvDestroyCq(_));           // CQ
  EXPECT_CALL(backend_, IbvDestroyCompChannel(_));
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  EXPECT_CALL(backend_, RdmaDestroyEventChannel(_));
  ASSERT_EQ(rpma_conn_delete(&conn), 0);
  EXPECT_EQ(conn, nullptr);
}

TEST_F(ConnTest, ConnDelete_DestroyFails_ReturnsFirstProvider_FreesAll) {
  rpma_conn* conn = Connect(nullptr);
  EXPECT_CALL(backend_, IbvDestroyCq(_)).WillOnce(Return(EBUSY));
  EXPECT_CALL(backend_, RdmaDestroyId(_)).WillOnce(Return(EBUSY));
  EXPECT_CALL(backend_, RdmaDestroyEventChannel(_));
  EXPECT_EQ(rpma_conn_delete(&conn), RPMA_E_PROVIDER);
  EXPECT_EQ(conn, nullptr);
}

// ---- rpma_conn_wait -------------------------------------------------------------------------

class ConnWaitTest : public ConnTest {
 protected:
  void SetUp() override {
    ConnTest::SetUp();
    ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg_, 4), 0);
    ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg_, true), 0);
    conn_ = Connect(cfg_);
    ASSERT_EQ(rpma_conn_get_cq(conn_, &cq_), 0);
    ASSERT_EQ(rpma_conn_get_rcq(conn_, &rcq_), 0);
    ibv_qp* qp = fake_.last_id()->qp;
    ibv_cq_ = qp->send_cq;
    ibv_rcq_ = qp->recv_cq;
  }
  void TearDown() override {
    rpma_conn_delete(&conn_);
    ConnTest::TearDown();
  }
  void NextCqEvent(ibv_cq* cq) {
    EXPECT_CALL(backend_, IbvGetCqEvent(_, _, _))
        .WillOnce(DoAll(SetArgPointee<1>(cq), SetArgPointee<2>(cq->cq_context), Return(0)));
  }

  rpma_conn* conn_ = nullptr;
  rpma_cq* cq_ = nullptr;
  rpma_cq* rcq_ = nullptr;
  ibv_cq* ibv_cq_ = nullptr;
  ibv_cq* ibv_rcq_ = nullptr;
};

TEST_F(ConnWaitTest, ConnWait_NullArguments_ReturnInval) {
  rpma_cq* cq;
  EXPECT_EQ(rpma_conn_wait(nullptr, 0, &cq, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_conn_wait(conn_, 0, nullptr, nullptr), RPMA_E_INVAL);
}

// As upstream (conn.c), flags are not looked at: the man page names no flags error.
TEST_F(ConnWaitTest, ConnWait_OtherFlags_WaitAsZero) {
  ScopedLogCapture logs;
  EXPECT_CALL(backend_, IbvGetCqEvent(_, _, _)).WillOnce(Return(EAGAIN));
  rpma_cq* cq;
  EXPECT_EQ(rpma_conn_wait(conn_, 2, &cq, nullptr), RPMA_E_NO_COMPLETION);
  EXPECT_FALSE(logs.AnyAtOrAbove(RPMA_LOG_LEVEL_ERROR)) << logs.Dump();
}

TEST_F(ConnWaitTest, ConnWait_NotShared_ReturnsNotSharedChnl) {
  rpma_conn* conn = Connect(nullptr);
  rpma_cq* cq;
  EXPECT_EQ(rpma_conn_wait(conn, 0, &cq, nullptr), RPMA_E_NOT_SHARED_CHNL);
  rpma_conn_delete(&conn);
}

TEST_F(ConnWaitTest, ConnWait_CqEvent_AcksRearmsAndReturnsCq) {
  for (int flags : {0, RPMA_W_WAIT_FOR_COMPLETION}) {
    NextCqEvent(ibv_cq_);
    InSequence in_order;
    EXPECT_CALL(backend_, IbvAckCqEvents(ibv_cq_, 1u));
    EXPECT_CALL(backend_, IbvReqNotifyCq(ibv_cq_, 0));
    rpma_cq* cq = nullptr;
    bool is_rcq = true;
    ASSERT_EQ(rpma_conn_wait(conn_, flags, &cq, &is_rcq), 0);
    EXPECT_EQ(cq, cq_);
    EXPECT_FALSE(is_rcq);
    ::testing::Mock::VerifyAndClearExpectations(&backend_);
  }
}

TEST_F(ConnWaitTest, ConnWait_RcqEvent_ReturnsRcq) {
  NextCqEvent(ibv_rcq_);
  EXPECT_CALL(backend_, IbvAckCqEvents(ibv_rcq_, 1u)).Times(2);
  rpma_cq* cq = nullptr;
  bool is_rcq = false;
  ASSERT_EQ(rpma_conn_wait(conn_, 0, &cq, &is_rcq), 0);
  EXPECT_EQ(cq, rcq_);
  EXPECT_TRUE(is_rcq);
  NextCqEvent(ibv_rcq_);
  ASSERT_EQ(rpma_conn_wait(conn_, 0, &cq, nullptr), 0);  // is_rcq may be NULL
}

// As librpma, a failed ibv_get_cq_event is no error line (the caller gets
// RPMA_E_NO_COMPLETION); its errno is kept at DEBUG.
TEST_F(ConnWaitTest, ConnWait_GetEventFails_ReturnsNoCompletion_LogsAtDebugOnly) {
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG), 0);
  ScopedLogCapture capture;
  EXPECT_CALL(backend_, IbvGetCqEvent(_, _, _)).WillOnce(Return(EIO));
  rpma_cq* cq = nullptr;
  EXPECT_EQ(rpma_conn_wait(conn_, 0, &cq, nullptr), RPMA_E_NO_COMPLETION);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_DEBUG, "errno 5")) << capture.Dump();
  EXPECT_FALSE(capture.AnyAtOrAbove(RPMA_LOG_LEVEL_INFO)) << capture.Dump();
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_WARNING), 0);
}

TEST_F(ConnWaitTest, ConnWait_UnknownCq_AcksAndReturnsUnknown) {
  ibv_cq other{};
  NextCqEvent(&other);
  EXPECT_CALL(backend_, IbvAckCqEvents(&other, 1u));
  rpma_cq* cq = cq_;
  EXPECT_EQ(rpma_conn_wait(conn_, 0, &cq, nullptr), RPMA_E_UNKNOWN);
  EXPECT_EQ(cq, nullptr);
}

TEST_F(ConnWaitTest, ConnWait_ReqNotifyFails_ReturnsProvider) {
  NextCqEvent(ibv_cq_);
  EXPECT_CALL(backend_, IbvReqNotifyCq(ibv_cq_, 0)).WillOnce(Return(EINVAL));
  rpma_cq* cq = cq_;
  EXPECT_EQ(rpma_conn_wait(conn_, 0, &cq, nullptr), RPMA_E_PROVIDER);
  EXPECT_EQ(cq, nullptr);
}

// ---- rpma_cq_* ------------------------------------------------------------------------------

class CqTest : public ConnTest {
 protected:
  void SetUp() override {
    ConnTest::SetUp();
    conn_ = Connect(nullptr);
    ASSERT_EQ(rpma_conn_get_cq(conn_, &cq_), 0);
    ibv_cq_ = fake_.last_id()->qp->send_cq;
  }
  void TearDown() override {
    rpma_conn_delete(&conn_);
    ConnTest::TearDown();
  }
  rpma_conn* conn_ = nullptr;
  rpma_cq* cq_ = nullptr;
  ibv_cq* ibv_cq_ = nullptr;
};

TEST_F(CqTest, CqGetFd_NullArguments_ReturnInval) {
  int fd;
  EXPECT_EQ(rpma_cq_get_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_fd(cq_, nullptr), RPMA_E_INVAL);
  ASSERT_EQ(rpma_cq_get_fd(cq_, &fd), 0);
  EXPECT_EQ(fd, ibv_cq_->channel->fd);
}

TEST_F(CqTest, CqWait_NullCq_ReturnsInval) { EXPECT_EQ(rpma_cq_wait(nullptr), RPMA_E_INVAL); }

TEST_F(CqTest, CqWait_Event_AcksAndRearms) {
  EXPECT_CALL(backend_, IbvGetCqEvent(ibv_cq_->channel, _, _))
      .WillOnce(DoAll(SetArgPointee<1>(ibv_cq_), Return(0)));
  InSequence in_order;
  EXPECT_CALL(backend_, IbvAckCqEvents(ibv_cq_, 1u));
  EXPECT_CALL(backend_, IbvReqNotifyCq(ibv_cq_, 0));
  EXPECT_EQ(rpma_cq_wait(cq_), 0);
}

TEST_F(CqTest, CqWait_NoEvent_ReturnsNoCompletion) {
  EXPECT_CALL(backend_, IbvGetCqEvent(_, _, _)).WillOnce(Return(EAGAIN));
  EXPECT_EQ(rpma_cq_wait(cq_), RPMA_E_NO_COMPLETION);
}

TEST_F(CqTest, CqWait_GetEventFails_ReturnsNoCompletion_NoErrorLogged) {
  ScopedLogCapture capture;
  EXPECT_CALL(backend_, IbvGetCqEvent(_, _, _)).WillOnce(Return(EINTR));
  EXPECT_EQ(rpma_cq_wait(cq_), RPMA_E_NO_COMPLETION);
  EXPECT_FALSE(capture.AnyAtOrAbove(RPMA_LOG_LEVEL_WARNING)) << capture.Dump();
}

// The NOTICE lines librpma writes: where an endpoint listens, where a request goes, and the
// route's GIDs (not available from this provider).
TEST_F(ConnTest, EpListenAndConnReqNew_LogAtNotice) {
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_NOTICE), 0);
  ScopedLogCapture capture;
  rpma_ep* ep = nullptr;
  ASSERT_EQ(rpma_ep_listen(peer_, "10.0.0.1", "7204", &ep), 0);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_NOTICE, "10.0.0.1:7204")) << capture.Dump();
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7205", nullptr, &req), 0);
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_NOTICE, "10.0.0.2:7205")) << capture.Dump();
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_NOTICE, "source GID is not available"))
      << capture.Dump();
  EXPECT_FALSE(capture.AnyAtOrAbove(RPMA_LOG_LEVEL_WARNING)) << capture.Dump();
  ASSERT_EQ(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_WARNING), 0);
  ASSERT_EQ(rpma_conn_req_delete(&req), 0);
  ASSERT_EQ(rpma_ep_shutdown(&ep), 0);
}

TEST_F(CqTest, CqWait_ReqNotifyFails_ReturnsProvider) {
  EXPECT_CALL(backend_, IbvGetCqEvent(_, _, _))
      .WillOnce(DoAll(SetArgPointee<1>(ibv_cq_), Return(0)));
  EXPECT_CALL(backend_, IbvReqNotifyCq(_, _)).WillOnce(Return(EINVAL));
  EXPECT_EQ(rpma_cq_wait(cq_), RPMA_E_PROVIDER);
}

TEST_F(CqTest, CqWait_OtherCqEvent_AcksAndReturnsUnknown) {
  ibv_cq other{};
  EXPECT_CALL(backend_, IbvGetCqEvent(_, _, _))
      .WillOnce(DoAll(SetArgPointee<1>(&other), Return(0)));
  EXPECT_CALL(backend_, IbvAckCqEvents(&other, 1u));
  EXPECT_EQ(rpma_cq_wait(cq_), RPMA_E_UNKNOWN);
}

TEST_F(CqTest, CqGetWc_InvalidArguments_ReturnInval) {
  ibv_wc wc[2];
  int got;
  EXPECT_EQ(rpma_cq_get_wc(nullptr, 1, wc, &got), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_wc(cq_, 0, wc, &got), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_wc(cq_, -1, wc, &got), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_wc(cq_, 1, nullptr, &got), RPMA_E_INVAL);
  EXPECT_EQ(rpma_cq_get_wc(cq_, 2, wc, nullptr), RPMA_E_INVAL);
}

TEST_F(CqTest, CqGetWc_Empty_ReturnsNoCompletion) {
  ibv_wc wc;
  EXPECT_EQ(rpma_cq_get_wc(cq_, 1, &wc, nullptr), RPMA_E_NO_COMPLETION);
}

TEST_F(CqTest, CqGetWc_PollErrno_ReturnsProvider) {
  EXPECT_CALL(backend_, IbvPollCq(_, _, _, _)).WillOnce(Return(EOVERFLOW));
  ibv_wc wc;
  EXPECT_EQ(rpma_cq_get_wc(cq_, 1, &wc, nullptr), RPMA_E_PROVIDER);
}

// As librpma (cq.c): a negative ibv_poll_cq is RPMA_E_PROVIDER, errno or not (on a real NIC
// it never has one), so the ibverbs backend and the simulator answer the same.
TEST_F(CqTest, CqGetWc_PollNoErrno_ReturnsProvider) {
  EXPECT_CALL(backend_, IbvPollCq(_, _, _, _)).WillOnce(Return(softrpma::kNoErrno));
  ibv_wc wc;
  EXPECT_EQ(rpma_cq_get_wc(cq_, 1, &wc, nullptr), RPMA_E_PROVIDER);
}

TEST_F(CqTest, CqGetWc_ReturnsCompletionsAndCount) {
  EXPECT_CALL(backend_, IbvPollCq(ibv_cq_, 3, _, _))
      .WillOnce(Invoke([](ibv_cq*, int, ibv_wc* wc, int* polled) {
        wc[0].wr_id = 11;
        wc[1].wr_id = 22;
        *polled = 2;
        return 0;
      }));
  ibv_wc wc[3] = {};
  int got = 0;
  ASSERT_EQ(rpma_cq_get_wc(cq_, 3, wc, &got), 0);
  EXPECT_EQ(got, 2);
  EXPECT_EQ(wc[0].wr_id, 11u);
  EXPECT_EQ(wc[1].wr_id, 22u);
}

// ---- The data path --------------------------------------------------------------------------

class OpsTest : public ConnTest {
 protected:
  void SetUp() override {
    ConnTest::SetUp();
    conn_ = Connect(nullptr);
    qp_ = fake_.last_id()->qp;
    ASSERT_EQ(rpma_mr_reg(peer_, local_buf_, sizeof(local_buf_),
                          RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_SEND |
                              RPMA_MR_USAGE_RECV,
                          &local_),
              0);
    uint8_t desc[21] = {};
    const uint64_t raddr = 0x10000;
    for (int i = 0; i < 8; ++i) desc[i] = static_cast<uint8_t>(raddr >> (8 * i));
    desc[8] = 64;
    desc[16] = 0x77;  // rkey 0x77
    desc[20] = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST;
    ASSERT_EQ(rpma_mr_remote_from_descriptor(desc, sizeof(desc), &remote_), 0);
  }
  void TearDown() override {
    rpma_mr_remote_delete(&remote_);
    rpma_mr_dereg(&local_);
    rpma_conn_delete(&conn_);
    ConnTest::TearDown();
  }
  // Captures the next posted send WR (and its first SGE).
  void CaptureSend() {
    EXPECT_CALL(backend_, IbvPostSend(qp_, _, _))
        .WillOnce(Invoke([this](ibv_qp*, ibv_send_wr* wr, ibv_send_wr**) {
          wr_ = *wr;
          if (wr->num_sge > 0) sge_ = wr->sg_list[0];
          EXPECT_EQ(wr->next, nullptr);
          return 0;
        }));
  }

  rpma_conn* conn_ = nullptr;
  ibv_qp* qp_ = nullptr;
  char local_buf_[64] = {};
  rpma_mr_local* local_ = nullptr;
  rpma_mr_remote* remote_ = nullptr;
  ibv_send_wr wr_{};
  ibv_sge sge_{};
  int context_ = 0;
};

TEST_F(OpsTest, Read_InvalidArguments_ReturnInval) {
  const int f = RPMA_F_COMPLETION_ALWAYS;
  EXPECT_EQ(rpma_read(nullptr, local_, 0, remote_, 0, 8, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn_, local_, 0, remote_, 0, 8, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn_, nullptr, 0, remote_, 0, 0, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn_, nullptr, 0, nullptr, 1, 0, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn_, nullptr, 1, nullptr, 0, 0, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn_, nullptr, 0, nullptr, 0, 1, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_read(conn_, local_, 0, nullptr, 0, 0, f, nullptr), RPMA_E_INVAL);
}

TEST_F(OpsTest, Read_BuildsSignaledRdmaRead) {
  CaptureSend();
  ASSERT_EQ(rpma_read(conn_, local_, 8, remote_, 16, 24, RPMA_F_COMPLETION_ALWAYS, &context_), 0);
  EXPECT_EQ(wr_.opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(wr_.wr_id, reinterpret_cast<uint64_t>(&context_));
  EXPECT_EQ(wr_.send_flags, static_cast<unsigned>(IBV_SEND_SIGNALED));
  ASSERT_EQ(wr_.num_sge, 1);
  EXPECT_EQ(sge_.addr, reinterpret_cast<uint64_t>(local_buf_ + 8));
  EXPECT_EQ(sge_.length, 24u);
  EXPECT_EQ(wr_.wr.rdma.remote_addr, 0x10000u + 16);
  EXPECT_EQ(wr_.wr.rdma.rkey, 0x77u);
}

TEST_F(OpsTest, Read_ZeroLength_IsLegal) {
  CaptureSend();
  ASSERT_EQ(rpma_read(conn_, nullptr, 0, nullptr, 0, 0, RPMA_F_COMPLETION_ON_ERROR, nullptr), 0);
  EXPECT_EQ(wr_.num_sge, 0);
  EXPECT_EQ(wr_.send_flags, 0u);  // completion on error only: not signaled
}

TEST_F(OpsTest, Read_PostFails_ReturnsProvider) {
  EXPECT_CALL(backend_, IbvPostSend(_, _, _)).WillOnce(Return(ENOMEM));
  EXPECT_EQ(rpma_read(conn_, local_, 0, remote_, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr),
            RPMA_E_PROVIDER);
}

TEST_F(OpsTest, Write_InvalidArguments_ReturnInval) {
  const int f = RPMA_F_COMPLETION_ALWAYS;
  EXPECT_EQ(rpma_write(nullptr, remote_, 0, local_, 0, 8, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn_, remote_, 0, local_, 0, 8, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn_, nullptr, 0, local_, 0, 0, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn_, remote_, 0, nullptr, 0, 0, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn_, nullptr, 1, nullptr, 0, 0, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn_, nullptr, 0, nullptr, 1, 0, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn_, nullptr, 0, nullptr, 0, 1, f, nullptr), RPMA_E_INVAL);
}

TEST_F(OpsTest, Write_BuildsRdmaWrite) {
  CaptureSend();
  ASSERT_EQ(rpma_write(conn_, remote_, 4, local_, 2, 10, RPMA_F_COMPLETION_ON_ERROR, &context_),
            0);
  EXPECT_EQ(wr_.opcode, IBV_WR_RDMA_WRITE);
  EXPECT_EQ(wr_.send_flags, 0u);
  EXPECT_EQ(sge_.addr, reinterpret_cast<uint64_t>(local_buf_ + 2));
  EXPECT_EQ(sge_.length, 10u);
  EXPECT_EQ(wr_.wr.rdma.remote_addr, 0x10004u);
}

TEST_F(OpsTest, Write_ZeroLength_IsLegal) {
  CaptureSend();
  ASSERT_EQ(rpma_write(conn_, nullptr, 0, nullptr, 0, 0, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
  EXPECT_EQ(wr_.num_sge, 0);
}

TEST_F(OpsTest, WriteWithImm_CarriesImmInNetworkOrder) {
  CaptureSend();
  ASSERT_EQ(rpma_write_with_imm(conn_, remote_, 0, local_, 0, 8, RPMA_F_COMPLETION_ALWAYS,
                                0x01020304, nullptr),
            0);
  EXPECT_EQ(wr_.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_EQ(wr_.imm_data, htonl(0x01020304));
  EXPECT_EQ(rpma_write_with_imm(conn_, remote_, 0, local_, 0, 8, 0, 1, nullptr), RPMA_E_INVAL);
}

TEST_F(OpsTest, Send_InvalidArguments_ReturnInval) {
  const int f = RPMA_F_COMPLETION_ALWAYS;
  EXPECT_EQ(rpma_send(nullptr, local_, 0, 8, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send(conn_, local_, 0, 8, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send(conn_, nullptr, 1, 0, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send(conn_, nullptr, 0, 1, f, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send_with_imm(conn_, nullptr, 0, 1, f, 5, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send_with_imm(nullptr, local_, 0, 1, f, 5, nullptr), RPMA_E_INVAL);
}

TEST_F(OpsTest, Send_BuildsSend_AndZeroLengthIsLegal) {
  CaptureSend();
  ASSERT_EQ(rpma_send(conn_, local_, 1, 5, RPMA_F_COMPLETION_ALWAYS, &context_), 0);
  EXPECT_EQ(wr_.opcode, IBV_WR_SEND);
  EXPECT_EQ(sge_.length, 5u);
  EXPECT_EQ(wr_.wr_id, reinterpret_cast<uint64_t>(&context_));
  CaptureSend();
  ASSERT_EQ(rpma_send(conn_, nullptr, 0, 0, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
  EXPECT_EQ(wr_.num_sge, 0);
  CaptureSend();
  ASSERT_EQ(rpma_send_with_imm(conn_, local_, 0, 4, RPMA_F_COMPLETION_ALWAYS, 9, nullptr), 0);
  EXPECT_EQ(wr_.opcode, IBV_WR_SEND_WITH_IMM);
  EXPECT_EQ(wr_.imm_data, htonl(9));
}

TEST_F(OpsTest, Send_PostFails_ReturnsProvider) {
  EXPECT_CALL(backend_, IbvPostSend(_, _, _)).WillOnce(Return(EINVAL));
  EXPECT_EQ(rpma_send(conn_, local_, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr), RPMA_E_PROVIDER);
}

TEST_F(OpsTest, Recv_InvalidArguments_ReturnInval) {
  EXPECT_EQ(rpma_recv(nullptr, local_, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_recv(conn_, nullptr, 1, 0, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_recv(conn_, nullptr, 0, 1, nullptr), RPMA_E_INVAL);
}

TEST_F(OpsTest, Recv_PostsReceive) {
  EXPECT_CALL(backend_, IbvPostRecv(qp_, _, _))
      .WillOnce(Invoke([this](ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr**) {
        EXPECT_EQ(wr->wr_id, reinterpret_cast<uint64_t>(&context_));
        EXPECT_EQ(wr->num_sge, 1);
        EXPECT_EQ(wr->sg_list[0].addr, reinterpret_cast<uint64_t>(local_buf_ + 3));
        EXPECT_EQ(wr->sg_list[0].length, 7u);
        return 0;
      }))
      .WillOnce(Return(ENOMEM));
  EXPECT_EQ(rpma_recv(conn_, local_, 3, 7, &context_), 0);
  EXPECT_EQ(rpma_recv(conn_, local_, 3, 7, &context_), RPMA_E_PROVIDER);
}

// A length one ibv_sge cannot describe is an invalid argument: truncated to 32 bits (as
// librpma does) it would move another number of bytes than asked, silently.
TEST_F(OpsTest, LengthOverFourGib_ReturnsInval_PostsNothing) {
  const size_t too_long = (size_t{1} << 32) + 8;
  EXPECT_CALL(backend_, IbvPostSend(_, _, _)).Times(0);
  EXPECT_CALL(backend_, IbvPostRecv(_, _, _)).Times(0);
  ScopedLogCapture logs;
  EXPECT_EQ(rpma_read(conn_, local_, 0, remote_, 0, too_long, RPMA_F_COMPLETION_ALWAYS, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write(conn_, remote_, 0, local_, 0, too_long, RPMA_F_COMPLETION_ALWAYS, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_write_with_imm(conn_, remote_, 0, local_, 0, too_long, RPMA_F_COMPLETION_ALWAYS, 1, nullptr),
            RPMA_E_INVAL);
  EXPECT_EQ(rpma_send(conn_, local_, 0, too_long, RPMA_F_COMPLETION_ALWAYS, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_send_with_imm(conn_, local_, 0, too_long, RPMA_F_COMPLETION_ALWAYS, 1, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_recv(conn_, local_, 0, too_long, nullptr), RPMA_E_INVAL);
  EXPECT_TRUE(logs.Contains(RPMA_LOG_LEVEL_ERROR, "does not fit one ibv_sge")) << logs.Dump();
}

TEST_F(ConnTest, RecvOnRequestOrSrq_LengthOverFourGib_ReturnsInval) {
  const size_t too_long = size_t{1} << 32;
  char buffer[8];
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer_, buffer, 8, RPMA_MR_USAGE_RECV, &mr), 0);
  rpma_conn_req* req = nullptr;
  ASSERT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", nullptr, &req), 0);
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer_, nullptr, &srq), 0);
  EXPECT_CALL(backend_, IbvPostRecv(_, _, _)).Times(0);
  EXPECT_CALL(backend_, IbvPostSrqRecv(_, _, _)).Times(0);
  EXPECT_EQ(rpma_conn_req_recv(req, mr, 0, too_long, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, mr, 0, too_long, nullptr), RPMA_E_INVAL);
  ASSERT_EQ(rpma_srq_delete(&srq), 0);
  ASSERT_EQ(rpma_conn_req_delete(&req), 0);
  ASSERT_EQ(rpma_mr_dereg(&mr), 0);
}

TEST_F(OpsTest, LengthOfExactlyFourGibMinusOne_IsPosted) {
  const size_t longest = (size_t{1} << 32) - 1;
  EXPECT_CALL(backend_, IbvPostSend(_, _, _))
      .WillOnce(Invoke([&](ibv_qp*, ibv_send_wr* wr, ibv_send_wr**) {
        EXPECT_EQ(wr->sg_list[0].length, static_cast<uint32_t>(longest));
        return 0;
      }));
  EXPECT_EQ(rpma_write(conn_, remote_, 0, local_, 0, longest, RPMA_F_COMPLETION_ALWAYS, nullptr), 0);
}

// ---- Shared receive queues ------------------------------------------------------------------

TEST_F(ConnTest, SrqNew_NullArguments_ReturnInval) {
  rpma_srq* srq = nullptr;
  EXPECT_EQ(rpma_srq_new(nullptr, nullptr, &srq), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_new(peer_, nullptr, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_delete(nullptr), RPMA_E_INVAL);
}

TEST_F(ConnTest, SrqNew_CreateSrqFails_ReturnsProvider) {
  EXPECT_CALL(backend_, IbvCreateSrq(_, _, _)).WillOnce(Return(ENOMEM));
  rpma_srq* srq = nullptr;
  EXPECT_EQ(rpma_srq_new(peer_, nullptr, &srq), RPMA_E_PROVIDER);
  EXPECT_EQ(srq, nullptr);
}

// As librpma (conn_req.c): a shared completion channel cannot serve an SRQ's own receive CQ.
TEST_F(ConnTest, ConnReqNew_SharedChannelAndSrqWithRcq_ReturnsInval) {
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer_, nullptr, &srq), 0);  // with an RCQ (rcq_size 100)
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_compl_channel(cfg_, true), 0);
  EXPECT_CALL(backend_, IbvCreateCompChannel(_, _)).Times(0);
  EXPECT_CALL(backend_, IbvCreateCq(_, _, _, _, _, _)).Times(0);
  EXPECT_CALL(backend_, RdmaCreateQpEx(_, _)).Times(0);
  EXPECT_CALL(backend_, RdmaDestroyId(_));
  rpma_conn_req* req = nullptr;
  EXPECT_EQ(rpma_conn_req_new(peer_, "10.0.0.2", "7204", cfg_, &req), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
  ::testing::Mock::VerifyAndClearExpectations(&backend_);
  ASSERT_EQ(rpma_srq_delete(&srq), 0);
}

// As librpma: with an SRQ that has its own receive CQ, rcq_size makes no RCQ of the
// connection's: receives complete on the SRQ's, and rpma_conn_get_rcq gives NULL.
TEST_F(ConnTest, ConnReqNew_RcqSizeWithSrqRcq_NoExtraRcq_GetRcqIsNull) {
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer_, nullptr, &srq), 0);
  ibv_cq* srq_ibv_rcq = fake_.last_cq();
  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, srq), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(cfg_, 30), 0);
  EXPECT_CALL(backend_, IbvCreateCq(_, 10, _, _, _, _));  // the main CQ only
  EXPECT_CALL(backend_, IbvCreateCq(_, 30, _, _, _, _)).Times(0);
  rpma_conn* conn = Connect(cfg_);
  ASSERT_NE(conn, nullptr);
  EXPECT_EQ(fake_.last_id()->qp->recv_cq, srq_ibv_rcq);
  rpma_cq* rcq = reinterpret_cast<rpma_cq*>(this);
  ASSERT_EQ(rpma_conn_get_rcq(conn, &rcq), 0);
  EXPECT_EQ(rcq, nullptr);
  ASSERT_EQ(rpma_conn_delete(&conn), 0);
  ASSERT_EQ(rpma_srq_delete(&srq), 0);
}

TEST_F(ConnTest, Srq_ConnectionReceivesThroughIt) {
  EXPECT_CALL(backend_, IbvCreateSrq(_, Pointee(Field(&ibv_srq_init_attr::attr,
                                                      Field(&ibv_srq_attr::max_wr, 100u))),
                                     _));
  EXPECT_CALL(backend_, IbvCreateCq(_, 100, _, _, _, _));  // the shared RCQ
  rpma_srq* srq = nullptr;
  ASSERT_EQ(rpma_srq_new(peer_, nullptr, &srq), 0);
  rpma_cq* srq_rcq = nullptr;
  ASSERT_EQ(rpma_srq_get_rcq(srq, &srq_rcq), 0);
  ASSERT_NE(srq_rcq, nullptr);
  ibv_cq* srq_ibv_rcq = fake_.last_cq();
  ::testing::Mock::VerifyAndClearExpectations(&backend_);

  ASSERT_EQ(rpma_conn_cfg_set_srq(cfg_, srq), 0);
  rpma_conn* conn = Connect(cfg_);
  ibv_qp* qp = fake_.last_id()->qp;
  EXPECT_NE(qp->srq, nullptr);
  EXPECT_EQ(qp->recv_cq, srq_ibv_rcq);

  char buffer[8];
  rpma_mr_local* mr = nullptr;
  ASSERT_EQ(rpma_mr_reg(peer_, buffer, 8, RPMA_MR_USAGE_RECV, &mr), 0);
  EXPECT_EQ(rpma_srq_recv(nullptr, mr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rpma_srq_recv(srq, nullptr, 0, 8, nullptr), RPMA_E_INVAL);
  EXPECT_CALL(backend_, IbvPostSrqRecv(qp->srq, _, _)).WillOnce(Return(0)).WillOnce(
      Return(ENOMEM));
  EXPECT_EQ(rpma_srq_recv(srq, mr, 0, 8, nullptr), 0);
  EXPECT_EQ(rpma_srq_recv(srq, mr, 0, 8, nullptr), RPMA_E_PROVIDER);
  rpma_mr_dereg(&mr);
  ASSERT_EQ(rpma_conn_delete(&conn), 0);
  ASSERT_EQ(rpma_srq_delete(&srq), 0);
  EXPECT_EQ(srq, nullptr);
}

}  // namespace
