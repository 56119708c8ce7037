#include "tools/rpma_sim/sweep_kinds.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace softrpma::rpma_sim {
namespace {

constexpr const char* kKindNames[kNumSweepKinds] = {"fail", "wc", "conn", "kill"};

std::string ValidKinds() {
  return absl::StrJoin(std::begin(kKindNames), std::end(kKindNames), ", ");
}

bool IsPost(absl::string_view point) {
  return point == "ibv_post_send" || point == "ibv_post_recv" || point == "ibv_wr_complete";
}

}  // namespace

const char* SweepKindName(SweepKind kind) { return kKindNames[static_cast<int>(kind)]; }

std::vector<SweepKind> AllSweepKinds() {
  std::vector<SweepKind> kinds;
  for (int i = 0; i < kNumSweepKinds; ++i) kinds.push_back(static_cast<SweepKind>(i));
  return kinds;
}

absl::StatusOr<std::vector<SweepKind>> ParseSweepKinds(absl::string_view list) {
  bool given[kNumSweepKinds] = {};
  bool any = false;
  for (absl::string_view name : absl::StrSplit(list, ',')) {
    name = absl::StripAsciiWhitespace(name);
    if (name.empty()) continue;
    const auto* it = std::find(std::begin(kKindNames), std::end(kKindNames), name);
    if (it == std::end(kKindNames)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown fault kind \"", name,
                                                     "\"; the kinds are ", ValidKinds()));
    }
    const int index = static_cast<int>(it - std::begin(kKindNames));
    if (given[index]) {
      return absl::InvalidArgumentError(absl::StrCat("fault kind \"", name, "\" is listed twice"));
    }
    given[index] = true;
    any = true;
  }
  if (!any) {
    return absl::InvalidArgumentError(
        absl::StrCat("no fault kind given; the kinds are ", ValidKinds()));
  }
  std::vector<SweepKind> kinds;
  for (int i = 0; i < kNumSweepKinds; ++i) {
    if (given[i]) kinds.push_back(static_cast<SweepKind>(i));
  }
  return kinds;
}

std::optional<SweepKind> KindOfAction(absl::string_view action) {
  if (absl::StartsWith(action, "fail=")) return SweepKind::kFail;
  if (absl::StartsWith(action, "wc_status=")) return SweepKind::kWc;
  if (action == "lost" || action == "disconnect" || action == "reject" ||
      action == "unreachable") {
    return SweepKind::kConn;
  }
  if (action == "kill") return SweepKind::kKill;
  return std::nullopt;
}

std::vector<std::string> WcStatusesAt(absl::string_view point, absl::string_view device) {
  if (point == "ibv_post_recv") return {"IBV_WC_WR_FLUSH_ERR", "IBV_WC_LOC_LEN_ERR"};
  if (point == "ibv_wr_complete") {
    return {"IBV_WC_REM_ACCESS_ERR", "IBV_WC_RETRY_EXC_ERR", "IBV_WC_LOC_PROT_ERR"};
  }
  if (point != "ibv_post_send") return {};
  std::vector<std::string> statuses = {"IBV_WC_REM_ACCESS_ERR", "IBV_WC_RETRY_EXC_ERR",
                                       "IBV_WC_LOC_PROT_ERR", "IBV_WC_REM_INV_REQ_ERR"};
  // iWARP has no receiver-not-ready retries: a SEND that finds no receive is a remote error
  // there, not an RNR retry count exceeded.
  if (device != "siw") statuses.push_back("IBV_WC_RNR_RETRY_EXC_ERR");
  return statuses;
}

std::vector<SweepEffect> EffectsAt(absl::string_view point, bool multi_process,
                                   const std::vector<SweepKind>& kinds, absl::string_view device) {
  std::vector<SweepEffect> effects;
  for (SweepKind kind : kinds) {
    switch (kind) {
      case SweepKind::kFail:
        effects.push_back({kind, point == "malloc" ? "fail=ENOMEM" : "fail=EIO"});
        break;
      case SweepKind::kWc:
        for (const std::string& status : WcStatusesAt(point, device)) {
          effects.push_back({kind, absl::StrCat("wc_status=", status)});
        }
        break;
      case SweepKind::kConn:
        if (IsPost(point)) {
          effects.push_back({kind, "lost"});
          effects.push_back({kind, "disconnect"});
        } else if (point == "rdma_connect" || point == "rdma_accept") {
          effects.push_back({kind, "reject"});
          effects.push_back({kind, "unreachable"});
        }
        break;
      case SweepKind::kKill:
        // One process of one name killed: its peers are what is swept. Where the processes go
        // by one name (a program forking copies of itself) a kill would hit them all at once.
        if (multi_process) effects.push_back({kind, "kill"});
        break;
    }
  }
  return effects;
}

size_t EffectRank(absl::string_view point, absl::string_view action, absl::string_view device) {
  const std::vector<SweepEffect> all = EffectsAt(point, true, AllSweepKinds(), device);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].action == action) return i;
  }
  // fail=<errno> other than the sweep's own (a report of another version): first, with fail.
  if (absl::StartsWith(action, "fail=")) return 0;
  return all.size();
}

}  // namespace softrpma::rpma_sim
