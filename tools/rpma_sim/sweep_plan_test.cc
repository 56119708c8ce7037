#include "tools/rpma_sim/sweep_plan.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

uint64_t Sum(const std::vector<uint64_t>& v) { return std::accumulate(v.begin(), v.end(), 0ull); }

TEST(ParseStats, ReadsPointsAndHitsInFileOrder) {
  absl::StatusOr<std::vector<PointHits>> stats =
      ParseStats("ibv_alloc_pd 2\n# a comment\n\n  malloc\t311 \nibv_post_send 0\n");
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->size(), 3u);
  EXPECT_EQ((*stats)[0].point, "ibv_alloc_pd");
  EXPECT_EQ((*stats)[0].hits, 2u);
  EXPECT_EQ((*stats)[1].point, "malloc");
  EXPECT_EQ((*stats)[1].hits, 311u);
  EXPECT_EQ((*stats)[2].hits, 0u);
}

TEST(ParseStats, EmptyTextIsNoPoints) {
  absl::StatusOr<std::vector<PointHits>> stats = ParseStats("");
  ASSERT_TRUE(stats.ok());
  EXPECT_TRUE(stats->empty());
}

TEST(ParseStats, BadLine_InvalidArgumentNamingTheLine) {
  for (const char* text : {"ibv_alloc_pd 2\nmalloc\n", "ibv_alloc_pd 2\nmalloc x\n",
                           "ibv_alloc_pd 2\nmalloc 1 2\n", "ibv_alloc_pd 2\nmalloc -1\n"}) {
    absl::StatusOr<std::vector<PointHits>> stats = ParseStats(text);
    ASSERT_FALSE(stats.ok()) << text;
    EXPECT_EQ(stats.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(stats.status().message(), HasSubstr("stats line 2")) << text;
  }
}

TEST(ParseStats, KeptLinesAreNoPoints) {
  absl::StatusOr<std::vector<PointHits>> stats =
      ParseStats("# process demo pid 7\nibv_dereg_mr 5\n# kept ibv_dereg_mr 1\n");
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ((*stats)[0].point, "ibv_dereg_mr");
}

TEST(StatsKeptObjects, SumsTheKeptLines_NoneIsZero) {
  EXPECT_EQ(*StatsKeptObjects("# process demo pid 7\nibv_dereg_mr 5\nmalloc 40\n"), 0u);
  EXPECT_EQ(*StatsKeptObjects("# process demo pid 7\nibv_dereg_mr 5\n# kept ibv_dereg_mr 2\n"
                              "  # kept rdma_ack_cm_event\t1 \n"),
            3u);
  EXPECT_EQ(*StatsKeptObjects(""), 0u);
}

TEST(StatsKeptObjects, BadKeptLine_InvalidArgumentNamingTheLine) {
  for (const char* text : {"malloc 1\n# kept ibv_dereg_mr\n", "malloc 1\n# kept ibv_dereg_mr x\n",
                           "malloc 1\n# kept ibv_dereg_mr 1 2\n"}) {
    absl::StatusOr<uint64_t> kept = StatsKeptObjects(text);
    ASSERT_FALSE(kept.ok()) << text;
    EXPECT_EQ(kept.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(kept.status().message(), HasSubstr("stats line 2")) << text;
  }
}

TEST(SweepFaultSpec, EioForCallsEnomemForMalloc) {
  EXPECT_EQ(SweepFaultSpec("ibv_post_send", 3), "ibv_post_send:fail=EIO:nth=3");
  EXPECT_EQ(SweepFaultSpec("malloc", 1), "malloc:fail=ENOMEM:nth=1");
  EXPECT_STREQ(SweepErrno("rdma_connect"), "EIO");
}

TEST(ShareRuns, NoBoundOrEnoughRuns_EveryHit) {
  EXPECT_THAT(ShareRuns({3, 0, 5}, 0), ElementsAre(3, 0, 5));
  EXPECT_THAT(ShareRuns({3, 0, 5}, 8), ElementsAre(3, 0, 5));
  EXPECT_THAT(ShareRuns({3, 0, 5}, 100), ElementsAre(3, 0, 5));
}

TEST(ShareRuns, BoundedEqualShares) {
  EXPECT_THAT(ShareRuns({10, 10, 10}, 9), ElementsAre(3, 3, 3));
}

TEST(ShareRuns, SmallPointsTakeAllAndLeaveTheRestToBigOnes) {
  // 1 + 2 to the small points; the 37 left split between the two big ones (the odd one to
  // the first).
  std::vector<uint64_t> share = ShareRuns({1, 300, 2, 500}, 40);
  EXPECT_THAT(share, ElementsAre(1, 19, 2, 18));
  EXPECT_EQ(Sum(share), 40u);
}

TEST(ShareRuns, FewerRunsThanPoints_FirstPointsOneEach) {
  EXPECT_THAT(ShareRuns({5, 5, 5, 5}, 2), ElementsAre(1, 1, 0, 0));
}

TEST(ShareRuns, NeverMoreThanHitsAndExactlyTheBound) {
  std::vector<uint64_t> hits = {7, 1, 0, 13, 2, 40, 3};
  for (uint64_t bound = 1; bound <= Sum(hits); ++bound) {
    std::vector<uint64_t> share = ShareRuns(hits, bound);
    EXPECT_EQ(Sum(share), bound);
    for (size_t i = 0; i < hits.size(); ++i) EXPECT_LE(share[i], hits[i]);
  }
}

TEST(SpreadHits, AllWhenTheBudgetAllows) {
  EXPECT_THAT(SpreadHits(4, 4), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(SpreadHits(4, 9), ElementsAre(1, 2, 3, 4));
  EXPECT_TRUE(SpreadHits(0, 3).empty());
  EXPECT_TRUE(SpreadHits(3, 0).empty());
}

TEST(SpreadHits, EvenlyWithFirstAndLast) {
  EXPECT_THAT(SpreadHits(100, 1), ElementsAre(1));
  EXPECT_THAT(SpreadHits(100, 2), ElementsAre(1, 100));
  EXPECT_THAT(SpreadHits(9, 5), ElementsAre(1, 3, 5, 7, 9));
  EXPECT_THAT(SpreadHits(10, 4), ElementsAre(1, 4, 7, 10));
}

TEST(SpreadHits, DistinctAndAscendingForEveryBudget) {
  for (uint64_t hits = 1; hits <= 30; ++hits) {
    for (uint64_t budget = 1; budget <= hits; ++budget) {
      std::vector<uint64_t> nths = SpreadHits(hits, budget);
      ASSERT_EQ(nths.size(), budget);
      EXPECT_EQ(nths.front(), 1u);
      if (budget >= 2) {
        EXPECT_EQ(nths.back(), hits);
      }
      for (size_t i = 1; i < nths.size(); ++i) EXPECT_LT(nths[i - 1], nths[i]);
    }
  }
}

TEST(PlanSweep, OneRunPerHitPointByPoint) {
  std::vector<PlannedRun> runs = PlanSweep({{"ibv_alloc_pd", 1, ""}, {"malloc", 2, ""}}, 0);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].spec, "ibv_alloc_pd:fail=EIO:nth=1");
  EXPECT_EQ(runs[1].spec, "malloc:fail=ENOMEM:nth=1");
  EXPECT_EQ(runs[2].spec, "malloc:fail=ENOMEM:nth=2");
  EXPECT_EQ(runs[2].point, "malloc");
  EXPECT_EQ(runs[2].nth, 2u);
}

TEST(PlanSweep, BoundedByMaxRuns) {
  std::vector<PlannedRun> runs =
      PlanSweep({{"ibv_alloc_pd", 1, ""}, {"ibv_post_send", 50, ""}, {"malloc", 300, ""}}, 11);
  ASSERT_EQ(runs.size(), 11u);
  EXPECT_EQ(runs[0].spec, "ibv_alloc_pd:fail=EIO:nth=1");
  EXPECT_EQ(runs[1].spec, "ibv_post_send:fail=EIO:nth=1");
  EXPECT_EQ(runs[5].spec, "ibv_post_send:fail=EIO:nth=50");
  EXPECT_EQ(runs[6].spec, "malloc:fail=ENOMEM:nth=1");
  EXPECT_EQ(runs[10].spec, "malloc:fail=ENOMEM:nth=300");
}

}  // namespace
}  // namespace softrpma::rpma_sim

