#include "tools/rpma_sim/sim_checks.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/sim/sim_control.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::ofstream(path) << text;
  return path;
}

TEST(CheckFaultSpec, GoodSpecsAndTheEmptyOne) {
  EXPECT_TRUE(CheckFaultSpec("ibv_post_send:fail=EIO:nth=3; malloc:fail=ENOMEM:nth=5").ok());
  EXPECT_TRUE(CheckFaultSpec("").ok());
}

TEST(CheckFaultSpec, MalformedSpec_TheSimulatorsMessage) {
  absl::Status status = CheckFaultSpec("ibv_poll_cq:fail=EIO; ibv_post_send:explode");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("fault spec rule 2, column 37: unknown action"));
}

TEST(CheckFaultSpec, LeavesNoPlanInstalled) {
  ASSERT_TRUE(CheckFaultSpec("ibv_post_send:fail=EIO").ok());
  EXPECT_EQ(sim::CurrentFaultPlan(), "");
}

TEST(CheckScenarioFile, GoodFile) {
  std::string path = WriteTemp("good.scenario", "# c\nseed 7\nibv_alloc_pd:fail=EIO:nth=1\n");
  EXPECT_TRUE(CheckScenarioFile(path).ok());
  EXPECT_EQ(sim::CurrentFaultPlan(), "");
}

TEST(CheckScenarioFile, BadLine_FileLineAndColumn) {
  std::string path = WriteTemp("bad.scenario", "ibv_alloc_pd:fail=EIO\nibv_post_send:explode\n");
  absl::Status status = CheckScenarioFile(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat(path, ":2:15: unknown action")));
}

TEST(CheckScenarioFile, MissingFile_InvalidArgument) {
  absl::Status status = CheckScenarioFile("/nonexistent/scenario");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("cannot read scenario file"));
}

TEST(CanFail, CallsThatReturnVoidCannot) {
  EXPECT_TRUE(CanFail("ibv_post_send", "EIO"));
  EXPECT_TRUE(CanFail("malloc", "ENOMEM"));
  EXPECT_FALSE(CanFail("ibv_ack_cq_events", "EIO"));
  EXPECT_FALSE(CanFail("rdma_destroy_qp", "EIO"));
  EXPECT_FALSE(CanFail("no_such_point", "EIO"));
}

TEST(ListPoints, EveryPointWithItsDescription) {
  std::vector<PointInfo> points = ListPoints();
  ASSERT_EQ(points.size(), sim::ListFaultPoints().size());
  EXPECT_EQ(points.front().name, "ibv_query_device_ex");
  EXPECT_EQ(points.back().name, "malloc");
  for (const PointInfo& p : points) {
    EXPECT_FALSE(p.description.empty()) << p.name;
    bool lists_fail = false;
    for (const std::string& action : p.actions) lists_fail = lists_fail || action == "fail=<errno>";
    EXPECT_EQ(p.can_fail, lists_fail) << p.name;
  }
}

TEST(FormatDevices, TheSgeAndInlineErrnosOfEachProfile) {
  const std::string table = FormatDevices();
  EXPECT_THAT(table, ::testing::ContainsRegex(
                         "SGEs / inline over the QP's: ibv_post_send +ENOMEM +EINVAL +EINVAL\n"));
  EXPECT_THAT(table, ::testing::ContainsRegex(
                         "SGEs / inline over the QP's: ibv_wr_\\* +ENOMEM +ENOSPC +EINVAL\n"));
}

}  // namespace
}  // namespace softrpma::rpma_sim
