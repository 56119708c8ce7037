// shard.h: one part of a sweep's plan. `sweep --shard=K/N` (or Bazel's TEST_TOTAL_SHARDS and
// TEST_SHARD_INDEX, for a sweep declared as a sharded test) runs part K of N: every run of the
// plan belongs to exactly one part, decided by the run itself (its program, point and hit), not
// by its position, so that shards whose clean runs listed the points differently still never
// run one run twice; the union of the N parts is the whole plan.
//
// Thread-safety: every function is thread-safe (none keeps state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_SHARD_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_SHARD_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/rpma_sim/sweep_plan.h"

namespace softrpma::rpma_sim {

// Part `index` (1-based) of `total`. REQUIRES: 1 <= index <= total.
struct Shard {
  uint64_t index = 1;
  uint64_t total = 1;
};

// "K/N", how messages and reports spell a shard.
std::string ShardName(const Shard& shard);

// Parses "K/N" (decimal, 1 <= K <= N, N <= 1000000). Errors: InvalidArgument saying what is
// wrong ("0/3": shards are numbered from 1; "4/3": there is no shard 4 of 3; "a/b"; "3/0").
absl::StatusOr<Shard> ParseShard(absl::string_view text);

// The variables Bazel sets in a test with shard_count.
inline constexpr char kTotalShardsVar[] = "TEST_TOTAL_SHARDS";
inline constexpr char kShardIndexVar[] = "TEST_SHARD_INDEX";  // 0-based
inline constexpr char kShardStatusFileVar[] = "TEST_SHARD_STATUS_FILE";

// The shard Bazel asks for, read with `getenv`: none when TEST_TOTAL_SHARDS is unset or empty;
// else TEST_SHARD_INDEX + 1 of TEST_TOTAL_SHARDS. Errors: InvalidArgument naming the variable
// when one is malformed or out of range, or TEST_SHARD_INDEX is missing.
absl::StatusOr<std::optional<Shard>> ShardFromEnvironment(
    const std::function<const char*(const char*)>& getenv);

// Which part of `total` the run of (prog, point, nth) belongs to, 1-based: a fixed hash
// (64-bit FNV-1a of "prog:point:nth", then MurmurHash3's finalizer) modulo total, the same on
// every machine and build. The parts are as even as a hash makes them: a plan of a few runs
// may leave a part empty.
uint64_t ShardOfRun(absl::string_view prog, absl::string_view point, uint64_t nth,
                    uint64_t total);

// The runs of `plan` that belong to `shard`, in plan order: ShardOfRun of the run's prog, nth
// and its point, for a run of another kind than fail "<point>/<action>"
// ("ibv_post_send/wc_status=IBV_WC_REM_ACCESS_ERR").
std::vector<PlannedRun> TakeShard(const std::vector<PlannedRun>& plan, const Shard& shard);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_SHARD_H_
