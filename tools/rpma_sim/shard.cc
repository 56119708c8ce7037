#include "tools/rpma_sim/shard.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace softrpma::rpma_sim {
namespace {

constexpr uint64_t kMaxShards = 1000000;

// A decimal number of digits only (no sign, no blanks), or nullopt.
std::optional<uint64_t> Decimal(absl::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) return std::nullopt;
  return value;
}

}  // namespace

std::string ShardName(const Shard& shard) { return absl::StrCat(shard.index, "/", shard.total); }

absl::StatusOr<Shard> ParseShard(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  std::optional<uint64_t> index = parts.size() == 2 ? Decimal(parts[0]) : std::nullopt;
  std::optional<uint64_t> total = parts.size() == 2 ? Decimal(parts[1]) : std::nullopt;
  if (!index.has_value() || !total.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not K/N (shard K of N, two decimal numbers, e.g. 2/3)"));
  }
  if (*total == 0) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\": N must be at least 1"));
  }
  if (*total > kMaxShards) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": at most ", kMaxShards, " shards"));
  }
  if (*index == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": shards are numbered from 1 (1/", *total, " to ", *total,
                     "/", *total, ")"));
  }
  if (*index > *total) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": there is no shard ", *index, " of ", *total));
  }
  return Shard{*index, *total};
}

absl::StatusOr<std::optional<Shard>> ShardFromEnvironment(
    const std::function<const char*(const char*)>& getenv) {
  const char* total_text = getenv(kTotalShardsVar);
  if (total_text == nullptr || *total_text == '\0') return std::optional<Shard>();
  std::optional<uint64_t> total = Decimal(total_text);
  if (!total.has_value() || *total == 0 || *total > kMaxShards) {
    return absl::InvalidArgumentError(absl::StrCat(kTotalShardsVar, "=\"", total_text,
                                                   "\": expected a number of shards, 1 to ",
                                                   kMaxShards));
  }
  const char* index_text = getenv(kShardIndexVar);
  if (index_text == nullptr || *index_text == '\0') {
    return absl::InvalidArgumentError(
        absl::StrCat(kTotalShardsVar, " is set but ", kShardIndexVar, " is not"));
  }
  std::optional<uint64_t> index = Decimal(index_text);
  if (!index.has_value() || *index >= *total) {
    return absl::InvalidArgumentError(absl::StrCat(kShardIndexVar, "=\"", index_text,
                                                   "\": expected 0 to ", *total - 1, " (",
                                                   kTotalShardsVar, "=", *total, ")"));
  }
  return std::optional<Shard>(Shard{*index + 1, *total});
}

uint64_t ShardOfRun(absl::string_view prog, absl::string_view point, uint64_t nth,
                    uint64_t total) {
  uint64_t hash = 0xcbf29ce484222325u;  // FNV-1a, 64 bits
  for (char c : absl::StrCat(prog, ":", point, ":", nth)) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3u;
  }
  // MurmurHash3's finalizer: every bit of the key reaches the low bits the modulo keeps.
  hash ^= hash >> 33;
  hash *= 0xff51afd7ed558ccdu;
  hash ^= hash >> 33;
  hash *= 0xc4ceb9fe1a85ec53u;
  hash ^= hash >> 33;
  return total == 0 ? 1 : hash % total + 1;
}

std::vector<PlannedRun> TakeShard(const std::vector<PlannedRun>& plan, const Shard& shard) {
  std::vector<PlannedRun> out;
  for (const PlannedRun& run : plan) {
    // A fail run hashes as before kinds; another effect joins the point's name, so that the
    // effects of one hit spread over the shards too.
    const std::string key =
        run.kind == SweepKind::kFail ? run.point : absl::StrCat(run.point, "/", run.action);
    if (ShardOfRun(run.prog, key, run.nth, shard.total) == shard.index) out.push_back(run);
  }
  return out;
}

}  // namespace softrpma::rpma_sim
