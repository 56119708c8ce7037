// test_env.h: what every end-to-end test needs to know about where it runs (the address, the
// backend) and to say what a librpma call returned. For tests only.

#ifndef SOFTRPMA_TESTS_TESTING_TEST_ENV_H_
#define SOFTRPMA_TESTS_TESTING_TEST_ENV_H_

#include <string>

namespace softrpma::testing {

// The address tests connect on: $SOFTRPMA_TEST_ADDR, or 127.0.0.1. On the simulated NIC every
// address works; on a real NIC (RPMA_BACKEND=ibverbs) it must be an address of the RDMA device,
// e.g. the IP of the interface Soft-RoCE is bound to.
const char* TestAddress();

// True when the tests run on the simulated NIC (RPMA_BACKEND unset or "sim"). Tests that need
// the simulator's controls (fault injection) skip themselves otherwise:
//   if (!SimulatedNicSelected()) GTEST_SKIP() << kNeedsSimulatedNic;
bool SimulatedNicSelected();
inline constexpr char kNeedsSimulatedNic[] =
    "needs the simulated NIC's fault injection (RPMA_BACKEND=sim)";

// The name of an RPMA_E_* code ("RPMA_E_INVAL"), or the number for anything else: for test
// failure messages.
std::string RpmaErrorName(int code);

}  // namespace softrpma::testing

#endif  // SOFTRPMA_TESTS_TESTING_TEST_ENV_H_
