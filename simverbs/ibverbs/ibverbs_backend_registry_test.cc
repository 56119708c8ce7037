// Tests that the backend registry hands out the ibverbs backend as GetIbverbsBackend() does:
// by name and through RPMA_BACKEND=ibverbs.

#include <infiniband/verbs.h>

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/backend_registry.h"
#include "simverbs/ibverbs/ibverbs_backend.h"

namespace softrpma {
namespace {

// Whether libibverbs lists at least one RDMA device, asked directly.
bool RdmaDeviceExists() {
  int num_devices = 0;
  ibv_device** list = ::ibv_get_device_list(&num_devices);
  if (list == nullptr) return false;
  ::ibv_free_device_list(list);
  return num_devices > 0;
}

TEST(BackendByName, Ibverbs_NoDevice_ReturnsTheSameFailedPrecondition) {
  if (RdmaDeviceExists()) GTEST_SKIP() << "an RDMA device exists: the no-device case cannot run";

  absl::StatusOr<Backend*> by_name = BackendByName("ibverbs");

  EXPECT_EQ(by_name.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(by_name.status(), ibverbs::GetIbverbsBackend().status());
}

TEST(SelectedBackend, RpmaBackendIbverbs_NoDevice_ReturnsTheSameFailedPrecondition) {
  if (RdmaDeviceExists()) GTEST_SKIP() << "an RDMA device exists: the no-device case cannot run";
  const char* previous_value = std::getenv(kBackendEnvVar);
  const bool was_set = previous_value != nullptr;
  const std::string previous = was_set ? previous_value : "";
  ASSERT_EQ(setenv(kBackendEnvVar, "ibverbs", /*overwrite=*/1), 0);

  absl::StatusOr<Backend*> selected = SelectedBackend();

  if (was_set) {
    setenv(kBackendEnvVar, previous.c_str(), /*overwrite=*/1);
  } else {
    unsetenv(kBackendEnvVar);
  }
  EXPECT_EQ(selected.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(selected.status(), ibverbs::GetIbverbsBackend().status());
}

TEST(BackendByName, Ibverbs_WithDevice_ReturnsTheIbverbsBackend) {
  if (!RdmaDeviceExists()) GTEST_SKIP() << "no RDMA device (see simverbs/ibverbs/README.md)";

  absl::StatusOr<Backend*> by_name = BackendByName("ibverbs");
  absl::StatusOr<Backend*> direct = ibverbs::GetIbverbsBackend();

  ASSERT_TRUE(by_name.ok()) << by_name.status();
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(*by_name, *direct);
  EXPECT_STREQ((*by_name)->Name(), "ibverbs");
}

}  // namespace
}  // namespace softrpma
