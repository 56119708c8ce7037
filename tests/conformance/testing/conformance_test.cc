#include "tests/conformance/testing/conformance_test.h"

#include <fcntl.h>
#include <poll.h>

#include <atomic>

#include "tests/testing/test_env.h"

namespace softrpma::conformance {

void ConformanceTest::SetUp() {
  sim::ClearFaultPlan();
  sim::SetOdpSupported(false);
  ibv_context* dev = nullptr;
  ASSERT_RPMA(GetLocalDevice(&dev), 0) << "the simulator does not start";
}

void ConformanceTest::TearDown() {
  sim::ClearFaultPlan();
  sim::SetOdpSupported(false);
}

std::string RpmaCodeName(int code) {
  if (code == kWaitTimedOut) return "(timed out waiting for the fd)";
  return softrpma::testing::RpmaErrorName(code);
}

::testing::AssertionResult RpmaCodeEq(const char* actual_text, const char* expected_text,
                                      int actual, int expected) {
  if (actual == expected) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual_text << " returned " << RpmaCodeName(actual)
                                       << ", expected " << RpmaCodeName(expected);
}

std::string NextPort() {
  static std::atomic<int> next{30000};
  return std::to_string(next.fetch_add(1));
}

int GetLocalDevice(ibv_context** dev) {
  return rpma_utils_get_ibv_context(kAddress, RPMA_UTIL_IBV_CONTEXT_LOCAL, dev);
}

bool Readable(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  return poll(&pfd, 1, /*timeout_ms=*/10000) == 1 && (pfd.revents & POLLIN) != 0;
}

bool SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

uint64_t FaultHits(const char* point) {
  absl::StatusOr<uint64_t> hits = sim::FaultHitCount(point);
  EXPECT_TRUE(hits.ok()) << hits.status();
  return hits.value_or(0);
}

uint64_t FaultInjections(const char* point) {
  absl::StatusOr<uint64_t> injections = sim::FaultInjectionCount(point);
  EXPECT_TRUE(injections.ok()) << injections.status();
  return injections.value_or(0);
}

uint64_t CountAllocations(const std::function<void()>& call) {
  // A malloc rule is what makes the plan count allocations; this one never fires.
  sim::ScopedFaultPlan counting("malloc:fail=ENOMEM:nth=1000000000");
  EXPECT_TRUE(counting.status().ok()) << counting.status();
  call();
  return FaultHits("malloc");
}

::testing::AssertionResult AllReleased(const char* create, const char* destroy) {
  const uint64_t made = FaultHits(create) - FaultInjections(create);
  const uint64_t released = FaultHits(destroy);
  if (made == released && FaultInjections(destroy) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << made << " made by " << create << ", " << released << " released by " << destroy << " ("
         << FaultInjections(destroy) << " of them failed)";
}

}  // namespace softrpma::conformance
