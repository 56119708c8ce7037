#include "tools/rpma_sim/sweep_plan.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/sim/sched/sched.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;
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

// ---- Kinds --------------------------------------------------------------------------------

std::vector<std::string> Specs(const std::vector<PlannedRun>& runs) {
  std::vector<std::string> specs;
  for (const PlannedRun& r : runs) specs.push_back(r.spec);
  return specs;
}

// How many runs of `runs` are of `kind`.
size_t CountKind(const std::vector<PlannedRun>& runs, SweepKind kind) {
  return std::count_if(runs.begin(), runs.end(), [kind](const PlannedRun& r) { return r.kind == kind; });
}

TEST(PlanSweep, KindsPerPoint_EachEffectAtEachHit_HitByHit) {
  std::vector<PlannedRun> runs = PlanSweep(
      {{"ibv_alloc_pd", 1, ""}, {"rdma_connect", 1, ""}, {"ibv_post_recv", 2, ""}},
      AllSweepKinds(), "mlx5", 0);
  EXPECT_THAT(Specs(runs),
              ElementsAre("ibv_alloc_pd:fail=EIO:nth=1",  // no wc, conn there; one program: no kill
                          "rdma_connect:fail=EIO:nth=1", "rdma_connect:reject:nth=1",
                          "rdma_connect:unreachable:nth=1",
                          "ibv_post_recv:fail=EIO:nth=1",
                          "ibv_post_recv:wc_status=IBV_WC_WR_FLUSH_ERR:nth=1",
                          "ibv_post_recv:wc_status=IBV_WC_LOC_LEN_ERR:nth=1",
                          "ibv_post_recv:lost:nth=1", "ibv_post_recv:disconnect:nth=1",
                          "ibv_post_recv:fail=EIO:nth=2",
                          "ibv_post_recv:wc_status=IBV_WC_WR_FLUSH_ERR:nth=2",
                          "ibv_post_recv:wc_status=IBV_WC_LOC_LEN_ERR:nth=2",
                          "ibv_post_recv:lost:nth=2", "ibv_post_recv:disconnect:nth=2"));
  EXPECT_EQ(runs[1].kind, SweepKind::kFail);
  EXPECT_EQ(runs[2].kind, SweepKind::kConn);
  EXPECT_EQ(runs[2].action, "reject");
  EXPECT_EQ(runs[5].kind, SweepKind::kWc);
  EXPECT_EQ(runs[5].action, "wc_status=IBV_WC_WR_FLUSH_ERR");
}

TEST(PlanSweep, WcStatusesPerOperationAndDevice) {
  auto statuses = [](const char* point, const char* device) {
    return Specs(PlanSweep({{point, 1, ""}}, {SweepKind::kWc}, device, 0));
  };
  EXPECT_THAT(statuses("ibv_post_send", "mlx5"),
              ElementsAre("ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR:nth=1",
                          "ibv_post_send:wc_status=IBV_WC_RETRY_EXC_ERR:nth=1",
                          "ibv_post_send:wc_status=IBV_WC_LOC_PROT_ERR:nth=1",
                          "ibv_post_send:wc_status=IBV_WC_REM_INV_REQ_ERR:nth=1",
                          "ibv_post_send:wc_status=IBV_WC_RNR_RETRY_EXC_ERR:nth=1"));
  // iWARP has no RNR retries.
  EXPECT_EQ(statuses("ibv_post_send", "siw").size(), 4u);
  EXPECT_THAT(statuses("ibv_post_send", "siw"),
              Not(Contains("ibv_post_send:wc_status=IBV_WC_RNR_RETRY_EXC_ERR:nth=1")));
  EXPECT_EQ(statuses("ibv_wr_complete", "rxe").size(), 3u);
  // Points the grammar cannot complete in error get no wc run.
  EXPECT_TRUE(statuses("ibv_post_srq_recv", "mlx5").empty());
  EXPECT_TRUE(statuses("ibv_poll_cq", "mlx5").empty());
}

TEST(PlanSweep, KillOnlyInARunOfSeveralPrograms) {
  EXPECT_TRUE(PlanSweep({{"ibv_post_send", 2, ""}}, {SweepKind::kKill}, "", 0).empty());
  EXPECT_THAT(Specs(PlanSweep({{"rdma_accept", 2, "server"}, {"malloc", 1, "client"}},
                              {SweepKind::kKill}, "", 0)),
              ElementsAre("rdma_accept:kill:nth=1:prog=server",
                          "rdma_accept:kill:nth=2:prog=server", "malloc:kill:nth=1:prog=client"));
}

TEST(PlanSweep, FailKindAloneIsThePlanBeforeKinds) {
  const std::vector<PointHits> points = {
      {"ibv_alloc_pd", 1, ""}, {"ibv_post_send", 50, ""}, {"malloc", 300, ""}};
  for (uint64_t max_runs : {0, 11, 2}) {
    EXPECT_EQ(Specs(PlanSweep(points, {SweepKind::kFail}, "mlx5", max_runs)),
              Specs(PlanSweep(points, max_runs)))
        << max_runs;
  }
}

