// conformance_test.h: the base fixture and helpers of the conformance tests
// (tests/conformance/*_test.cc): every test runs on the simulated NIC through the public API
// (librpma.h); sim-only controls (faults, ODP) come from simverbs/sim/sim_control.h.
//
// Rules the helpers enforce: the fault plan is process-wide, so it is armed right around the
// call under test (ARM_FAULTS in an inner scope) and cleared by every test's SetUp/TearDown;
// nothing blocks without a bound (Readable() before a blocking call).

#ifndef SOFTRPMA_TESTS_CONFORMANCE_TESTING_CONFORMANCE_TEST_H_
#define SOFTRPMA_TESTS_CONFORMANCE_TESTING_CONFORMANCE_TEST_H_

#include <cstdint>
#include <functional>
#include <string>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "tests/conformance/coverage.h"

namespace softrpma::conformance {

// The address every test's device, endpoint and connections use.
inline constexpr char kAddress[] = "127.0.0.1";

// Returned by the helpers that wait for an fd when it did not become readable in time (no
// RPMA_E_* code has this value).
inline constexpr int kWaitTimedOut = -424242;

// Clears the fault plan and turns on-demand paging off before and after every test, and starts
// the simulator (rpma_utils_get_ibv_context) before it, so that a "malloc" fault armed by the
// test never hits the simulator's start-up.
class ConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
};

// "RPMA_E_INVAL" for RPMA_E_INVAL, "0" for success, the number for anything else.
std::string RpmaCodeName(int code);

// gtest predicate-formatter: actual == expected, printed with RpmaCodeName().
::testing::AssertionResult RpmaCodeEq(const char* actual_text, const char* expected_text,
                                      int actual, int expected);

// A port no other listener of this process uses (counts up from 30000).
std::string NextPort();

// The device of kAddress (rpma_utils_get_ibv_context, LOCAL). Returns 0 or the RPMA_E_* code.
int GetLocalDevice(ibv_context** dev);

// True when `fd` becomes readable within 10 s: every blocking call is preceded by this, so a
// test fails instead of hanging.
bool Readable(int fd);

// Makes `fd` non-blocking. Returns false (and the test should fail) when fcntl fails.
bool SetNonBlocking(int fd);

// Hits / injections of a fault point under the current plan (0 for an unknown point, which
// fails the calling test).
uint64_t FaultHits(const char* point);
uint64_t FaultInjections(const char* point);

// The number of softrpma allocations (softrpma::New, the "malloc" fault point) that `call`
// makes, counted under a plan that injects nothing. REQUIRES: no plan armed.
uint64_t CountAllocations(const std::function<void()>& call);

// Every object the `create` point made under the current plan was released through the
// `destroy` point: hits(destroy) == hits(create) - injections(create), and no destroy failed.
::testing::AssertionResult AllReleased(const char* create, const char* destroy);

}  // namespace softrpma::conformance

// EXPECT / ASSERT that `expr` returns the RPMA_E_* `code` (0 for success).
#define EXPECT_RPMA(expr, code) EXPECT_PRED_FORMAT2(::softrpma::conformance::RpmaCodeEq, expr, code)
#define ASSERT_RPMA(expr, code) ASSERT_PRED_FORMAT2(::softrpma::conformance::RpmaCodeEq, expr, code)

// Installs the fault plan `spec` until the end of the enclosing scope (fails the test when the
// spec does not parse).
#define ARM_FAULTS(var, spec)                 \
  ::softrpma::sim::ScopedFaultPlan var(spec); \
  ASSERT_TRUE(var.status().ok()) << var.status()

#endif  // SOFTRPMA_TESTS_CONFORMANCE_TESTING_CONFORMANCE_TEST_H_
