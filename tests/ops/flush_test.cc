// rpma_flush(3) end to end, through the public API on the selected backend (the simulated NIC by
// default): a flush completes only after every earlier write of its connection is applied
// (also when those writes are held up), it completes as IBV_WC_RDMA_READ with the caller's
// op_context, RPMA_FLUSH_TYPE_PERSISTENT needs the remote peer's direct write to PMem applied to
// the connection, and the remote region must support the flush type.

#include <cstring>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "librpma.h"
#include "tests/ops/ops_pair.h"

namespace softrpma::ops_testing {
namespace {

constexpr int kAlways = RPMA_F_COMPLETION_ALWAYS;
constexpr int kOnError = RPMA_F_COMPLETION_ON_ERROR;

std::unique_ptr<OpsPair> MakePair(const OpsPairOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<OpsPair>> pair = OpsPair::Create(options);
  EXPECT_TRUE(pair.ok()) << pair.status();
  return pair.ok() ? std::move(*pair) : nullptr;
}

TEST(FlushTest, WriteWriteFlush_BothWritesAreVisibleWhenTheFlushCompletes) {
  std::unique_ptr<OpsPair> pair = MakePair();
  ASSERT_NE(pair, nullptr);
  std::memcpy(pair->client_buf(), "first write.", 12);
  std::memcpy(pair->client_buf() + 12, "second write", 12);
  int flush_context = 0;

  ASSERT_EQ(rpma_write(pair->client(), pair->server_remote(), 0, pair->client_mr(), 0, 12,
                       kOnError, nullptr),
            0);
  ASSERT_EQ(rpma_write(pair->client(), pair->server_remote(), 100, pair->client_mr(), 12, 12,
                       kOnError, nullptr),
            0);
  ASSERT_EQ(rpma_flush(pair->client(), pair->server_remote(), 0, 112,
                       RPMA_FLUSH_TYPE_VISIBILITY, kAlways, &flush_context),
            0);
  absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair->client()));

  ASSERT_TRUE(wc.ok()) << wc.status();
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->opcode, IBV_WC_RDMA_READ) << "a flush travels as an RDMA read";
  EXPECT_EQ(wc->wr_id, reinterpret_cast<uint64_t>(&flush_context));
  EXPECT_EQ(std::string(pair->server_region(), 12), "first write.");
  EXPECT_EQ(std::string(pair->server_region() + 100, 12), "second write");
  EXPECT_TRUE(pair->Close().ok());
}

