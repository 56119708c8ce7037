#include "tests/conformance/testing/rig_test.h"

#include <utility>

#include "gtest/gtest.h"

namespace softrpma::conformance {

void RigTest::SetUp() {
  ASSERT_NO_FATAL_FAILURE(ConformanceTest::SetUp());
  auto rig = Rig::Create();
  ASSERT_TRUE(rig.ok()) << rig.status();
  rig_ = std::move(*rig);
}

}  // namespace softrpma::conformance