// Under --max-runs every point gets its share, and within a point its kinds share it: the
// wc kind's five statuses do not crowd out conn, nor the first point's kinds the others.
TEST(PlanSweep, MaxRuns_SharedFairlyOverPointsAndKinds) {
  const std::vector<PointHits> points = {
      {"ibv_post_send", 100, "client"}, {"rdma_accept", 10, "server"}, {"malloc", 100, "client"}};
  std::vector<PlannedRun> runs = PlanSweep(points, AllSweepKinds(), "mlx5", 30);
  ASSERT_EQ(runs.size(), 30u);
  size_t per_point[3] = {};
  for (const PlannedRun& r : runs) {
    per_point[r.point == "ibv_post_send" ? 0 : r.point == "rdma_accept" ? 1 : 2]++;
  }
  EXPECT_EQ(per_point[0], 10u);
  EXPECT_EQ(per_point[1], 10u);
  EXPECT_EQ(per_point[2], 10u);
  std::vector<PlannedRun> post(runs.begin(), runs.begin() + 10);
  EXPECT_EQ(CountKind(post, SweepKind::kFail), 3u);  // 10 over fail, wc, conn, kill: 3 3 2 2 or so
  EXPECT_GE(CountKind(post, SweepKind::kWc), 2u);
  EXPECT_GE(CountKind(post, SweepKind::kConn), 2u);
  EXPECT_GE(CountKind(post, SweepKind::kKill), 2u);
}

// With fewer runs than points x kinds, each point still gets one, and the kinds those single
// runs take go round: not the first kind (fail) at every point.
TEST(PlanSweep, MaxRuns_FewRuns_KindsRoundRobinOverPoints) {
  const std::vector<PointHits> points = {{"ibv_post_send", 5, "c"}, {"ibv_post_recv", 5, "c"},
                                         {"rdma_connect", 5, "c"}, {"rdma_accept", 5, "s"}};
  std::vector<PlannedRun> runs = PlanSweep(points, AllSweepKinds(), "mlx5", 4);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].point, "ibv_post_send");
  EXPECT_EQ(runs[1].point, "ibv_post_recv");
  EXPECT_EQ(runs[2].point, "rdma_connect");
  EXPECT_EQ(runs[3].point, "rdma_accept");
  EXPECT_EQ(runs[0].kind, SweepKind::kFail);
  EXPECT_EQ(runs[1].kind, SweepKind::kWc);
  EXPECT_EQ(runs[2].kind, SweepKind::kConn);
  EXPECT_EQ(runs[3].kind, SweepKind::kKill);
  EXPECT_EQ(CountKind(runs, SweepKind::kFail), 1u);
}

TEST(ParseSweepKinds, AnyOrderBlanksAllowed_ReturnedInKindOrder) {
  EXPECT_THAT(*ParseSweepKinds(" kill , fail"), ElementsAre(SweepKind::kFail, SweepKind::kKill));
  EXPECT_THAT(*ParseSweepKinds("wc"), ElementsAre(SweepKind::kWc));
  EXPECT_EQ(*ParseSweepKinds("fail,wc,conn,kill"), AllSweepKinds());
}

TEST(ParseSweepKinds, UnknownKind_ErrorNamesItAndTheValidOnes) {
  absl::StatusOr<std::vector<SweepKind>> kinds = ParseSweepKinds("fail,wcs");
  ASSERT_FALSE(kinds.ok());
  EXPECT_EQ(kinds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kinds.status().message(),
            "unknown fault kind \"wcs\"; the kinds are fail, wc, conn, kill");
  EXPECT_EQ(ParseSweepKinds("wc,wc").status().message(), "fault kind \"wc\" is listed twice");
  EXPECT_EQ(ParseSweepKinds(" , ").status().message(),
            "no fault kind given; the kinds are fail, wc, conn, kill");
}

TEST(KindOfAction, TheKindOfEachSweepAction) {
  EXPECT_EQ(KindOfAction("fail=EIO"), SweepKind::kFail);
  EXPECT_EQ(KindOfAction("wc_status=IBV_WC_RETRY_EXC_ERR"), SweepKind::kWc);
  EXPECT_EQ(KindOfAction("disconnect"), SweepKind::kConn);
  EXPECT_EQ(KindOfAction("unreachable"), SweepKind::kConn);
  EXPECT_EQ(KindOfAction("kill"), SweepKind::kKill);
  EXPECT_EQ(KindOfAction("delay=5"), std::nullopt);
}

TEST(EffectRank, TheSweepsOrderAtAPoint) {
  EXPECT_EQ(EffectRank("ibv_post_recv", "fail=EIO", "mlx5"), 0u);
  EXPECT_EQ(EffectRank("ibv_post_recv", "wc_status=IBV_WC_LOC_LEN_ERR", "mlx5"), 2u);
  EXPECT_EQ(EffectRank("ibv_post_recv", "kill", "mlx5"), 5u);
  EXPECT_EQ(EffectRank("ibv_post_recv", "delay=5", "mlx5"), 6u);
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

TEST(WithSeeds, EachRunOncePerSeed_ARunsSeedsTogether) {
  const std::vector<PlannedRun> plan = PlanSweep({{"ibv_post_send", 2, ""}}, 0);
  ASSERT_EQ(plan.size(), 2u);
  const std::vector<PlannedRun> seeded = WithSeeds(plan, 40, 3);
  ASSERT_EQ(seeded.size(), 6u);
  for (size_t i = 0; i < seeded.size(); ++i) {
    EXPECT_EQ(seeded[i].spec, plan[i / 3].spec) << i;
    EXPECT_EQ(seeded[i].seed, std::optional<uint64_t>(40 + i % 3)) << i;
  }
}

TEST(WithSeeds, OneSeedIsThePlanItself) {
  const std::vector<PlannedRun> plan = PlanSweep({{"malloc", 2, ""}}, 0);
  for (uint64_t seeds : {0u, 1u}) {
    const std::vector<PlannedRun> same = WithSeeds(plan, 40, seeds);
    ASSERT_EQ(same.size(), plan.size());
    for (const PlannedRun& run : same) EXPECT_FALSE(run.seed.has_value());
  }
}

TEST(WithSeeds, TheDefaultBaseIsTheSimulatorsDefaultSeed) {
  EXPECT_EQ(kSimulatorDefaultSeed, sim::kDefaultSeed);
}

}  // namespace
}  // namespace softrpma::rpma_sim