namespace softrpma::rpma_sim {
namespace {

TEST(MergeProcessStats, OneNameTakesTheLargestCountPerPoint) {
  // A program that forks a copy of itself: both processes go by one name.
  absl::StatusOr<std::vector<PointHits>> merged = MergeProcessStats(
      {"# process peer pid 10\nibv_post_send 3\nmalloc 7\n",
       "# process peer pid 11\nibv_post_send 5\nmalloc 2\n"});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->size(), 2u);
  EXPECT_EQ((*merged)[0].point, "ibv_post_send");
  EXPECT_EQ((*merged)[0].hits, 5u);
  EXPECT_EQ((*merged)[0].prog, "");
  EXPECT_EQ((*merged)[1].hits, 7u);
}

TEST(MergeProcessStats, SeveralNamesKeepAnEntryPerProgram) {
  absl::StatusOr<std::vector<PointHits>> merged = MergeProcessStats(
      {"# process server pid 20\nrdma_accept 1\n", "# process client pid 21\nrdma_connect 1\n"});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->size(), 2u);
  EXPECT_EQ(PointLabel((*merged)[0]), "client:rdma_connect");  // names sorted
  EXPECT_EQ(PointLabel((*merged)[1]), "server:rdma_accept");
  std::vector<PlannedRun> runs = PlanSweep(*merged, 0);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].spec, "rdma_connect:fail=EIO:nth=1:prog=client");
  EXPECT_EQ(runs[1].spec, "rdma_accept:fail=EIO:nth=1:prog=server");
}

TEST(MergeProcessStats, ABadFileIsNamed) {
  absl::StatusOr<std::vector<PointHits>> merged =
      MergeProcessStats({"malloc 1\n", "malloc x\n"});
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(merged.status().message(), "process 2 of 2: stats line 1"))
      << merged.status();
}

}  // namespace
}  // namespace softrpma::rpma_sim
