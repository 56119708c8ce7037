#include "tools/rpma_sim/report.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ReportRun Run(const std::string& point, uint64_t nth, const std::string& class_name,
              bool fails = false) {
  ReportRun r;
  r.point = point;
  r.nth = nth;
  r.spec = SweepFaultSpec(point, nth);
  r.exit_code = 1;
  r.class_name = class_name;
  r.detail = "exit 1";
  r.duration_ms = 2.5;
  r.replay = "rpma-sim run --faults='" + r.spec + "' -- ./app";
  r.fails_sweep = fails;
  return r;
}

// A whole sweep of ./app: 3 hits of ibv_post_send, 2 of malloc.
SweepReport Whole() {
  SweepReport report;
  report.program = {"./app", "--once"};
  report.device = "mlx5";
  report.jobs = 2;
  report.timeout_s = 10;
  report.leak_checker = "none";
  report.plan_runs = 5;
  report.clean_run.class_name = "clean";
  report.clean_run.detail = "exit 0";
  report.clean_run.exit_code = 0;
  report.points = {{"ibv_post_send", 3, ""}, {"malloc", 2, ""}};
  report.not_swept = {{"ibv_ack_cq_events", 4, ""}};
  report.runs = {Run("ibv_post_send", 1, "nonzero"), Run("ibv_post_send", 2, "crashed", true),
                 Run("ibv_post_send", 3, "kept"), Run("malloc", 1, "nonzero"),
                 Run("malloc", 2, "clean")};
  return report;
}

// The shards of Whole() as TakeShard would make them.
std::vector<SweepReport> Shards(uint64_t total) {
  std::vector<SweepReport> shards;
  for (uint64_t index = 1; index <= total; ++index) {
    SweepReport s = Whole();
    s.shard = Shard{index, total};
    s.runs.clear();
    for (const ReportRun& r : Whole().runs) {
      if (ShardOfRun(r.prog, r.point, r.nth, total) == index) s.runs.push_back(r);
    }
    shards.push_back(s);
  }
  return shards;
}

std::vector<std::string> Names(size_t n) {
  std::vector<std::string> names;
  for (size_t i = 1; i <= n; ++i) names.push_back("s" + std::to_string(i) + ".json");
  return names;
}

TEST(ReportJson, ParseReportReadsItBack) {
  SweepReport report = Whole();
  report.shard = Shard{2, 3};
  report.seed = 42;
  report.runs[1].output_tail = "Segmentation fault\n\xff";
  report.runs[1].exit_code.reset();
  report.runs[1].signal = "SIGSEGV";
  absl::StatusOr<SweepReport> back = ParseReport(ReportJson(report));
  ASSERT_TRUE(back.ok()) << back.status();
  SweepReport expected = report;  // what the writer made of the stray byte
  expected.runs[1].output_tail = "Segmentation fault\n\xef\xbf\xbd";
  EXPECT_EQ(ReportJson(*back), ReportJson(expected));
  EXPECT_EQ(back->program, report.program);
  EXPECT_EQ(back->seed, std::optional<uint64_t>(42));
  ASSERT_TRUE(back->shard.has_value());
  EXPECT_EQ(ShardName(*back->shard), "2/3");
  EXPECT_EQ(back->runs[1].signal, "SIGSEGV");
  EXPECT_FALSE(back->runs[1].exit_code.has_value());
  EXPECT_TRUE(back->runs[1].fails_sweep);
  EXPECT_EQ(back->runs[1].output_tail, "Segmentation fault\n\xef\xbf\xbd");
}

// --seeds: the sweep's count and each run's seed are written and read back; a sweep without
// them writes neither (its reports stay as they were).
TEST(ReportJson, SeedsAndEachRunsSeedReadBack) {
  EXPECT_THAT(ReportJson(Whole()), ::testing::Not(HasSubstr("\"seeds\"")));
  SweepReport report = Whole();
  report.seeds = 2;
  // (Run: this file's, not testing::Test's)
  report.runs = {rpma_sim::Run("malloc", 1, "nonzero"),
                 rpma_sim::Run("malloc", 1, "crashed", true)};
  report.runs[0].seed = 7;
  report.runs[1].seed = 8;
  absl::StatusOr<SweepReport> back = ParseReport(ReportJson(report));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->seeds, 2u);
  ASSERT_EQ(back->runs.size(), 2u);
  EXPECT_EQ(back->runs[0].seed, std::optional<uint64_t>(7));
  EXPECT_EQ(back->runs[1].seed, std::optional<uint64_t>(8));
  EXPECT_EQ(ReportJson(*back), ReportJson(report));
}

