// Tests of GetIbverbsBackend(): without an RDMA device (this project's CI machines) it fails
// with a message that says how to get one; with a device, the backend's verbs calls work.
// Each test skips, saying why, where it cannot run.

#include "simverbs/ibverbs/ibverbs_backend.h"

#include <infiniband/verbs.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"

namespace softrpma::ibverbs {
namespace {

using ::testing::HasSubstr;

// How many RDMA devices libibverbs lists (0 when it cannot list them), asked directly.
int CountRdmaDevices() {
  int num_devices = 0;
  ibv_device** list = ::ibv_get_device_list(&num_devices);
  if (list == nullptr) return 0;
  ::ibv_free_device_list(list);
  return num_devices;
}

TEST(GetIbverbsBackend, NoDevice_ReturnsFailedPreconditionThatSaysWhatToDo) {
  if (CountRdmaDevices() > 0) GTEST_SKIP() << "an RDMA device exists: no-device case cannot run";

  absl::StatusOr<Backend*> backend = GetIbverbsBackend();

  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(backend.status().message(), HasSubstr("no RDMA device was found"));
  EXPECT_THAT(backend.status().message(), HasSubstr("rdma link add rxe0 type rxe netdev <if>"));
  EXPECT_THAT(backend.status().message(), HasSubstr("RPMA_BACKEND=sim"));
}

TEST(GetIbverbsBackend, NoDevice_SecondCallFailsTheSameWay) {
  if (CountRdmaDevices() > 0) GTEST_SKIP() << "an RDMA device exists: no-device case cannot run";

  absl::StatusOr<Backend*> first = GetIbverbsBackend();
  absl::StatusOr<Backend*> second = GetIbverbsBackend();

  EXPECT_EQ(first.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status(), first.status());
}

// Opens the first RDMA device for the duration of a test, or skips the test when there is none.
class IbverbsDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int num_devices = 0;
    ibv_device** list = ::ibv_get_device_list(&num_devices);
    if (list == nullptr || num_devices == 0) {
      if (list != nullptr) ::ibv_free_device_list(list);
      GTEST_SKIP() << "no RDMA device (set up Soft-RoCE as simverbs/ibverbs/README.md says to run "
                      "this test)";
    }
    ctx_ = ::ibv_open_device(list[0]);
    ::ibv_free_device_list(list);
    ASSERT_NE(ctx_, nullptr) << "ibv_open_device failed on the first device";
  }
  void TearDown() override {
    if (ctx_ != nullptr) ::ibv_close_device(ctx_);
  }

  ibv_context* ctx_ = nullptr;
};

TEST_F(IbverbsDeviceTest, GetIbverbsBackend_WithDevice_ReturnsTheSameBackendEachTime) {
  absl::StatusOr<Backend*> first = GetIbverbsBackend();
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<Backend*> second = GetIbverbsBackend();
  ASSERT_TRUE(second.ok()) << second.status();

  EXPECT_EQ(*first, *second);
  EXPECT_STREQ((*first)->Name(), "ibverbs");
}

TEST_F(IbverbsDeviceTest, IbvAllocPdThenIbvDeallocPd_Succeed) {
  absl::StatusOr<Backend*> backend = GetIbverbsBackend();
  ASSERT_TRUE(backend.ok()) << backend.status();

  ibv_pd* pd = nullptr;
  ASSERT_EQ((*backend)->IbvAllocPd(ctx_, &pd), 0);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(pd->context, ctx_);
  EXPECT_EQ((*backend)->IbvDeallocPd(pd), 0);
}

// The pass-through of ibv_create_cq_ex: the provider's extended CQ, polled through its own ops
// and through IbvPollCq on ibv_cq_ex_to_cq, destroyed by IbvDestroyCq. (Only the success path:
// which errno an undefined wc_flags bit gives differs between providers.)
TEST_F(IbverbsDeviceTest, IbvCreateCqEx_EmptyCqPolledBothWays_ThenIbvDestroyCq) {
  absl::StatusOr<Backend*> backend = GetIbverbsBackend();
  ASSERT_TRUE(backend.ok()) << backend.status();
  ibv_cq_init_attr_ex attr = {};
  attr.cqe = 4;
  attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM;
  ibv_cq_ex* cq = nullptr;

  ASSERT_EQ((*backend)->IbvCreateCqEx(ctx_, &attr, &cq), 0);

  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(cq->context, ctx_);
  EXPECT_GE(cq->cqe, 4);
  ibv_poll_cq_attr poll_attr = {};
  EXPECT_EQ(ibv_start_poll(cq, &poll_attr), ENOENT);
  ibv_wc wc;
  int polled = -1;
  EXPECT_EQ((*backend)->IbvPollCq(ibv_cq_ex_to_cq(cq), 1, &wc, &polled), 0);
  EXPECT_EQ(polled, 0);
  EXPECT_EQ((*backend)->IbvDestroyCq(ibv_cq_ex_to_cq(cq)), 0);
}

}  // namespace
}  // namespace softrpma::ibverbs
