// Conformance of connection requests (rpma_conn_req_new(3), rpma_conn_req_delete(3),
// rpma_conn_req_connect(3), rpma_conn_req_recv(3), rpma_conn_req_get_private_data(3)): one test
// per ERRORS line (rows of rpma-errors.tsv), through the public API on the simulated NIC.

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/conformance_test.h"
#include "tests/conformance/testing/rig.h"
#include "tests/conformance/testing/rig_test.h"

namespace softrpma::conformance {
namespace {

class ConnReqTest : public RigTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(RigTest::SetUp());
    ASSERT_RPMA(rig_->Listen(), 0);
  }

  // rpma_conn_req_new under `fault_spec` returns `expected`, writes no request and leaves
  // nothing behind (with a provider fault: every id, CQ, channel and addrinfo it made is
  // released), and the same call succeeds right after.
  void ExpectConnReqNewFails(const char* fault_spec, const char* fault_point, int expected) {
    rpma_conn_req* req = nullptr;
    {
      ARM_FAULTS(faults, fault_spec);
      EXPECT_RPMA(
          rpma_conn_req_new(rig_->peer(), kAddress, rig_->port().c_str(), rig_->cfg(), &req),
          expected);
      EXPECT_EQ(FaultInjections(fault_point), 1u);
      if (std::string(fault_point) != "malloc") {
        EXPECT_TRUE(AllReleased("rdma_create_id", "rdma_destroy_id"));
        EXPECT_TRUE(AllReleased("rdma_getaddrinfo", "rdma_freeaddrinfo"));
        EXPECT_TRUE(AllReleased("ibv_create_cq", "ibv_destroy_cq"));
        EXPECT_TRUE(AllReleased("ibv_create_comp_channel", "ibv_destroy_comp_channel"));
      }
    }
    EXPECT_EQ(req, nullptr);
    EXPECT_RPMA(rpma_conn_req_new(rig_->peer(), kAddress, rig_->port().c_str(), rig_->cfg(), &req),
                0);
    EXPECT_RPMA(rpma_conn_req_delete(&req), 0);
  }

  // Waits for the client's events until one that is not ESTABLISHED; returns it (or
  // RPMA_CONN_UNDEFINED when waiting failed).
  rpma_conn_event ClientEventAfterEstablished() {
    rpma_conn_event event = RPMA_CONN_ESTABLISHED;
    while (event == RPMA_CONN_ESTABLISHED) {
      const int ret = Rig::NextEvent(rig_->client(), &event);
      EXPECT_RPMA(ret, 0);
      if (ret != 0) return RPMA_CONN_UNDEFINED;
    }
    return event;
  }
};

// ---- rpma_conn_req_new / rpma_conn_req_delete -----------------------------------------------

RPMA_TEST_F(ConnReqTest, ConnReqNew_PeerAddrPortOrReqPtrNull_ReturnsInval,
            RPMA_ROW("rpma_conn_req_new", "RPMA_E_INVAL", "peer, addr, port or req_ptr is NULL")) {
  const char* port = rig_->port().c_str();
  rpma_conn_req* req = nullptr;
  EXPECT_RPMA(rpma_conn_req_new(nullptr, kAddress, port, rig_->cfg(), &req), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_req_new(rig_->peer(), nullptr, port, rig_->cfg(), &req), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_req_new(rig_->peer(), kAddress, nullptr, rig_->cfg(), &req), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_req_new(rig_->peer(), kAddress, port, rig_->cfg(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
}

RPMA_TEST_F(ConnReqTest, ConnReqNew_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_conn_req_new", "RPMA_E_NOMEM", "out of memory")) {
  ExpectConnReqNewFails("malloc:fail=ENOMEM:nth=1", "malloc", RPMA_E_NOMEM);
}

RPMA_TEST_F(ConnReqTest, ConnReqNew_CreateIdFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_req_new", "RPMA_E_PROVIDER",
                     "rdma_create_id(3), rdma_resolve_addr(3), rdma_resolve_route(3) or "
                     "ibv_create_cq(3) failed")) {
  ExpectConnReqNewFails("rdma_create_id:fail=EIO:nth=1", "rdma_create_id", RPMA_E_PROVIDER);
}

RPMA_TEST_F(ConnReqTest, ConnReqNew_ResolveAddrFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_req_new", "RPMA_E_PROVIDER",
                     "rdma_create_id(3), rdma_resolve_addr(3), rdma_resolve_route(3) or "
                     "ibv_create_cq(3) failed")) {
  ExpectConnReqNewFails("rdma_resolve_addr:fail=EHOSTUNREACH:nth=1", "rdma_resolve_addr",
                        RPMA_E_PROVIDER);
}

RPMA_TEST_F(ConnReqTest, ConnReqNew_ResolveRouteFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_req_new", "RPMA_E_PROVIDER",
                     "rdma_create_id(3), rdma_resolve_addr(3), rdma_resolve_route(3) or "
                     "ibv_create_cq(3) failed")) {
  ExpectConnReqNewFails("rdma_resolve_route:fail=EIO:nth=1", "rdma_resolve_route", RPMA_E_PROVIDER);
}