// One fault run under two seeds is two runs, not an overlap; shards of different --seeds are
// different sweeps.
TEST(MergeReports, ARunUnderSeveralSeeds) {
  std::vector<SweepReport> shards = Shards(2);
  for (SweepReport& s : shards) {
    s.seeds = 2;
    std::vector<ReportRun> seeded;
    for (const ReportRun& r : s.runs) {
      for (uint64_t seed : {8u, 7u}) {
        seeded.push_back(r);
        seeded.back().seed = seed;
      }
    }
    s.runs = seeded;
  }
  std::vector<std::string> warnings;
  absl::StatusOr<SweepReport> merged = MergeReports(shards, Names(2), &warnings);
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->runs.size(), 10u);
  EXPECT_EQ(merged->runs[0].spec, "ibv_post_send:fail=EIO:nth=1");
  EXPECT_EQ(merged->runs[0].seed, std::optional<uint64_t>(7));
  EXPECT_EQ(merged->runs[1].seed, std::optional<uint64_t>(8));
  shards[1].seeds = 3;
  absl::StatusOr<SweepReport> refused = MergeReports(shards, Names(2), &warnings);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("--seeds 2 and 3"));
}

TEST(ParseReport, NamesTheMissingOrMistypedMember) {
  const std::string good = ReportJson(Whole());
  auto broken = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return ParseReport(text);
  };
  struct Case {
    absl::StatusOr<SweepReport> result;
    const char* message;
  } cases[] = {
      {broken("\"device\":\"mlx5\"", "\"device\":5"), "device: expected a string"},
      {broken("\"plan_runs\":5,", ""), "plan_runs: missing; expected a whole number"},
      {broken("\"class\":\"crashed\"", "\"class\":null"), "runs[1].class: expected a string"},
      {broken("\"shard\":null", "\"shard\":{\"index\":4,\"total\":3}"),
       "shard: \"4/3\": there is no shard 4 of 3"},
      {ParseReport("[1]"), "the report: expected an object"},
      {ParseReport("{"), "JSON, byte 1"},
  };
  for (const Case& c : cases) {
    ASSERT_FALSE(c.result.ok()) << c.message;
    EXPECT_THAT(std::string(c.result.status().message()), HasSubstr(c.message));
  }
}

TEST(FormatTable, AColumnPerClassAnUnknownOneToo) {
  SweepReport report = Whole();
  report.runs[4].class_name = "torn";  // a class this build does not know (a newer one's)
  const std::string table = FormatTable(report);
  EXPECT_THAT(table, HasSubstr("point            hits   runs  clean  nonzero  crashed  hung  "
                               "leaked  kept  racy  orphaned  torn\n"));
  EXPECT_THAT(table, HasSubstr("malloc              2      2      0        1        0     0"
                               "       0     0     0         0     1\n"));
  EXPECT_THAT(table, HasSubstr("total               5      5      0        2        1     0"
                               "       0     1     0         0     1\n"));
  EXPECT_THAT(table, HasSubstr("not swept (calls that return void and cannot fail): "
                               "ibv_ack_cq_events (4 hits)\n"));
  EXPECT_THAT(ReportJson(report), HasSubstr("\"kept\":1,\"racy\":0,\"orphaned\":0,\"torn\":1}"));
}

TEST(MergeReports, ThreeShardsMakeTheWholeSweep) {
  std::vector<SweepReport> shards = Shards(3);
  // Given in any order.
  std::swap(shards[0], shards[2]);
  std::vector<std::string> warnings;
  absl::StatusOr<SweepReport> merged = MergeReports(shards, Names(3), &warnings);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_TRUE(warnings.empty());
  EXPECT_FALSE(merged->shard.has_value());
  EXPECT_EQ(merged->merged_shards, 3u);
  EXPECT_TRUE(merged->missing_shards.empty());
  std::vector<std::string> specs;
  for (const ReportRun& r : merged->runs) specs.push_back(r.spec);
  EXPECT_THAT(specs, ElementsAre("ibv_post_send:fail=EIO:nth=1", "ibv_post_send:fail=EIO:nth=2",
                                 "ibv_post_send:fail=EIO:nth=3", "malloc:fail=ENOMEM:nth=1",
                                 "malloc:fail=ENOMEM:nth=2"));
  EXPECT_EQ(FormatTable(*merged), FormatTable(Whole()));
  EXPECT_TRUE(ReportFailed(*merged));  // the crashed run
}

TEST(MergeReports, AMissingShardIsSaidAndFails) {
  std::vector<SweepReport> shards = Shards(3);
  shards.erase(shards.begin() + 1);
  for (SweepReport& s : shards) {
    for (ReportRun& r : s.runs) r.fails_sweep = false;
  }
  std::vector<std::string> warnings;
  absl::StatusOr<SweepReport> merged = MergeReports(shards, Names(2), &warnings);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_THAT(merged->missing_shards, ElementsAre(2u));
  EXPECT_TRUE(ReportFailed(*merged));
}

