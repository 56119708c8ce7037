// rpma_atomic_write(3) end to end, through the public API on the selected backend (the simulated
// NIC by default), both ways librpma posts it: natively (ibv_wr_atomic_write, on a device
// reporting native atomic write: the simulated NIC with sim::SetAtomicWriteSupported) and
// emulated (an inline, fenced 8-byte RDMA WRITE: the simulated NIC's default). 8 bytes stored
// at the remote offset, a completion with the opcode of what was posted (IBV_WC_ATOMIC_WRITE /
// IBV_WC_RDMA_WRITE) and the caller's op_context, src reusable as soon as the call returns, and
// the store is atomic: a reader of the target word never sees a mix of two values.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/sim_control.h"
#include "simverbs/sim/nic/torn_word_reader.h"
#include "tests/ops/ops_pair.h"

namespace softrpma::ops_testing {
namespace {

constexpr int kAlways = RPMA_F_COMPLETION_ALWAYS;

std::unique_ptr<OpsPair> MakePair(const OpsPairOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<OpsPair>> pair = OpsPair::Create(options);
  EXPECT_TRUE(pair.ok()) << pair.status();
  return pair.ok() ? std::move(*pair) : nullptr;
}

// GetParam(): whether the device has native atomic write (switched on the simulated NIC before
// the pair's peers are made: rpma_peer_new finds it out).
class AtomicWriteTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (Native() && !SimulatedNicSelected()) GTEST_SKIP() << "switches the simulated NIC";
    if (SimulatedNicSelected()) sim::SetAtomicWriteSupported(Native());
  }
  void TearDown() override {
    if (SimulatedNicSelected()) sim::SetAtomicWriteSupported(false);
  }
  bool Native() const { return GetParam(); }
  // The completion's opcode follows from what librpma posted.
  ibv_wc_opcode ExpectedOpcode() const {
    return Native() ? IBV_WC_ATOMIC_WRITE : IBV_WC_RDMA_WRITE;
  }
};

INSTANTIATE_TEST_SUITE_P(NativeAndEmulated, AtomicWriteTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Native" : "Emulated";
                         });

TEST_P(AtomicWriteTest, StoresEightBytes_CompletesWithThePostedOpcode) {
  std::unique_ptr<OpsPair> pair = MakePair();
  ASSERT_NE(pair, nullptr);
  std::memset(pair->server_region(), '.', 32);
  const char src[8] = {'a', 't', 'o', 'm', 'i', 'c', '!', '!'};
  int context = 0;

  ASSERT_EQ(rpma_atomic_write(pair->client(), pair->server_remote(), 8, src, kAlways, &context),
            0);
  absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair->client()));

  ASSERT_TRUE(wc.ok()) << wc.status();
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->opcode, ExpectedOpcode());
  EXPECT_EQ(wc->wr_id, reinterpret_cast<uint64_t>(&context));
  EXPECT_EQ(std::string(pair->server_region(), 24), "........atomic!!........");
  EXPECT_TRUE(pair->Close().ok());
}

// The write is held up behind a send waiting for the server's receive; src was overwritten
// right after the call returned. The remote memory gets the value given at the call.
TEST_P(AtomicWriteTest, SrcIsReusableAsSoonAsTheCallReturns) {
  std::unique_ptr<OpsPair> pair = MakePair();
  ASSERT_NE(pair, nullptr);
  ASSERT_EQ(rpma_send(pair->client(), pair->client_mr(), 0, 4, RPMA_F_COMPLETION_ON_ERROR,
                      nullptr),
            0);
  char src[8];
  std::memcpy(src, "givenval", 8);
  ASSERT_EQ(rpma_atomic_write(pair->client(), pair->server_remote(), 0, src, kAlways, nullptr),
            0);
  std::memcpy(src, "REUSED!!", 8);
  EXPECT_EQ(std::string(pair->server_region(), 8), std::string(8, '\0')) << "still held up";

  ASSERT_EQ(rpma_recv(pair->server(), pair->server_inbox(), 0, 64, nullptr), 0);
  absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair->client()));

  ASSERT_TRUE(wc.ok()) << wc.status();
  EXPECT_EQ(wc->opcode, ExpectedOpcode());
  EXPECT_EQ(std::string(pair->server_region(), 8), "givenval");
}

// The remote region starts 4 bytes into an 8-byte aligned buffer: dst_offset 0 is aligned as
// the man page asks, yet the address is not; the simulated NIC rejects a native atomic write
// (real NICs require an aligned address too). Simulator-only: how a real NIC reports it varies.
// (The emulation is a plain RDMA WRITE, which any address takes, as with librpma.)
TEST_P(AtomicWriteTest, NativeRemoteAddressNotAligned_CompletesWithError) {
  if (!SimulatedNicSelected()) GTEST_SKIP() << "checks the simulated NIC's status code";
  if (!Native()) GTEST_SKIP() << "the emulated atomic write is an ordinary RDMA WRITE";
  OpsPairOptions options;
  options.server_region_offset = 4;
  std::unique_ptr<OpsPair> pair = MakePair(options);
  ASSERT_NE(pair, nullptr);
  const char src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_EQ(rpma_atomic_write(pair->client(), pair->server_remote(), 0, src,
                              RPMA_F_COMPLETION_ON_ERROR, nullptr),
            0);
  absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair->client()));
  ASSERT_TRUE(wc.ok()) << wc.status();
  EXPECT_EQ(wc->status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(std::string(pair->server_region(), 8), std::string(8, '\0'));
}

// A reader thread loads the target word over and over while the client's atomic writes
// alternate between two patterns that differ in every byte: any torn store would show a value
// that is neither. (With a non-atomic store this fails plainly, and under TSan as a race.)
TEST_P(AtomicWriteTest, ConcurrentReader_NeverSeesATornValue) {
  std::unique_ptr<OpsPair> pair = MakePair();
  ASSERT_NE(pair, nullptr);
  uint64_t* target = reinterpret_cast<uint64_t*>(pair->server_region() + 16);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(target) % 8, 0u);
  sim::testing::TornWordReader reader(target);

  constexpr int kWrites = 10000;
  int failures = 0;
  for (int i = 0; i < kWrites && failures == 0; ++i) {
    char src[8];
    const uint64_t value = sim::testing::TornWordReader::Pattern(i);
    std::memcpy(src, &value, 8);
    if (rpma_atomic_write(pair->client(), pair->server_remote(), 16, src, kAlways, nullptr) !=
        0) {
      ++failures;
      break;
    }
    absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair->client()));
    if (!wc.ok() || wc->status != IBV_WC_SUCCESS) ++failures;
  }
  reader.Stop();

  EXPECT_EQ(failures, 0);
  EXPECT_EQ(reader.torn(), 0u) << "the reader saw a mix of the two patterns";
  EXPECT_GT(reader.reads(), 0u);
  EXPECT_EQ(reader.now(), sim::testing::TornWordReader::Pattern(kWrites - 1));
}

}  // namespace
}  // namespace softrpma::ops_testing