// The writes are held up behind a send that waits for the server's receive (RC: nothing
// overtakes it). The flush must not complete before they are applied.
TEST(FlushTest, WritesHeldUp_FlushCompletesOnlyAfterTheyAreApplied) {
  std::unique_ptr<OpsPair> pair = MakePair();
  ASSERT_NE(pair, nullptr);
  rpma_conn* client = pair->client();
  std::memcpy(pair->client_buf(), "ping", 4);
  std::memcpy(pair->client_buf() + 16, "AAAAAAAA", 8);
  std::memcpy(pair->client_buf() + 32, "BBBBBBBB", 8);
  int send_context = 0;
  int flush_context = 0;

  ASSERT_EQ(rpma_send(client, pair->client_mr(), 0, 4, kAlways, &send_context), 0);
  ASSERT_EQ(rpma_write(client, pair->server_remote(), 8, pair->client_mr(), 16, 8, kOnError,
                       nullptr),
            0);
  ASSERT_EQ(rpma_write(client, pair->server_remote(), 200, pair->client_mr(), 32, 8, kOnError,
                       nullptr),
            0);
  ASSERT_EQ(rpma_flush(client, pair->server_remote(), 8, 200, RPMA_FLUSH_TYPE_VISIBILITY,
                       kAlways, &flush_context),
            0);

  ibv_wc early;
  int got = 0;
  EXPECT_EQ(rpma_cq_get_wc(CqOf(client), 1, &early, &got), RPMA_E_NO_COMPLETION)
      << "nothing may complete while the send waits";
  EXPECT_EQ(std::string(pair->server_region() + 8, 8), std::string(8, '\0'));
  EXPECT_EQ(std::string(pair->server_region() + 200, 8), std::string(8, '\0'));

  ASSERT_EQ(rpma_recv(pair->server(), pair->server_inbox(), 0, 64, nullptr), 0);

  absl::StatusOr<ibv_wc> send_wc = NextCompletion(CqOf(client));
  ASSERT_TRUE(send_wc.ok()) << send_wc.status();
  EXPECT_EQ(send_wc->wr_id, reinterpret_cast<uint64_t>(&send_context));
  absl::StatusOr<ibv_wc> flush_wc = NextCompletion(CqOf(client));
  ASSERT_TRUE(flush_wc.ok()) << flush_wc.status();
  EXPECT_EQ(flush_wc->wr_id, reinterpret_cast<uint64_t>(&flush_context));
  EXPECT_EQ(flush_wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(flush_wc->opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(std::string(pair->server_region() + 8, 8), "AAAAAAAA");
  EXPECT_EQ(std::string(pair->server_region() + 200, 8), "BBBBBBBB");
  EXPECT_TRUE(pair->Close().ok());
}

TEST(FlushTest, Persistent_DirectWriteToPmemApplied_Completes) {
  OpsPairOptions options;
  options.server_direct_write_to_pmem = true;
  std::unique_ptr<OpsPair> pair = MakePair(options);
  ASSERT_NE(pair, nullptr);
  std::memcpy(pair->client_buf(), "durable", 7);
  ASSERT_EQ(rpma_write(pair->client(), pair->server_remote(), 0, pair->client_mr(), 0, 7,
                       kOnError, nullptr),
            0);
  ASSERT_EQ(rpma_flush(pair->client(), pair->server_remote(), 0, 7, RPMA_FLUSH_TYPE_PERSISTENT,
                       kAlways, nullptr),
            0);
  absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair->client()));
  ASSERT_TRUE(wc.ok()) << wc.status();
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::string(pair->server_region(), 7), "durable");
}

TEST(FlushTest, Persistent_PeerWithoutDirectWriteToPmem_ReturnsNosupp) {
  OpsPairOptions options;
  options.server_direct_write_to_pmem = false;
  std::unique_ptr<OpsPair> pair = MakePair(options);
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(rpma_flush(pair->client(), pair->server_remote(), 0, 8, RPMA_FLUSH_TYPE_PERSISTENT,
                       kAlways, nullptr),
            RPMA_E_NOSUPP);
  // Visibility does not need it.
  ASSERT_EQ(rpma_flush(pair->client(), pair->server_remote(), 0, 8, RPMA_FLUSH_TYPE_VISIBILITY,
                       kAlways, nullptr),
            0);
  absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair->client()));
  ASSERT_TRUE(wc.ok()) << wc.status();
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
}

TEST(FlushTest, Persistent_PeerCfgNotApplied_ReturnsNosupp) {
  OpsPairOptions options;
  options.server_direct_write_to_pmem = true;
  options.client_applies_peer_cfg = false;
  std::unique_ptr<OpsPair> pair = MakePair(options);
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(rpma_flush(pair->client(), pair->server_remote(), 0, 8, RPMA_FLUSH_TYPE_PERSISTENT,
                       kAlways, nullptr),
            RPMA_E_NOSUPP);
}

TEST(FlushTest, RegionWithoutThatFlushType_ReturnsNosupp) {
  OpsPairOptions options;
  options.server_usage = RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
  options.server_direct_write_to_pmem = true;
  std::unique_ptr<OpsPair> pair = MakePair(options);
  ASSERT_NE(pair, nullptr);
  int flush_type = 0;
  ASSERT_EQ(rpma_mr_remote_get_flush_type(pair->server_remote(), &flush_type), 0);
  EXPECT_EQ(flush_type, RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);

  EXPECT_EQ(rpma_flush(pair->client(), pair->server_remote(), 0, 8, RPMA_FLUSH_TYPE_VISIBILITY,
                       kAlways, nullptr),
            RPMA_E_NOSUPP);
  EXPECT_EQ(rpma_flush(pair->client(), pair->server_remote(), 0, 8, RPMA_FLUSH_TYPE_PERSISTENT,
                       kAlways, nullptr),
            0);
}

