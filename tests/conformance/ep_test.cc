// Conformance of listening endpoints (rpma_ep_listen(3), rpma_ep_shutdown(3),
// rpma_ep_get_fd(3), rpma_ep_next_conn_req(3)): one test per ERRORS line (rows of
// rpma-errors.tsv), through the public API on the simulated NIC.

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/backend_registry.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"
#include "tests/conformance/testing/cm_event_injector.h"
#include "tests/conformance/testing/conformance_test.h"
#include "tests/conformance/testing/rig.h"
#include "tests/conformance/testing/rig_test.h"

namespace softrpma::conformance {
namespace {

class EpTest : public RigTest {
 protected:
  // rpma_ep_listen under `fault_spec` returns `expected`, writes no endpoint and leaves nothing
  // behind: the ids and event channels it made are released, and the port is free again.
  void ExpectListenFails(const char* fault_spec, const char* fault_point, int expected) {
    const std::string port = NextPort();
    rpma_ep* ep = nullptr;
    {
      ARM_FAULTS(faults, fault_spec);
      EXPECT_RPMA(rpma_ep_listen(rig_->peer(), kAddress, port.c_str(), &ep), expected);
      EXPECT_EQ(FaultInjections(fault_point), 1u);
      if (std::string(fault_point) != "malloc") {
        EXPECT_TRUE(AllReleased("rdma_create_id", "rdma_destroy_id"));
        EXPECT_TRUE(AllReleased("rdma_create_event_channel", "rdma_destroy_event_channel"));
        EXPECT_TRUE(AllReleased("rdma_getaddrinfo", "rdma_freeaddrinfo"));
      }
    }
    EXPECT_EQ(ep, nullptr);
    EXPECT_RPMA(rpma_ep_listen(rig_->peer(), kAddress, port.c_str(), &ep), 0);
    EXPECT_RPMA(rpma_ep_shutdown(&ep), 0);
  }
};

// ---- rpma_ep_listen -------------------------------------------------------------------------

RPMA_TEST_F(EpTest, EpListen_PeerAddrPortOrEpPtrNull_ReturnsInval,
            RPMA_ROW("rpma_ep_listen", "RPMA_E_INVAL", "peer, addr, port or ep_ptr is NULL")) {
  const std::string port = NextPort();
  rpma_ep* ep = nullptr;
  EXPECT_RPMA(rpma_ep_listen(nullptr, kAddress, port.c_str(), &ep), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_ep_listen(rig_->peer(), nullptr, port.c_str(), &ep), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_ep_listen(rig_->peer(), kAddress, nullptr, &ep), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_ep_listen(rig_->peer(), kAddress, port.c_str(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(ep, nullptr);
}

RPMA_TEST_F(EpTest, EpListen_CreateEventChannelFails_ReturnsProvider,
            RPMA_ROW("rpma_ep_listen", "RPMA_E_PROVIDER",
                     "rdma_create_event_channel(3), rdma_create_id(3), rdma_getaddrinfo(3), "
                     "rdma_listen(3) failed")) {
  ExpectListenFails("rdma_create_event_channel:fail=EMFILE:nth=1", "rdma_create_event_channel",
                    RPMA_E_PROVIDER);
}

RPMA_TEST_F(EpTest, EpListen_CreateIdFails_ReturnsProvider,
            RPMA_ROW("rpma_ep_listen", "RPMA_E_PROVIDER",
                     "rdma_create_event_channel(3), rdma_create_id(3), rdma_getaddrinfo(3), "
                     "rdma_listen(3) failed")) {
  ExpectListenFails("rdma_create_id:fail=EIO:nth=1", "rdma_create_id", RPMA_E_PROVIDER);
}

RPMA_TEST_F(EpTest, EpListen_GetaddrinfoFails_ReturnsProvider,
            RPMA_ROW("rpma_ep_listen", "RPMA_E_PROVIDER",
                     "rdma_create_event_channel(3), rdma_create_id(3), rdma_getaddrinfo(3), "
                     "rdma_listen(3) failed")) {
  ExpectListenFails("rdma_getaddrinfo:fail=EADDRNOTAVAIL:nth=1", "rdma_getaddrinfo",
                    RPMA_E_PROVIDER);
}

RPMA_TEST_F(EpTest, EpListen_ListenFails_ReturnsProvider,
            RPMA_ROW("rpma_ep_listen", "RPMA_E_PROVIDER",
                     "rdma_create_event_channel(3), rdma_create_id(3), rdma_getaddrinfo(3), "
                     "rdma_listen(3) failed")) {
  ExpectListenFails("rdma_listen:fail=EADDRINUSE:nth=1", "rdma_listen", RPMA_E_PROVIDER);
}

RPMA_TEST_F(EpTest, EpListen_OutOfMemory_ReturnsNomem,
            RPMA_ROW("rpma_ep_listen", "RPMA_E_NOMEM", "out of memory")) {
  ExpectListenFails("malloc:fail=ENOMEM:nth=1", "malloc", RPMA_E_NOMEM);
}

// ---- rpma_ep_shutdown / rpma_ep_get_fd --------------------------------------------------------

RPMA_TEST_F(EpTest, EpShutdown_EpPtrNull_ReturnsInval,
            RPMA_ROW("rpma_ep_shutdown", "RPMA_E_INVAL", "ep_ptr is NULL")) {
  EXPECT_RPMA(rpma_ep_shutdown(nullptr), RPMA_E_INVAL);
}

RPMA_TEST_F(EpTest, EpShutdown_DestroyIdFails_ReturnsProviderAndReleasesTheEndpoint,
            RPMA_ROW("rpma_ep_shutdown", "RPMA_E_PROVIDER", "rdma_destroy_id(3) failed")) {
  // As librpma: the endpoint is released and *ep_ptr cleared although the provider keeps the
  // listening id (the simulated NIC holds on to it: no leak).
  ASSERT_RPMA(rig_->Listen(), 0);
  {
    ARM_FAULTS(faults, "rdma_destroy_id:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_ep_shutdown(rig_->ep_ptr()), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("rdma_destroy_id"), 1u);
  }
  EXPECT_EQ(rig_->ep(), nullptr);
}

RPMA_TEST_F(EpTest, EpGetFd_EpOrFdNull_ReturnsInval,
            RPMA_ROW("rpma_ep_get_fd", "RPMA_E_INVAL", "ep or fd is NULL")) {
  ASSERT_RPMA(rig_->Listen(), 0);
  int fd = -12345;
  EXPECT_RPMA(rpma_ep_get_fd(nullptr, &fd), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_ep_get_fd(rig_->ep(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(fd, -12345);
}

// ---- rpma_ep_next_conn_req ------------------------------------------------------------------

class EpNextConnReqTest : public EpTest {
 protected:
  // Listening, with a client's connection request waiting on the endpoint's fd.
  void SetUp() override {
    EpTest::SetUp();
    ASSERT_RPMA(rig_->Listen(), 0);
    ASSERT_RPMA(rig_->ConnectClient(), 0);
    int fd = -1;
    ASSERT_RPMA(rpma_ep_get_fd(rig_->ep(), &fd), 0);
    ASSERT_TRUE(Readable(fd));
  }
};

RPMA_TEST_F(EpNextConnReqTest, EpNextConnReq_EpOrReqPtrNull_ReturnsInval,
            RPMA_ROW("rpma_ep_next_conn_req", "RPMA_E_INVAL", "ep or req_ptr is NULL")) {
  rpma_conn_req* req = nullptr;
  EXPECT_RPMA(rpma_ep_next_conn_req(nullptr, rig_->cfg(), &req), RPMA_E_INVAL);
  EXPECT_RPMA(rpma_ep_next_conn_req(rig_->ep(), rig_->cfg(), nullptr), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
  // The request is still there.
  EXPECT_RPMA(rig_->NextServerRequest(), 0);
}

RPMA_TEST_F(EpTest, EpNextConnReq_EventOtherThanConnectRequest_ReturnsInval,
            RPMA_ROW_NOTE("rpma_ep_next_conn_req", "RPMA_E_INVAL",
                          "obtained an event different than a connection request",
                          kInjectedEventNote)) {
  // The simulator never reports anything but connection requests to a listener; a real
  // provider also reports e.g. RDMA_CM_EVENT_ADDR_CHANGE. CmEventInjector stands for it.
  ScopedBackendOverride override(&CmEventInjector::Get());
  auto rig = Rig::Create();
  ASSERT_TRUE(rig.ok()) << rig.status();
  ASSERT_RPMA((*rig)->Listen(), 0);
  ASSERT_RPMA((*rig)->ConnectClient(), 0);

  CmEventInjector::Get().InjectNextCmEvent(RDMA_CM_EVENT_ADDR_CHANGE);
  rpma_conn_req* req = nullptr;
  EXPECT_RPMA(rpma_ep_next_conn_req((*rig)->ep(), (*rig)->cfg(), &req), RPMA_E_INVAL);
  EXPECT_EQ(req, nullptr);
  // The unexpected event was acknowledged, and the endpoint goes on with the real request.
  EXPECT_EQ(CmEventInjector::Get().UnackedInjectedEvents(), 0);
  EXPECT_RPMA((*rig)->NextServerRequest(), 0);
  EXPECT_NE((*rig)->server_req(), nullptr);
}

RPMA_TEST_F(EpNextConnReqTest, EpNextConnReq_GetCmEventFails_ReturnsProvider,
            RPMA_ROW("rpma_ep_next_conn_req", "RPMA_E_PROVIDER", "rdma_get_cm_event(3) failed")) {
  rpma_conn_req* req = nullptr;
  {
    ARM_FAULTS(faults, "rdma_get_cm_event:fail=EIO:nth=1");
    EXPECT_RPMA(rpma_ep_next_conn_req(rig_->ep(), rig_->cfg(), &req), RPMA_E_PROVIDER);
    EXPECT_EQ(FaultInjections("rdma_get_cm_event"), 1u);
  }
  EXPECT_EQ(req, nullptr);
  // The request stayed queued: the endpoint takes it now and the connection is made.
  ASSERT_RPMA(rig_->NextServerRequest(), 0);
  ASSERT_RPMA(rig_->AcceptServer(), 0);
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  EXPECT_RPMA(Rig::NextEvent(rig_->client(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_ESTABLISHED);
}

RPMA_TEST_F(EpNextConnReqTest, EpNextConnReq_OutOfMemory_ReturnsNomemAndRejects,
            RPMA_ROW("rpma_ep_next_conn_req", "RPMA_E_NOMEM", "out of memory")) {
  rpma_conn_req* req = nullptr;
  {
    // The call's first allocation is the provider's event (rdma_get_cm_event allocates it, as
    // librdmacm does: failing that one is a failed rdma_get_cm_event); the second is librpma's
    // connection request.
    ARM_FAULTS(faults, "malloc:fail=ENOMEM:nth=2");
    EXPECT_RPMA(rpma_ep_next_conn_req(rig_->ep(), rig_->cfg(), &req), RPMA_E_NOMEM);
    EXPECT_EQ(FaultInjections("malloc"), 1u);
  }
  EXPECT_EQ(req, nullptr);
  // The request that could not be taken was rejected: the client learns it.
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  EXPECT_RPMA(Rig::NextEvent(rig_->client(), &event), 0);
  EXPECT_EQ(event, RPMA_CONN_REJECTED);
}

RPMA_TEST_F(EpTest, EpNextConnReq_NoRequestOnNonBlockingFd_ReturnsNoEvent,
            RPMA_ROW("rpma_ep_next_conn_req", "RPMA_E_NO_EVENT",
                     "no next connection request available")) {
  ASSERT_RPMA(rig_->Listen(), 0);
  int fd = -1;
  ASSERT_RPMA(rpma_ep_get_fd(rig_->ep(), &fd), 0);
  ASSERT_TRUE(SetNonBlocking(fd));
  rpma_conn_req* req = nullptr;
  EXPECT_RPMA(rpma_ep_next_conn_req(rig_->ep(), rig_->cfg(), &req), RPMA_E_NO_EVENT);
  EXPECT_EQ(req, nullptr);
  // A request that arrives later is taken.
  ASSERT_RPMA(rig_->ConnectClient(), 0);
  EXPECT_RPMA(rig_->NextServerRequest(), 0);
}

}  // namespace
}  // namespace softrpma::conformance