RPMA_TEST_F(ConnReqTest, ConnReqNew_CreateCqFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_req_new", "RPMA_E_PROVIDER",
                     "rdma_create_id(3), rdma_resolve_addr(3), rdma_resolve_route(3) or "
                     "ibv_create_cq(3) failed")) {
  ExpectConnReqNewFails("ibv_create_cq:fail=ENOMEM:nth=1", "ibv_create_cq", RPMA_E_PROVIDER);
}

RPMA_TEST_F(ConnReqTest, ConnReqNew_CreateRcqFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_req_new", "RPMA_E_PROVIDER",
                     "rdma_create_id(3), rdma_resolve_addr(3), rdma_resolve_route(3) or "
                     "ibv_create_cq(3) failed")) {
  // With a receive CQ the second ibv_create_cq fails: the first CQ must be released too.
  ASSERT_RPMA(rpma_conn_cfg_set_rcq_size(rig_->cfg(), 8), 0);
  ExpectConnReqNewFails("ibv_create_cq:fail=EIO:nth=2", "ibv_create_cq", RPMA_E_PROVIDER);
}

RPMA_TEST_F(ConnReqTest, ConnReqDelete_ReqPtrNull_ReturnsInval,
            RPMA_ROW("rpma_conn_req_delete", "RPMA_E_INVAL", "req_ptr is NULL")) {
  EXPECT_RPMA(rpma_conn_req_delete(nullptr), RPMA_E_INVAL);
}

// ---- rpma_conn_req_connect ------------------------------------------------------------------

RPMA_TEST_F(ConnReqTest, ConnReqConnect_ReqPtrReqOrConnPtrNull_ReturnsInval,
            RPMA_ROW("rpma_conn_req_connect", "RPMA_E_INVAL",
                     "req_ptr, *req_ptr or conn_ptr is NULL")) {
  rpma_conn* conn = nullptr;
  EXPECT_RPMA(rpma_conn_req_connect(nullptr, nullptr, &conn), RPMA_E_INVAL);
  rpma_conn_req* no_req = nullptr;
  EXPECT_RPMA(rpma_conn_req_connect(&no_req, nullptr, &conn), RPMA_E_INVAL);
  ASSERT_RPMA(rig_->NewClientRequest(), 0);
  EXPECT_RPMA(rpma_conn_req_connect(rig_->client_req_ptr(), nullptr, nullptr), RPMA_E_INVAL);
  // On failure the request is consumed (rpma_conn_req_connect(3), RETURN VALUE).
  EXPECT_EQ(rig_->client_req(), nullptr);
  EXPECT_EQ(conn, nullptr);
}

RPMA_TEST_F(ConnReqTest, ConnReqConnect_PdataWithZeroLength_ReturnsInval,
            RPMA_ROW("rpma_conn_req_connect", "RPMA_E_INVAL",
                     "pdata is not NULL whereas pdata->len == 0")) {
  ASSERT_RPMA(rig_->NewClientRequest(), 0);
  char byte = 'x';
  rpma_conn_private_data pdata{&byte, 0};
  EXPECT_RPMA(rig_->ConnectClient(&pdata), RPMA_E_INVAL);
  EXPECT_EQ(rig_->client_req(), nullptr);  // consumed
  EXPECT_EQ(rig_->client(), nullptr);
  // Nothing reached the server: a new request connects.
  EXPECT_RPMA(rig_->Establish(), 0);
}

