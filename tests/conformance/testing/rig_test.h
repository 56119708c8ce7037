// rig_test.h: RigTest, the fixture of the conformance tests that work on a Rig (rig.h): SetUp
// makes one (a device context, a peer, a default connection configuration), and the test, or a
// fixture derived from it, builds what it needs on it. The rig and what is left of it go with
// the fixture.

#ifndef SOFTRPMA_TESTS_CONFORMANCE_TESTING_RIG_TEST_H_
#define SOFTRPMA_TESTS_CONFORMANCE_TESTING_RIG_TEST_H_

#include <memory>

#include "tests/conformance/testing/conformance_test.h"
#include "tests/conformance/testing/rig.h"

namespace softrpma::conformance {

class RigTest : public ConformanceTest {
 protected:
  // A fixture that extends it calls ASSERT_NO_FATAL_FAILURE(RigTest::SetUp()) first, so that
  // nothing runs when the rig could not be made.
  void SetUp() override;

  std::unique_ptr<Rig> rig_;
};

}  // namespace softrpma::conformance

#endif  // SOFTRPMA_TESTS_CONFORMANCE_TESTING_RIG_TEST_H_
