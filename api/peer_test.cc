// Tests of rpma_peer_new(3) and rpma_peer_delete(3), on a mock backend.

#include <cerrno>

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
using ::testing::NiceMock;
using ::testing::Return;

class PeerTest : public ::testing::Test {
 protected:
  NiceMock<MockBackend> backend_;
  FakeProvider fake_{&backend_};
};

// As librpma (peer.c): the device's capabilities are queried before the PD is made, once for
// native atomic write and once for on-demand paging.
TEST_F(PeerTest, PeerNew_QueriesTheDeviceThenAllocatesThePd) {
  {
    ::testing::InSequence in_order;
    EXPECT_CALL(backend_, IbvQueryDeviceEx(fake_.Context(), _)).Times(2);
    EXPECT_CALL(backend_, IbvAllocPd(fake_.Context(), _));
  }
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(fake_.Context(), &peer), 0);
  ASSERT_EQ(rpma_peer_delete(&peer), 0);
}

TEST_F(PeerTest, PeerNew_QueryDeviceFails_ReturnsProvider) {
  EXPECT_CALL(backend_, IbvQueryDeviceEx(_, _)).WillOnce(Return(EIO));
  EXPECT_CALL(backend_, IbvAllocPd(_, _)).Times(0);
  rpma_peer* peer = nullptr;
  EXPECT_EQ(rpma_peer_new(fake_.Context(), &peer), RPMA_E_PROVIDER);
  EXPECT_EQ(peer, nullptr);
}

TEST_F(PeerTest, PeerNew_SecondQueryDeviceFails_ReturnsProvider) {
  EXPECT_CALL(backend_, IbvQueryDeviceEx(_, _)).WillOnce(Return(0)).WillOnce(Return(EIO));
  EXPECT_CALL(backend_, IbvAllocPd(_, _)).Times(0);
  rpma_peer* peer = nullptr;
  EXPECT_EQ(rpma_peer_new(fake_.Context(), &peer), RPMA_E_PROVIDER);
  EXPECT_EQ(peer, nullptr);
}

TEST_F(PeerTest, PeerNew_NullCtx_ReturnsInval) {
  rpma_peer* peer = nullptr;
  EXPECT_EQ(rpma_peer_new(nullptr, &peer), RPMA_E_INVAL);
}

TEST_F(PeerTest, PeerNew_NullPeerPtr_ReturnsInval) {
  EXPECT_EQ(rpma_peer_new(fake_.Context(), nullptr), RPMA_E_INVAL);
}

TEST_F(PeerTest, PeerNew_PdEnomem_ReturnsNomem) {
  EXPECT_CALL(backend_, IbvAllocPd(fake_.Context(), _)).WillOnce(Return(ENOMEM));
  rpma_peer* peer = nullptr;
  EXPECT_EQ(rpma_peer_new(fake_.Context(), &peer), RPMA_E_NOMEM);
  EXPECT_EQ(peer, nullptr);
}

TEST_F(PeerTest, PeerNew_PdOtherErrno_ReturnsProviderAndLogs) {
  ScopedLogCapture capture;
  EXPECT_CALL(backend_, IbvAllocPd(_, _)).WillOnce(Return(EINVAL));
  rpma_peer* peer = nullptr;
  EXPECT_EQ(rpma_peer_new(fake_.Context(), &peer), RPMA_E_PROVIDER);
  EXPECT_EQ(peer, nullptr);
  ASSERT_EQ(capture.logs().size(), 1u) << capture.Dump();
  EXPECT_EQ(capture.logs()[0].function, "rpma_peer_new");
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "ibv_alloc_pd() failed")) << capture.Dump();
  EXPECT_TRUE(capture.Contains(RPMA_LOG_LEVEL_ERROR, "errno 22")) << capture.Dump();
}

TEST_F(PeerTest, PeerNew_PdNoErrno_ReturnsUnknown) {
  EXPECT_CALL(backend_, IbvAllocPd(_, _)).WillOnce(Return(softrpma::kNoErrno));
  rpma_peer* peer = nullptr;
  EXPECT_EQ(rpma_peer_new(fake_.Context(), &peer), RPMA_E_UNKNOWN);
}

TEST_F(PeerTest, PeerNew_OutOfMemory_ReturnsNomem_AndReleasesPd) {
  EXPECT_CALL(backend_, IbvDeallocPd(_));
  rpma_peer* peer = nullptr;
  ScopedAllocFailure fail;
  EXPECT_EQ(rpma_peer_new(fake_.Context(), &peer), RPMA_E_NOMEM);
  EXPECT_EQ(peer, nullptr);
}

TEST_F(PeerTest, PeerNewDelete_Succeed) {
  EXPECT_CALL(backend_, IbvAllocPd(fake_.Context(), _));
  EXPECT_CALL(backend_, IbvDeallocPd(_));
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(fake_.Context(), &peer), 0);
  ASSERT_NE(peer, nullptr);
  ASSERT_EQ(rpma_peer_delete(&peer), 0);
  EXPECT_EQ(peer, nullptr);
}

// As librpma (peer.c): the peer is freed and the pointer cleared even when the PD is not.
TEST_F(PeerTest, PeerDelete_DeallocFails_ReturnsProvider_AndReleasesPeer) {
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(fake_.Context(), &peer), 0);
  EXPECT_CALL(backend_, IbvDeallocPd(_)).WillOnce(Return(EBUSY));
  EXPECT_EQ(rpma_peer_delete(&peer), RPMA_E_PROVIDER);
  EXPECT_EQ(peer, nullptr);
}

TEST_F(PeerTest, PeerDelete_NullPeer_Succeeds) {
  rpma_peer* peer = nullptr;
  EXPECT_EQ(rpma_peer_delete(&peer), 0);
}

// The man page is silent; librpma returns RPMA_E_INVAL, as for every other delete.
TEST_F(PeerTest, PeerDelete_NullPeerPtr_ReturnsInval) {
  EXPECT_EQ(rpma_peer_delete(nullptr), RPMA_E_INVAL);
}

}  // namespace
