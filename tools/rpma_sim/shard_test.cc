#include "tools/rpma_sim/shard.h"

#include <map>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::HasSubstr;

TEST(ParseShard, ReadsKOfN) {
  absl::StatusOr<Shard> shard = ParseShard("2/3");
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->index, 2u);
  EXPECT_EQ(shard->total, 3u);
  EXPECT_EQ(ShardName(*shard), "2/3");
  EXPECT_TRUE(ParseShard("1/1").ok());
}

TEST(ParseShard, BadShardsSayWhatIsWrong) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"0/3", "shards are numbered from 1 (1/3 to 3/3)"},
      {"4/3", "there is no shard 4 of 3"},
      {"a/b", "is not K/N"},
      {"1/0", "N must be at least 1"},
      {"0/0", "N must be at least 1"},
      {"", "is not K/N"},
      {"3", "is not K/N"},
      {"1/2/3", "is not K/N"},
      {"-1/3", "is not K/N"},
      {" 1/3", "is not K/N"},
      {"1/99999999999999999999", "is not K/N"},
      {"1/2000000", "at most 1000000 shards"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Shard> shard = ParseShard(c.text);
    ASSERT_FALSE(shard.ok()) << c.text;
    EXPECT_EQ(shard.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(shard.status().message()), HasSubstr(c.message)) << c.text;
  }
}

// A fake environment.
std::function<const char*(const char*)> Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(ShardFromEnvironment, NoneWithoutBazelSharding) {
  absl::StatusOr<std::optional<Shard>> shard = ShardFromEnvironment(Env({}));
  ASSERT_TRUE(shard.ok());
  EXPECT_FALSE(shard->has_value());
  shard = ShardFromEnvironment(Env({{"TEST_TOTAL_SHARDS", ""}}));
  ASSERT_TRUE(shard.ok());
  EXPECT_FALSE(shard->has_value());
}

TEST(ShardFromEnvironment, BazelsIndexIsZeroBased) {
  absl::StatusOr<std::optional<Shard>> shard =
      ShardFromEnvironment(Env({{"TEST_TOTAL_SHARDS", "3"}, {"TEST_SHARD_INDEX", "0"}}));
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_TRUE(shard->has_value());
  EXPECT_EQ(ShardName(**shard), "1/3");
  shard = ShardFromEnvironment(Env({{"TEST_TOTAL_SHARDS", "3"}, {"TEST_SHARD_INDEX", "2"}}));
  ASSERT_TRUE(shard.ok() && shard->has_value());
  EXPECT_EQ(ShardName(**shard), "3/3");
}

TEST(ShardFromEnvironment, MalformedVariablesAreNamed) {
  struct Case {
    const char* total;
    const char* index;
    const char* message;
  } cases[] = {
      {"0", "0", "TEST_TOTAL_SHARDS=\"0\": expected a number of shards"},
      {"x", "0", "TEST_TOTAL_SHARDS=\"x\""},
      {"3", nullptr, "TEST_TOTAL_SHARDS is set but TEST_SHARD_INDEX is not"},
      {"3", "3", "TEST_SHARD_INDEX=\"3\": expected 0 to 2"},
      {"3", "-1", "TEST_SHARD_INDEX=\"-1\""},
  };
  for (const Case& c : cases) {
    std::map<std::string, std::string> vars = {{"TEST_TOTAL_SHARDS", c.total}};
    if (c.index != nullptr) vars["TEST_SHARD_INDEX"] = c.index;
    absl::StatusOr<std::optional<Shard>> shard = ShardFromEnvironment(Env(vars));
    ASSERT_FALSE(shard.ok()) << c.message;
    EXPECT_THAT(std::string(shard.status().message()), HasSubstr(c.message));
  }
}

std::vector<PlannedRun> SomePlan() {
  std::vector<PointHits> points = {{"ibv_post_send", 40, ""}, {"malloc", 100, ""},
                                   {"rdma_accept", 3, "server"}, {"rdma_connect", 2, "client"}};
  return PlanSweep(points, 0);
}

TEST(TakeShard, TheShardsAreDisjointAndMakeThePlan) {
  const std::vector<PlannedRun> plan = SomePlan();
  for (uint64_t total : {1u, 2u, 3u, 7u}) {
    std::multiset<std::string> union_of_shards;
    for (uint64_t index = 1; index <= total; ++index) {
      for (const PlannedRun& run : TakeShard(plan, Shard{index, total})) {
        union_of_shards.insert(run.spec);
      }
    }
    std::multiset<std::string> whole;
    for (const PlannedRun& run : plan) whole.insert(run.spec);
    EXPECT_EQ(union_of_shards, whole) << total << " shards";
  }
}

TEST(TakeShard, KeepsPlanOrderAndSpreadsTheRuns) {
  const std::vector<PlannedRun> plan = SomePlan();  // 145 runs
  for (uint64_t index = 1; index <= 3; ++index) {
    std::vector<PlannedRun> part = TakeShard(plan, Shard{index, 3});
    // A hash, not a deal: roughly a third each (a fixed function, so this is not flaky).
    EXPECT_GT(part.size(), plan.size() / 6) << index;
    size_t at = 0;
    for (const PlannedRun& run : part) {
      while (at < plan.size() && plan[at].spec != run.spec) ++at;
      EXPECT_LT(at, plan.size()) << "out of plan order: " << run.spec;
    }
  }
}

TEST(ShardOfRun, DependsOnTheRunOnly) {
  // The same run is in the same shard whatever else the plan holds (and on every machine).
  EXPECT_EQ(ShardOfRun("", "ibv_post_send", 3, 3), ShardOfRun("", "ibv_post_send", 3, 3));
  EXPECT_EQ(ShardOfRun("", "malloc", 1, 1), 1u);
  std::set<uint64_t> seen;
  for (uint64_t nth = 1; nth <= 30; ++nth) seen.insert(ShardOfRun("", "malloc", nth, 3));
  EXPECT_EQ(seen, (std::set<uint64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace softrpma::rpma_sim