RPMA_TEST_F(ConnReqTest, ConnReqConnect_OutOfMemoryActiveSide_ReturnsNomem,
            RPMA_ROW("rpma_conn_req_connect", "RPMA_E_NOMEM", "out of memory")) {
  ASSERT_RPMA(rig_->NewClientRequest(), 0);
  {
    ARM_FAULTS(faults, "malloc:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rig_->ConnectClient(), RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
  }
  EXPECT_EQ(rig_->client_req(), nullptr);  // consumed
  EXPECT_EQ(rig_->client(), nullptr);
  EXPECT_RPMA(rig_->Establish(), 0);
}

RPMA_TEST_F(ConnReqTest, ConnReqConnect_OutOfMemoryPassiveSide_ReturnsNomem,
            RPMA_ROW("rpma_conn_req_connect", "RPMA_E_NOMEM", "out of memory")) {
  ASSERT_RPMA(rig_->ConnectClient(), 0);
  ASSERT_RPMA(rig_->NextServerRequest(), 0);
  {
    ARM_FAULTS(faults, "malloc:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rig_->AcceptServer(), RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
  }
  EXPECT_EQ(rig_->server_req(), nullptr);  // consumed
  EXPECT_EQ(rig_->server(), nullptr);
  // The server let the connection go: the client sees it closed.
  EXPECT_EQ(ClientEventAfterEstablished(), RPMA_CONN_CLOSED);
}

RPMA_TEST_F(ConnReqTest, ConnReqConnect_ConnectFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_req_connect", "RPMA_E_PROVIDER",
                     "initiating a connection request failed (active side only)")) {
  ASSERT_RPMA(rig_->NewClientRequest(), 0);
  {
    ARM_FAULTS(faults, "rdma_connect:fail=ECONNREFUSED:nth=1");
    EXPECT_RPMA(rig_->ConnectClient(), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("rdma_connect"), 1u);
    // Everything the request held was released.
    EXPECT_EQ(FaultHits("rdma_destroy_qp"), 1u);
    EXPECT_EQ(FaultHits("rdma_destroy_id"), 1u);
  }
  EXPECT_EQ(rig_->client_req(), nullptr);  // consumed
  EXPECT_EQ(rig_->client(), nullptr);
  EXPECT_RPMA(rig_->Establish(), 0);
}

RPMA_TEST_F(ConnReqTest, ConnReqConnect_AcceptFails_ReturnsProviderAndRejects,
            RPMA_ROW("rpma_conn_req_connect", "RPMA_E_PROVIDER",
                     "accepting the connection request failed (passive side only)")) {
  ASSERT_RPMA(rig_->ConnectClient(), 0);
  ASSERT_RPMA(rig_->NextServerRequest(), 0);
  {
    ARM_FAULTS(faults, "rdma_accept:fail=EIO:nth=1");
    EXPECT_RPMA(rig_->AcceptServer(), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("rdma_accept"), 1u);
  }
  EXPECT_EQ(rig_->server_req(), nullptr);  // consumed
  EXPECT_EQ(rig_->server(), nullptr);
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  EXPECT_RPMA(Rig::NextEvent(rig_->client(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_REJECTED);
}

RPMA_TEST_F(ConnReqTest, ConnReqConnect_NoEventToFree_AckNeverCalled,
            RPMA_ROW_NOT_IN_DESIGN(
                "rpma_conn_req_connect", "RPMA_E_PROVIDER",
                "freeing a communication event failed (passive side only)",
                "as in upstream librpma 1.3 (ep.c), rpma_ep_next_conn_req(3) acknowledges the "
                "CONNECT_REQUEST event before it hands out the request, so connecting frees no "
                "event (a failed acknowledgement is rpma_ep_next_conn_req's RPMA_E_PROVIDER)")) {
  ASSERT_RPMA(rig_->ConnectClient(), 0);
  ASSERT_RPMA(rig_->NextServerRequest(), 0);
  {
    ARM_FAULTS(faults, "rdma_ack_cm_event:fail=EIO");
    EXPECT_RPMA(rig_->AcceptServer(), 0);
    EXPECT_EQ(FaultHits("rdma_ack_cm_event"), 0u);
  }
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  EXPECT_RPMA(Rig::NextEvent(rig_->client(), &event), 0);  // the server's comes after it
  EXPECT_EQ(event, RPMA_CONN_ESTABLISHED);
  EXPECT_RPMA(Rig::NextEvent(rig_->server(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_ESTABLISHED);
}

// ---- rpma_conn_req_recv / rpma_conn_req_get_private_data --------------------------------------

RPMA_TEST_F(ConnReqTest, ConnReqRecv_ReqOrDstNull_ReturnsInval,
            RPMA_ROW("rpma_conn_req_recv", "RPMA_E_INVAL", "req or src or op_context is NULL")) {
  ASSERT_RPMA(rig_->NewClientRequest(), 0);
  rpma_mr_local* mr = rig_->RegisterMr(64, RPMA_MR_USAGE_RECV);
  ASSERT_NE(mr, nullptr);
  int context = 0;
  EXPECT_RPMA(rpma_conn_req_recv(nullptr, mr, 0, 8, &context), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_req_recv(rig_->client_req(), nullptr, 0, 8, &context), RPMA_E_INVAL);
}

// The man page's NULL op_context is accepted, as upstream librpma accepts it: the receive is
// posted with wr_id 0 and completes with it.
RPMA_TEST_F(ConnReqTest, ConnReqRecv_OpContextNull_AcceptedAsUpstream,
            RPMA_ROW_NOT_ENFORCED("rpma_conn_req_recv", "RPMA_E_INVAL",
                                  "req or src or op_context is NULL",
                                  "upstream accepts it (a NULL op_context: the receive "
                                  "completes with wr_id 0)")) {
  ASSERT_RPMA(rig_->NewClientRequest(), 0);
  rpma_mr_local* recv_mr = rig_->RegisterMr(64, RPMA_MR_USAGE_RECV);
  rpma_mr_local* send_mr = rig_->RegisterMr(64, RPMA_MR_USAGE_SEND);
  ASSERT_NE(recv_mr, nullptr);
  ASSERT_NE(send_mr, nullptr);
  ASSERT_RPMA(rpma_conn_req_recv(rig_->client_req(), recv_mr, 0, 8, nullptr), 0);
  ASSERT_RPMA(rig_->Establish(), 0);
  ASSERT_RPMA(rpma_send(rig_->server(), send_mr, 0, 8, RPMA_F_COMPLETION_ON_ERROR, nullptr), 0);
  rpma_cq* cq = nullptr;
  ASSERT_RPMA(rpma_conn_get_cq(rig_->client(), &cq), 0);
  int fd = -1;
  ASSERT_RPMA(rpma_cq_get_fd(cq, &fd), 0);
  ASSERT_TRUE(Readable(fd));
  ASSERT_RPMA(rpma_cq_wait(cq), 0);
  ibv_wc wc = {};
  ASSERT_RPMA(rpma_cq_get_wc(cq, 1, &wc, nullptr), 0);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 0u);
  EXPECT_EQ(wc.byte_len, 8u);
}

RPMA_TEST_F(ConnReqTest, ConnReqRecv_PostRecvFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_req_recv", "RPMA_E_PROVIDER", "ibv_post_recv(3) failed")) {
  ASSERT_RPMA(rig_->NewClientRequest(), 0);
  rpma_mr_local* mr = rig_->RegisterMr(64, RPMA_MR_USAGE_RECV);
  ASSERT_NE(mr, nullptr);
  int context = 0;
  {
    ARM_FAULTS(faults, "ibv_post_recv:fail=ENOMEM:nth=1");
    EXPECT_RPMA(rpma_conn_req_recv(rig_->client_req(), mr, 0, 8, &context), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_post_recv"), 1u);
  }
  // The request is still usable: a receive posts, and it connects.
  EXPECT_RPMA(rpma_conn_req_recv(rig_->client_req(), mr, 0, 8, &context), 0);
  EXPECT_RPMA(rig_->Establish(), 0);
}

RPMA_TEST_F(ConnReqTest, ConnReqGetPrivateData_ReqOrPdataNull_ReturnsInval,
            RPMA_ROW("rpma_conn_req_get_private_data", "RPMA_E_INVAL", "req or pdata is NULL")) {
  ASSERT_RPMA(rig_->NewClientRequest(), 0);
  rpma_conn_private_data pdata{this, 7};
  EXPECT_RPMA(rpma_conn_req_get_private_data(nullptr, &pdata), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_req_get_private_data(rig_->client_req(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(pdata.ptr, this);
  EXPECT_EQ(pdata.len, 7);
}

}  // namespace
}  // namespace softrpma::conformance
