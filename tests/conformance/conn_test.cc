// Conformance of connections (rpma_conn_*(3)): one test per ERRORS line (rows of
// rpma-errors.tsv), through the public API on the simulated NIC.
//
// Two causes the man pages name cannot be produced by the simulator as is, and have a test that
// shows what stands for them:
//   * rpma_conn_next_event "unexpected event": the simulator's connection manager only reports
//     events a connection expects; CmEventInjector reports RDMA_CM_EVENT_ADDR_CHANGE, as a real
//     provider does when the device's address changes.
//   * rpma_conn_delete "munmap() failed": softrpma maps no memory for a connection; the test
//     counts the munmap calls of a delete (none).

#include <sys/mman.h>

#include <memory>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/backend_registry.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/cm_event_injector.h"
#include "tests/conformance/testing/conformance_test.h"
#include "tests/conformance/testing/connected_test.h"
#include "tests/conformance/testing/munmap_counter.h"
#include "tests/conformance/testing/rig.h"
#include "tests/conformance/testing/rig_test.h"

namespace softrpma::conformance {
namespace {

class ConnTest : public ConnectedTest {};

// Connections whose CQ and RCQ share one completion channel.
class ConnSharedChannelTest : public ConnTest {
 protected:
  void Configure(rpma_conn_cfg* cfg) override {
    ASSERT_RPMA(rpma_conn_cfg_set_compl_channel(cfg, true), 0);
    ASSERT_RPMA(rpma_conn_cfg_set_rcq_size(cfg, 4), 0);
  }
  void SetUp() override {
    ConnTest::SetUp();
    ASSERT_RPMA(rpma_conn_get_cq(rig_->client(), &cq_), 0);
    ASSERT_RPMA(rpma_conn_get_rcq(rig_->client(), &rcq_), 0);
    ASSERT_RPMA(rpma_conn_get_compl_fd(rig_->client(), &compl_fd_), 0);
  }

  rpma_cq* cq_ = nullptr;
  rpma_cq* rcq_ = nullptr;
  int compl_fd_ = -1;
};

// A connection whose ESTABLISHED event the client has not taken yet; the server accepted with
// private data.
class ConnEstablishingTest : public RigTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(RigTest::SetUp());
    ASSERT_RPMA(rig_->Listen(), 0);
    ASSERT_RPMA(rig_->ConnectClient(), 0);
    ASSERT_RPMA(rig_->NextServerRequest(), 0);
    rpma_conn_private_data pdata{server_pdata_, sizeof(server_pdata_)};
    ASSERT_RPMA(rig_->AcceptServer(&pdata), 0);
    int fd = -1;
    ASSERT_RPMA(rpma_conn_get_event_fd(rig_->client(), &fd), 0);
    ASSERT_TRUE(Readable(fd));
  }

  char server_pdata_[8] = "server";
};

// Tests that build their own rig (e.g. on another backend).
class ConnCustomRigTest : public ConformanceTest {};

// ---- Events ---------------------------------------------------------------------------------

