#include "simverbs/sim/sim_control.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "simverbs/sim/device.h"
#include "simverbs/sim/fault.h"

namespace softrpma::sim {
namespace {

absl::StatusOr<FaultPoint> PointByName(absl::string_view name) {
  std::optional<FaultPoint> point = FaultPointByName(name);
  if (!point.has_value()) {
    return absl::NotFoundError(absl::StrCat("no fault point is called \"", name, "\""));
  }
  return *point;
}

}  // namespace

absl::Status SetFaultPlan(absl::string_view spec) {
  absl::StatusOr<std::unique_ptr<FaultPlan>> plan = ParseFaultSpec(spec);
  if (!plan.ok()) return plan.status();
  GlobalFaultInjector().Install(*std::move(plan));
  return absl::OkStatus();
}

void ClearFaultPlan() { GlobalFaultInjector().Install(nullptr); }

absl::StatusOr<uint64_t> FaultHitCount(absl::string_view point) {
  absl::StatusOr<FaultPoint> p = PointByName(point);
  if (!p.ok()) return p.status();
  const FaultPlan* plan = GlobalFaultInjector().current();
  return plan == nullptr ? 0 : plan->hits(*p);
}

absl::StatusOr<uint64_t> FaultInjectionCount(absl::string_view point) {
  absl::StatusOr<FaultPoint> p = PointByName(point);
  if (!p.ok()) return p.status();
  const FaultPlan* plan = GlobalFaultInjector().current();
  return plan == nullptr ? 0 : plan->injections(*p);
}

void ResetFaultCounters() { GlobalFaultInjector().ResetCounters(); }

std::vector<std::string> ListFaultPoints() { return FaultPointNames(); }

std::string CurrentFaultPlan() {
  const FaultPlan* plan = GlobalFaultInjector().current();
  if (plan == nullptr) return "";
  return absl::StrJoin(plan->rules(), "; ",
                       [](std::string* out, const FaultRule& rule) { out->append(rule.text); });
}

}  // namespace softrpma::sim
