// The seed and the completion-time model: ParseSeed (every accepted and rejected form), the
// per-QP CompletionTimer (strictly increasing, delays, seeded), the clock.

#include "simverbs/sim/sched/sched.h"

#include <string>

#include "gtest/gtest.h"

namespace softrpma::sim {
namespace {

struct GoodSeed {
  const char* text;
  uint64_t value;
};

class GoodSeedTest : public ::testing::TestWithParam<GoodSeed> {};

TEST_P(GoodSeedTest, Parses) {
  absl::StatusOr<uint64_t> seed = ParseSeed(GetParam().text);

  ASSERT_TRUE(seed.ok()) << seed.status();
  EXPECT_EQ(*seed, GetParam().value);
}

INSTANTIATE_TEST_SUITE_P(Seed, GoodSeedTest,
                         ::testing::Values(GoodSeed{"0", 0}, GoodSeed{"1234", 1234},
                                           GoodSeed{"0x4d2", 0x4d2}, GoodSeed{"0X4D2", 0x4d2},
                                           GoodSeed{"0xffffffffffffffff", ~uint64_t{0}},
                                           GoodSeed{"18446744073709551615", ~uint64_t{0}},
                                           GoodSeed{"007", 7}));

class BadSeedTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BadSeedTest, IsInvalidArgumentQuotingTheText) {
  absl::StatusOr<uint64_t> seed = ParseSeed(GetParam());

  EXPECT_EQ(seed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(seed.status().message(), std::string("bad seed \"") + GetParam() +
                                         "\": expected a decimal or 0x-hex 64-bit number");
}

INSTANTIATE_TEST_SUITE_P(Seed, BadSeedTest,
                         ::testing::Values("", "x", "12x", "-1", "+1", " 1", "1 ", "0x", "0xg",
                                           "1.5", "18446744073709551616", "0x10000000000000000"));

TEST(CompletionTimerTest, StrictlyIncreasingPerQp_WithinLatencyAndJitter) {
  CompletionTimer timer;
  timer.Init(17);
  const uint64_t now = GlobalClock().now_ns();
  uint64_t previous = 0;
  for (int i = 0; i < 100; ++i) {
    const CompletionTimer::Slot slot = timer.Next(/*bytes=*/800, /*delay_ns=*/0);
    EXPECT_GT(slot.ready_ns, previous);
    EXPECT_GE(slot.ready_ns, now + kBaseLatencyNs + 800 / kBytesPerNs);
    previous = slot.ready_ns;
  }
}

TEST(CompletionTimerTest, DelayHoldsBackThatCompletionAndTheQpsLaterOnes) {
  CompletionTimer timer;
  timer.Init(17);
  const uint64_t now = GlobalClock().now_ns();

  const CompletionTimer::Slot delayed = timer.Next(0, 1000000);
  const CompletionTimer::Slot next = timer.Next(0, 0);

  EXPECT_GE(delayed.ready_ns, now + kBaseLatencyNs + 1000000);
  EXPECT_GT(next.ready_ns, delayed.ready_ns);
}

TEST(CompletionTimerTest, SameSeedAndQpSameSlots_OtherQpOrSeedOthers) {
  const uint64_t seed = CurrentSeed();
  auto slots = [](uint32_t qp_num) {
    CompletionTimer timer;
    timer.Init(qp_num);
    std::vector<uint64_t> values;
    for (int i = 0; i < 8; ++i) {
      const CompletionTimer::Slot slot = timer.Next(0, 0);
      values.push_back(slot.ready_ns);
      values.push_back(slot.order);
    }
    return values;
  };
  SetSeed(5);
  const std::vector<uint64_t> a = slots(17);
  const std::vector<uint64_t> again = slots(17);
  const std::vector<uint64_t> other_qp = slots(18);
  SetSeed(6);
  const std::vector<uint64_t> other_seed = slots(17);
  SetSeed(seed);

  EXPECT_EQ(a, again);
  EXPECT_NE(a, other_qp);
  EXPECT_NE(a, other_seed);
}

TEST(SimClockTest, AdvancesOnlyForward) {
  SimClock clock;
  EXPECT_EQ(clock.now_ns(), 0u);
  EXPECT_EQ(clock.AdvanceTo(100), 100u);
  EXPECT_EQ(clock.AdvanceTo(50), 100u);
  EXPECT_EQ(clock.now_ns(), 100u);
}

TEST(SeedTest, DerivedStreamsDiffer) {
  EXPECT_NE(DeriveSeed(1, SeedStream::kCompletions), DeriveSeed(1, SeedStream::kFaults));
  EXPECT_NE(DeriveSeed(1, SeedStream::kCompletions), DeriveSeed(2, SeedStream::kCompletions));
  EXPECT_EQ(DeriveSeed(1, SeedStream::kFaults), DeriveSeed(1, SeedStream::kFaults));
}

}  // namespace
}  // namespace softrpma::sim
