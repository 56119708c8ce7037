#include "tools/rpma_sim/sweep_plan.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace softrpma::rpma_sim {

absl::StatusOr<std::vector<PointHits>> ParseStats(absl::string_view text) {
  std::vector<PointHits> out;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    PointHits entry;
    if (fields.size() != 2 || !absl::SimpleAtoi(fields[1], &entry.hits)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stats line ", line_number, ": expected `<point> <hits>`, got \"", line, "\""));
    }
    entry.point = std::string(fields[0]);
    out.push_back(std::move(entry));
  }
  return out;
}

std::string PointLabel(const PointHits& p) {
  return p.prog.empty() ? p.point : absl::StrCat(p.prog, ":", p.point);
}

std::string StatsProcessName(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "# process ")) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    return fields.empty() ? "" : std::string(fields[0]);
  }
  return "";
}

absl::StatusOr<uint64_t> StatsKeptObjects(absl::string_view text) {
  uint64_t kept = 0;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    absl::string_view fields_text = line;
    if (!absl::ConsumePrefix(&fields_text, "# kept ")) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(fields_text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    uint64_t objects = 0;
    if (fields.size() != 2 || !absl::SimpleAtoi(fields[1], &objects)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stats line ", line_number, ": expected `# kept <point> <objects>`, got \"", line, "\""));
    }
    kept += objects;
  }
  return kept;
}

absl::StatusOr<std::vector<PointHits>> MergeProcessStats(const std::vector<std::string>& texts) {
  std::map<std::string, std::vector<PointHits>> by_name;  // sorted names
  for (size_t i = 0; i < texts.size(); ++i) {
    absl::StatusOr<std::vector<PointHits>> parsed = ParseStats(texts[i]);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("process ", i + 1, " of ", texts.size(), ": ", parsed.status().message()));
    }
    std::vector<PointHits>& merged = by_name[StatsProcessName(texts[i])];
    for (const PointHits& p : *parsed) {
      auto it = std::find_if(merged.begin(), merged.end(),
                             [&p](const PointHits& m) { return m.point == p.point; });
      if (it == merged.end()) {
        merged.push_back(p);
      } else {
        it->hits = std::max(it->hits, p.hits);
      }
    }
  }
  std::vector<PointHits> out;
  for (auto& [name, points] : by_name) {
    for (PointHits& p : points) {
      if (by_name.size() > 1) p.prog = name;
      out.push_back(std::move(p));
    }
  }
  return out;
}

const char* SweepErrno(absl::string_view point) { return point == "malloc" ? "ENOMEM" : "EIO"; }

std::string SweepFaultSpec(absl::string_view point, uint64_t nth, absl::string_view prog) {
  return SweepFaultSpec(point, absl::StrCat("fail=", SweepErrno(point)), nth, prog);
}

std::string SweepFaultSpec(absl::string_view point, absl::string_view action, uint64_t nth,
                           absl::string_view prog) {
  std::string spec = absl::StrCat(point, ":", action, ":nth=", nth);
  if (!prog.empty()) absl::StrAppend(&spec, ":prog=", prog);
  return spec;
}

std::vector<uint64_t> ShareRuns(const std::vector<uint64_t>& hits, uint64_t max_runs,
                                size_t first) {
  std::vector<uint64_t> share(hits.size(), 0);
  uint64_t total = 0;
  for (uint64_t h : hits) total += h;
  if (max_runs == 0 || total <= max_runs) return hits;

  uint64_t left = max_runs;
  std::vector<size_t> open;  // points that can take more runs
  for (size_t i = 0; i < hits.size(); ++i) {
    if (hits[i] > 0) open.push_back(i);
  }
  while (left > 0 && !open.empty()) {
    uint64_t each = left / open.size();
    if (each == 0) {
      // Fewer runs left than open points (which all have the same share by now): one each to
      // the first `left` of them, counting from entry `first` round the list.
      const size_t start = static_cast<size_t>(
          std::lower_bound(open.begin(), open.end(), first) - open.begin());
      for (size_t k = 0; k < left; ++k) ++share[open[(start + k) % open.size()]];
      break;
    }
    std::vector<size_t> still_open;
    for (size_t i : open) {
      uint64_t give = std::min(each, hits[i] - share[i]);
      share[i] += give;
      left -= give;
      if (share[i] < hits[i]) still_open.push_back(i);
    }
    open = std::move(still_open);
  }
  return share;
}