TEST(FlushTest, RegionWithNoFlushUsage_ReturnsNosupp) {
  OpsPairOptions options;
  options.server_usage = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST;
  options.server_direct_write_to_pmem = true;
  std::unique_ptr<OpsPair> pair = MakePair(options);
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(rpma_flush(pair->client(), pair->server_remote(), 0, 8, RPMA_FLUSH_TYPE_VISIBILITY,
                       kAlways, nullptr),
            RPMA_E_NOSUPP);
  EXPECT_EQ(rpma_flush(pair->client(), pair->server_remote(), 0, 8, RPMA_FLUSH_TYPE_PERSISTENT,
                       kAlways, nullptr),
            RPMA_E_NOSUPP);
}

// The flush is an 8-byte read, as librpma's (flush.c): the region's last 8 bytes flush.
TEST(FlushTest, LastEightBytes_Completes) {
  OpsPairOptions options;
  options.server_region_size = 20;
  std::unique_ptr<OpsPair> pair = MakePair(options);
  ASSERT_NE(pair, nullptr);
  ASSERT_EQ(rpma_flush(pair->client(), pair->server_remote(), 12, 8, RPMA_FLUSH_TYPE_VISIBILITY,
                       kAlways, nullptr),
            0);
  absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair->client()));
  ASSERT_TRUE(wc.ok()) << wc.status();
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
}

// The 8-byte read is not trimmed at the region's end (as upstream): a flush of fewer than 8
// bytes at the end of the region, or of a region under 8 bytes, reads past the region and
// completes with a remote access error, as on a real NIC.
TEST(FlushTest, LastSevenBytesOrRegionUnderEightBytes_CompletesWithRemoteAccessError) {
  struct Case {
    size_t region_size;
    size_t offset;
  };
  for (const Case& c : {Case{20, 13}, Case{20, 20}, Case{4, 0}}) {
    OpsPairOptions options;
    options.server_region_size = c.region_size;
    std::unique_ptr<OpsPair> pair = MakePair(options);
    ASSERT_NE(pair, nullptr);
    ASSERT_EQ(rpma_flush(pair->client(), pair->server_remote(), c.offset,
                         c.region_size - c.offset, RPMA_FLUSH_TYPE_VISIBILITY, kOnError, nullptr),
              0);
    absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair->client()));
    ASSERT_TRUE(wc.ok()) << wc.status();
    EXPECT_EQ(wc->status, IBV_WC_REM_ACCESS_ERR)
        << "region " << c.region_size << " offset " << c.offset;
  }
}

// An offset past the region is not checked by rpma_flush (as rpma_read / rpma_write): the
// remote side rejects the read.
TEST(FlushTest, OffsetPastTheRegion_CompletesWithRemoteAccessError) {
  OpsPairOptions options;
  options.server_region_size = 64;
  std::unique_ptr<OpsPair> pair = MakePair(options);
  ASSERT_NE(pair, nullptr);
  ASSERT_EQ(rpma_flush(pair->client(), pair->server_remote(), 72, 8, RPMA_FLUSH_TYPE_VISIBILITY,
                       kOnError, nullptr),
            0);
  absl::StatusOr<ibv_wc> wc = NextCompletion(CqOf(pair->client()));
  ASSERT_TRUE(wc.ok()) << wc.status();
  EXPECT_EQ(wc->status, IBV_WC_REM_ACCESS_ERR);
}

// Each connection's flush scratch is released with it: the peer deletes cleanly afterwards.
TEST(FlushTest, ManyConnectionsThatFlushed_ReleaseEverything) {
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<OpsPair> pair = MakePair();
    ASSERT_NE(pair, nullptr);
    ASSERT_EQ(rpma_flush(pair->client(), pair->server_remote(), 0, 8, RPMA_FLUSH_TYPE_VISIBILITY,
                         kAlways, nullptr),
              0);
    ASSERT_TRUE(NextCompletion(CqOf(pair->client())).ok());
    absl::Status closed = pair->Close();
    EXPECT_TRUE(closed.ok()) << closed;
  }
}

}  // namespace
}  // namespace softrpma::ops_testing