TEST(MergeReports, DifferentHitCountsAreAWarning) {
  std::vector<SweepReport> shards = Shards(2);
  shards[1].points[1].hits = 3;
  std::vector<std::string> warnings;
  absl::StatusOr<SweepReport> merged = MergeReports(shards, Names(2), &warnings);
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("s2.json: its clean run hit malloc 3 times"));
  EXPECT_EQ(merged->points[1].hits, 3u);
}

TEST(MergeReports, RefusesReportsOfDifferentSweepsOrOverlappingShards) {
  std::vector<std::string> warnings;
  auto merge = [&](std::vector<SweepReport> reports) {
    return MergeReports(reports, Names(reports.size()), &warnings);
  };
  std::vector<SweepReport> s = Shards(3);
  SweepReport other_program = s[1];
  other_program.program = {"./other"};
  SweepReport other_device = s[1];
  other_device.device = "siw";
  SweepReport other_seed = s[1];
  other_seed.seed = 7;
  SweepReport other_max_runs = s[1];
  other_max_runs.max_runs = 10;
  SweepReport of_four = s[1];
  of_four.shard = Shard{2, 4};
  SweepReport whole = Whole();
  SweepReport same_run = s[1];
  same_run.runs.push_back(s[0].runs.empty() ? s[2].runs[0] : s[0].runs[0]);
  struct Case {
    absl::StatusOr<SweepReport> result;
    const char* message;
  } cases[] = {
      {merge({s[0], other_program}),
       "s1.json and s2.json are reports of different sweeps: program ./app --once and ./other"},
      {merge({s[0], other_device}), "different sweeps: device mlx5 and siw"},
      {merge({s[0], other_seed}),
       "different sweeps: seed the simulator's default and 7"},
      {merge({s[0], other_max_runs}), "different sweeps: --max-runs 0 and 10"},
      {merge({s[0], of_four}), "different sweeps: shard count 1/3 and 2/4"},
      {merge({s[0], s[1], s[0]}), "overlapping shards: s1.json and s3.json are both shard 1/3"},
      {merge({s[0], whole}), "s2.json is the report of a whole sweep (no --shard)"},
      {merge({s[0].runs.empty() ? s[2] : s[0], same_run}), "overlapping shards: "},
      {merge({}), "no report to merge"},
  };
  for (const Case& c : cases) {
    ASSERT_FALSE(c.result.ok()) << c.message;
    EXPECT_EQ(c.result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(c.result.status().message()), HasSubstr(c.message));
  }
}

TEST(MergeReports, OneWholeReportIsItself) {
  std::vector<std::string> warnings;
  absl::StatusOr<SweepReport> merged = MergeReports({Whole()}, Names(1), &warnings);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(ReportJson(*merged), ReportJson(Whole()));
}

TEST(ReportJunit, ACasePerRunFailedWhenItFailsTheSweep) {
  SweepReport report = Whole();
  report.runs[1].output_tail = "boom";
  JunitSuite suite = ReportJunit(report);
  ASSERT_EQ(suite.cases.size(), 6u);
  EXPECT_EQ(suite.cases[0].name, "clean run");
  EXPECT_EQ(suite.cases[2].name, "ibv_post_send hit 2");
  EXPECT_EQ(suite.cases[2].classname, "rpma-sim.sweep.mlx5.app");
  EXPECT_TRUE(suite.cases[2].failed);
  EXPECT_EQ(suite.cases[2].failure_type, "crashed");
  EXPECT_EQ(suite.cases[2].failure_text,
            "crashed (exit 1): ibv_post_send:fail=EIO:nth=2\n"
            "  replay: rpma-sim run --faults='ibv_post_send:fail=EIO:nth=2' -- ./app\n");
  EXPECT_EQ(suite.cases[2].system_out, "boom");
  EXPECT_DOUBLE_EQ(suite.cases[2].time_s, 0.0025);
  for (size_t i : {0u, 1u, 3u, 4u, 5u}) EXPECT_FALSE(suite.cases[i].failed) << i;
  report.runs[0].prog = "server";
  EXPECT_EQ(ReportJunit(report).cases[1].name, "server:ibv_post_send hit 1");
  report.runs[0].seed = 42;  // --seeds: one name per seed
  EXPECT_EQ(ReportJunit(report).cases[1].name, "server:ibv_post_send hit 1 seed 42");
}

}  // namespace
}  // namespace softrpma::rpma_sim