std::vector<uint64_t> SpreadHits(uint64_t hits, uint64_t budget) {
  std::vector<uint64_t> out;
  if (hits == 0 || budget == 0) return out;
  if (budget >= hits) {
    for (uint64_t nth = 1; nth <= hits; ++nth) out.push_back(nth);
    return out;
  }
  if (budget == 1) return {1};
  // k-th of budget points on 1..hits: 1 + round(k * (hits - 1) / (budget - 1)). Distinct and
  // ascending because budget <= hits.
  for (uint64_t k = 0; k < budget; ++k) {
    // 128-bit product: hits may be large.
    unsigned __int128 num = static_cast<unsigned __int128>(k) * (hits - 1) * 2 + (budget - 1);
    out.push_back(1 + static_cast<uint64_t>(num / (2 * (budget - 1))));
  }
  return out;
}

std::vector<PlannedRun> PlanSweep(const std::vector<PointHits>& points, uint64_t max_runs) {
  return PlanSweep(points, {SweepKind::kFail}, "", max_runs);
}

std::vector<PlannedRun> PlanSweep(const std::vector<PointHits>& points,
                                  const std::vector<SweepKind>& kinds, absl::string_view device,
                                  uint64_t max_runs) {
  // Each point's effects, grouped by kind (EffectsAt lists them kind by kind).
  std::vector<std::vector<std::vector<SweepEffect>>> groups(points.size());
  std::vector<uint64_t> capacity(points.size(), 0);
  for (size_t i = 0; i < points.size(); ++i) {
    for (SweepEffect& e : EffectsAt(points[i].point, !points[i].prog.empty(), kinds, device)) {
      if (groups[i].empty() || groups[i].back().front().kind != e.kind) groups[i].emplace_back();
      groups[i].back().push_back(std::move(e));
      capacity[i] += points[i].hits;
    }
  }
  const std::vector<uint64_t> point_share = ShareRuns(capacity, max_runs);
  // ShareRuns within a point: there a budget of 0 means no run, not "no bound".
  auto share_of = [](const std::vector<uint64_t>& capacities, uint64_t budget, size_t first) {
    return budget == 0 ? std::vector<uint64_t>(capacities.size(), 0)
                       : ShareRuns(capacities, budget, first);
  };
  std::vector<PlannedRun> runs;
  for (size_t i = 0; i < points.size(); ++i) {
    const PointHits& p = points[i];
    // (hit, the effect's position at the point, the effect): listed hit by hit, each hit's
    // effects in their order.
    std::vector<std::tuple<uint64_t, size_t, const SweepEffect*>> chosen;
    std::vector<uint64_t> kind_capacity;
    for (const auto& group : groups[i]) kind_capacity.push_back(p.hits * group.size());
    // The odd runs start at the i-th of the kinds asked for (round the list), or the next kind
    // this point has: point by point the single runs of a tight bound go round the kinds.
    const SweepKind start_kind = kinds.empty() ? SweepKind::kFail : kinds[i % kinds.size()];
    size_t start_group = 0;
    while (start_group < groups[i].size() && groups[i][start_group].front().kind < start_kind) {
      ++start_group;
    }
    const std::vector<uint64_t> kind_share = share_of(kind_capacity, point_share[i], start_group);
    size_t position = 0;
    for (size_t k = 0; k < groups[i].size(); ++k) {
      const std::vector<SweepEffect>& group = groups[i][k];
      const std::vector<uint64_t> effect_share = share_of(
          std::vector<uint64_t>(group.size(), p.hits), kind_share[k], i % group.size());
      for (size_t e = 0; e < group.size(); ++e, ++position) {
        for (uint64_t nth : SpreadHits(p.hits, effect_share[e])) {
          chosen.emplace_back(nth, position, &group[e]);
        }
      }
    }
    std::sort(chosen.begin(), chosen.end());
    for (const auto& [nth, unused, effect] : chosen) {
      runs.push_back(PlannedRun{p.point, p.prog, nth,
                                SweepFaultSpec(p.point, effect->action, nth, p.prog),
                                effect->kind, effect->action, std::nullopt});
    }
  }
  return runs;
}

std::vector<PlannedRun> WithSeeds(const std::vector<PlannedRun>& plan, uint64_t base,
                                  uint64_t seeds) {
  if (seeds <= 1) return plan;
  std::vector<PlannedRun> out;
  out.reserve(plan.size() * seeds);
  for (const PlannedRun& run : plan) {
    for (uint64_t k = 0; k < seeds; ++k) {
      out.push_back(run);
      out.back().seed = base + k;
    }
  }
  return out;
}

}  // namespace softrpma::rpma_sim