RPMA_TEST_F(ConnTest, ConnGetEventFd_ConnOrFdNull_ReturnsInval,
            RPMA_ROW("rpma_conn_get_event_fd", "RPMA_E_INVAL", "conn or fd is NULL")) {
  int fd = -12345;
  EXPECT_RPMA(rpma_conn_get_event_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_get_event_fd(rig_->client(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(fd, -12345);
}

RPMA_TEST_F(ConnTest, ConnNextEvent_ConnOrEventNull_ReturnsInval,
            RPMA_ROW("rpma_conn_next_event", "RPMA_E_INVAL", "conn or event is NULL")) {
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  EXPECT_RPMA(rpma_conn_next_event(nullptr, &event), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_next_event(rig_->client(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(event, RPMA_CONN_UNDEFINED);
}

RPMA_TEST_F(ConnCustomRigTest, ConnNextEvent_UnexpectedEvent_ReturnsUnknown,
            RPMA_ROW_NOTE("rpma_conn_next_event", "RPMA_E_UNKNOWN", "unexpected event",
                          kInjectedEventNote)) {
  ScopedBackendOverride override(&CmEventInjector::Get());
  auto rig = Rig::Create();
  ASSERT_TRUE(rig.ok()) << rig.status();
  ASSERT_RPMA((*rig)->Establish(), 0);

  CmEventInjector::Get().InjectNextCmEvent(RDMA_CM_EVENT_ADDR_CHANGE);
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  EXPECT_RPMA(rpma_conn_next_event((*rig)->client(), &event), RPMA_E_UNKNOWN);
  EXPECT_EQ(event, RPMA_CONN_UNDEFINED);
  // The event was acknowledged and the connection goes on: it closes normally.
  EXPECT_EQ(CmEventInjector::Get().UnackedInjectedEvents(), 0);
  ASSERT_RPMA(rpma_conn_disconnect((*rig)->server()), 0);
  EXPECT_RPMA(Rig::NextEvent((*rig)->client(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_CLOSED);
}

RPMA_TEST_F(ConnTest, ConnNextEvent_GetCmEventFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_next_event", "RPMA_E_PROVIDER",
                     "rdma_get_cm_event() or rdma_ack_cm_event() failed")) {
  ASSERT_RPMA(rpma_conn_disconnect(rig_->client()), 0);
  int fd = -1;
  ASSERT_RPMA(rpma_conn_get_event_fd(rig_->server(), &fd), 0);
  ASSERT_TRUE(Readable(fd));
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  {
    ARM_FAULTS(faults, "rdma_get_cm_event:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_conn_next_event(rig_->server(), &event), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("rdma_get_cm_event"), 1u);
  }
  EXPECT_EQ(event, RPMA_CONN_UNDEFINED);
  // The event stayed queued.
  EXPECT_RPMA(Rig::NextEvent(rig_->server(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_CLOSED);
}

RPMA_TEST_F(ConnTest, ConnNextEvent_AckCmEventFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_next_event", "RPMA_E_PROVIDER",
                     "rdma_get_cm_event() or rdma_ack_cm_event() failed")) {
  ASSERT_RPMA(rpma_conn_disconnect(rig_->client()), 0);
  int fd = -1;
  ASSERT_RPMA(rpma_conn_get_event_fd(rig_->server(), &fd), 0);
  ASSERT_TRUE(Readable(fd));
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  {
    ARM_FAULTS(faults, "rdma_ack_cm_event:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_conn_next_event(rig_->server(), &event), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("rdma_ack_cm_event"), 1u);
  }
  EXPECT_EQ(event, RPMA_CONN_UNDEFINED);
}

RPMA_TEST_F(ConnEstablishingTest, ConnNextEvent_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_conn_next_event", "RPMA_E_NOMEM", "out of memory")) {
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  {
    // The call's first allocation is the provider's event (rdma_get_cm_event allocates it, as
    // librdmacm does: failing that one is a failed rdma_get_cm_event); the second is librpma's
    // copy of the server's private data.
    ARM_FAULTS(faults, "malloc:fail=ENOMEM:nth=2");
    EXPECT_RPMA(rpma_conn_next_event(rig_->client(), &event), RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
  }
  EXPECT_EQ(event, RPMA_CONN_UNDEFINED);
  // No private data was kept; the connection is still deletable.
  rpma_conn_private_data pdata{this, 7};
  EXPECT_RPMA(rpma_conn_get_private_data(rig_->client(), &pdata), 0);
  EXPECT_EQ(pdata.ptr, nullptr);
  EXPECT_EQ(pdata.len, 0);
  EXPECT_RPMA(rpma_conn_disconnect(rig_->client()), 0);
  EXPECT_RPMA(rpma_conn_delete(rig_->client_ptr()), 0);
}

// ---- Getters ----------------------------------------------------------------------------------

RPMA_TEST_F(ConnTest, ConnGetPrivateData_ConnOrPdataNull_ReturnsInval,
            RPMA_ROW("rpma_conn_get_private_data", "RPMA_E_INVAL", "conn or pdata is NULL")) {
  rpma_conn_private_data pdata{this, 7};
  EXPECT_RPMA(rpma_conn_get_private_data(nullptr, &pdata), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_get_private_data(rig_->client(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(pdata.ptr, this);
}

RPMA_TEST_F(ConnTest, ConnApplyRemotePeerCfg_ConnOrPcfgNull_ReturnsInval,
            RPMA_ROW("rpma_conn_apply_remote_peer_cfg", "RPMA_E_INVAL", "conn or pcfg are NULL")) {
  rpma_peer_cfg* pcfg = nullptr;
  ASSERT_RPMA(rpma_peer_cfg_new(&pcfg), 0);
  EXPECT_RPMA(rpma_conn_apply_remote_peer_cfg(nullptr, pcfg), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_apply_remote_peer_cfg(rig_->client(), nullptr), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_peer_cfg_delete(&pcfg), 0);
}

RPMA_TEST_F(ConnTest, ConnGetQpNum_ConnOrQpNumNull_ReturnsInval,
            RPMA_ROW("rpma_conn_get_qp_num", "RPMA_E_INVAL", "conn or qp_num is NULL")) {
  uint32_t qp_num = 12345;
  EXPECT_RPMA(rpma_conn_get_qp_num(nullptr, &qp_num), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_get_qp_num(rig_->client(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(qp_num, 12345u);
}

RPMA_TEST_F(ConnTest, ConnGetCq_ConnOrCqPtrNull_ReturnsInval,
            RPMA_ROW("rpma_conn_get_cq", "RPMA_E_INVAL", "conn or cq_ptr is NULL")) {
  rpma_cq* cq = reinterpret_cast<rpma_cq*>(this);
  EXPECT_RPMA(rpma_conn_get_cq(nullptr, &cq), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_get_cq(rig_->client(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(cq, reinterpret_cast<rpma_cq*>(this));
}

RPMA_TEST_F(ConnTest, ConnGetRcq_ConnOrRcqPtrNull_ReturnsInval,
            RPMA_ROW("rpma_conn_get_rcq", "RPMA_E_INVAL", "conn or rcq_ptr is NULL")) {
  rpma_cq* rcq = reinterpret_cast<rpma_cq*>(this);
  EXPECT_RPMA(rpma_conn_get_rcq(nullptr, &rcq), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_get_rcq(rig_->client(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(rcq, reinterpret_cast<rpma_cq*>(this));
}

// ---- rpma_conn_disconnect / rpma_conn_delete ----------------------------------------------------

RPMA_TEST_F(ConnTest, ConnDisconnect_ConnNull_ReturnsInval,
            RPMA_ROW("rpma_conn_disconnect", "RPMA_E_INVAL", "conn is NULL")) {
  EXPECT_RPMA(rpma_conn_disconnect(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(ConnTest, ConnDisconnect_RdmaDisconnectFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_disconnect", "RPMA_E_PROVIDER", "rdma_disconnect() failed")) {
  {
    ARM_FAULTS(faults, "rdma_disconnect:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_conn_disconnect(rig_->client()), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("rdma_disconnect"), 1u);
  }
  // Still connected (a write completes), and disconnecting again works: both sides close.
  CompleteOnCq();
  rpma_cq* cq = nullptr;
  ASSERT_RPMA(rpma_conn_get_cq(rig_->client(), &cq), 0);
  int fd = -1;
  ASSERT_RPMA(rpma_cq_get_fd(cq, &fd), 0);
  ASSERT_TRUE(Readable(fd));
  ExpectOneCompletion(cq, IBV_WC_RDMA_WRITE);
  ASSERT_RPMA(rpma_conn_disconnect(rig_->client()), 0);
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  EXPECT_RPMA(Rig::NextEvent(rig_->server(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_CLOSED);
}

RPMA_TEST_F(ConnTest, ConnDelete_ConnPtrNull_ReturnsInval,
            RPMA_ROW("rpma_conn_delete", "RPMA_E_INVAL", "conn_ptr is NULL or munmap() failed")) {
  EXPECT_RPMA(rpma_conn_delete(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(ConnTest, ConnDelete_NoMunmapInvolved_MunmapCannotFail,
            RPMA_ROW_NOT_IN_DESIGN("rpma_conn_delete", "RPMA_E_INVAL",
                                   "conn_ptr is NULL or munmap() failed",
                                   "softrpma maps no memory for a connection: deleting one "
                                   "calls no munmap(), so \"munmap() failed\" cannot occur")) {
  {
    // The counter sees this process's munmap calls.
    MunmapCounter counter;
    void* page = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(page, MAP_FAILED);
    ASSERT_EQ(munmap(page, 4096), 0);
    ASSERT_EQ(counter.calls(), 1u);
  }
  ASSERT_RPMA(rpma_conn_disconnect(rig_->client()), 0);
  MunmapCounter counter;
  EXPECT_RPMA(rpma_conn_delete(rig_->client_ptr()), 0);
  EXPECT_RPMA(rpma_conn_delete(rig_->server_ptr()), 0);
  EXPECT_EQ(counter.calls(), 0u);
}

RPMA_TEST_F(ConnTest, ConnDelete_DestroyCqFails_ReturnsProviderAndFreesTheConnection,
            RPMA_ROW("rpma_conn_delete", "RPMA_E_PROVIDER",
                     "ibv_destroy_cq() or rdma_destroy_id() failed")) {
  // The provider's CQ whose destruction fails can never be freed (rpma_conn_delete frees the
  // connection whatever happens, as librpma does); the simulated NIC holds on to it: no leak.
  ASSERT_RPMA(rpma_conn_disconnect(rig_->client()), 0);
  {
    ARM_FAULTS(faults, "ibv_destroy_cq:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_conn_delete(rig_->client_ptr()), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_destroy_cq"), 1u);
  }
  EXPECT_EQ(rig_->client(), nullptr);
}

RPMA_TEST_F(ConnTest, ConnDelete_DestroyIdFails_ReturnsProviderAndFreesTheConnection,
            RPMA_ROW("rpma_conn_delete", "RPMA_E_PROVIDER",
                     "ibv_destroy_cq() or rdma_destroy_id() failed")) {
  ASSERT_RPMA(rpma_conn_disconnect(rig_->client()), 0);
  {
    ARM_FAULTS(faults, "rdma_destroy_id:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_conn_delete(rig_->client_ptr()), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("rdma_destroy_id"), 1u);
  }
  EXPECT_EQ(rig_->client(), nullptr);
}

// ---- Completion channel: rpma_conn_get_compl_fd / rpma_conn_wait ------------------------------

RPMA_TEST_F(ConnSharedChannelTest, ConnGetComplFd_ConnOrFdNull_ReturnsInval,
            RPMA_ROW("rpma_conn_get_compl_fd", "RPMA_E_INVAL", "conn or fd is NULL")) {
  int fd = -12345;
  EXPECT_RPMA(rpma_conn_get_compl_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_get_compl_fd(rig_->client(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(fd, -12345);
}

RPMA_TEST_F(ConnTest, ConnGetComplFd_ChannelNotShared_ReturnsNotSharedChnl,
            RPMA_ROW("rpma_conn_get_compl_fd", "RPMA_E_NOT_SHARED_CHNL",
                     "the completion event channel is not shared")) {
  int fd = -12345;
  EXPECT_RPMA(rpma_conn_get_compl_fd(rig_->client(), &fd), RPMA_E_NOT_SHARED_CHNL);
  EXPECT_EQ(fd, -12345);
}

RPMA_TEST_F(ConnSharedChannelTest, ConnWait_ConnOrCqNull_ReturnsInval,
            RPMA_ROW("rpma_conn_wait", "RPMA_E_INVAL", "conn or cq are NULL")) {
  rpma_cq* cq = nullptr;
  bool is_rcq = false;
  EXPECT_RPMA(rpma_conn_wait(nullptr, 0, &cq, &is_rcq), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_conn_wait(rig_->client(), 0, nullptr, &is_rcq), RPMA_E_INVAL);
  EXPECT_EQ(cq, nullptr);
}

RPMA_TEST_F(ConnTest, ConnWait_ChannelNotShared_ReturnsNotSharedChnl,
            RPMA_ROW("rpma_conn_wait", "RPMA_E_NOT_SHARED_CHNL",
                     "the completion event channel is not shared")) {
  CompleteOnCq();  // an event is there on the CQ's own channel: the call must not take it
  rpma_cq* cq = nullptr;
  EXPECT_RPMA(rpma_conn_wait(rig_->client(), 0, &cq, nullptr), RPMA_E_NOT_SHARED_CHNL);
  EXPECT_EQ(cq, nullptr);
  rpma_cq* own = nullptr;
  ASSERT_RPMA(rpma_conn_get_cq(rig_->client(), &own), 0);
  int fd = -1;
  ASSERT_RPMA(rpma_cq_get_fd(own, &fd), 0);
  ASSERT_TRUE(Readable(fd));
  EXPECT_RPMA(rpma_cq_wait(own), 0);
  ExpectOneCompletion(own, IBV_WC_RDMA_WRITE);
}

RPMA_TEST_F(ConnSharedChannelTest, ConnWait_GetCqEventFails_ReturnsNoCompletion,
            RPMA_ROW("rpma_conn_wait", "RPMA_E_NO_COMPLETION", "ibv_get_cq_event(3) failed")) {
  CompleteOnCq();
  ASSERT_TRUE(Readable(compl_fd_));
  rpma_cq* cq = nullptr;
  {
    ARM_FAULTS(faults, "ibv_get_cq_event:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_conn_wait(rig_->client(), 0, &cq, nullptr), RPMA_E_NO_COMPLETION);
    EXPECT_EQ(FaultInjections("ibv_get_cq_event"), 1u);
  }
  EXPECT_EQ(cq, nullptr);
  // The event was not consumed: the connection goes on.
  ASSERT_TRUE(Readable(compl_fd_));
  ASSERT_RPMA(rpma_conn_wait(rig_->client(), 0, &cq, nullptr), 0);
  EXPECT_EQ(cq, cq_);
  ExpectOneCompletion(cq, IBV_WC_RDMA_WRITE);
}

RPMA_TEST_F(ConnSharedChannelTest, ConnWait_GetCqEventReturnsUnknownCq_ReturnsUnknown,
            RPMA_ROW("rpma_conn_wait", "RPMA_E_UNKNOWN",
                     "ibv_get_cq_event(3) returned unknown CQ")) {
  CompleteOnCq();
  ASSERT_TRUE(Readable(compl_fd_));
  rpma_cq* cq = cq_;
  {
    ARM_FAULTS(faults, "ibv_get_cq_event:unknown_cq:nth=1");
    EXPECT_RPMA(rpma_conn_wait(rig_->client(), 0, &cq, nullptr), RPMA_E_UNKNOWN);
    EXPECT_EQ(FaultInjections("ibv_get_cq_event"), 1u);
  }
  EXPECT_EQ(cq, nullptr);
  // The real event is still queued and the completion collectable.
  ASSERT_TRUE(Readable(compl_fd_));
  ASSERT_RPMA(rpma_conn_wait(rig_->client(), 0, &cq, nullptr), 0);
  EXPECT_EQ(cq, cq_);
  ExpectOneCompletion(cq_, IBV_WC_RDMA_WRITE);
}

RPMA_TEST_F(ConnSharedChannelTest, ConnWait_ReqNotifyCqFails_ReturnsProvider,
            RPMA_ROW("rpma_conn_wait", "RPMA_E_PROVIDER", "ibv_req_notify_cq(3) failed")) {
  CompleteOnRcq();
  ASSERT_TRUE(Readable(compl_fd_));
  rpma_cq* cq = rcq_;
  bool is_rcq = false;
  {
    ARM_FAULTS(faults, "ibv_req_notify_cq:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_conn_wait(rig_->client(), 0, &cq, &is_rcq), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("ibv_req_notify_cq"), 1u);
  }
  EXPECT_EQ(cq, nullptr);
  // The completion is still collectable; the connection deletes cleanly.
  ExpectOneCompletion(rcq_, IBV_WC_RECV);
  ASSERT_RPMA(rpma_conn_disconnect(rig_->client()), 0);
  EXPECT_RPMA(rpma_conn_delete(rig_->client_ptr()), 0);
}

}  // namespace
}  // namespace softrpma::conformance
