#include "simverbs/sim/sim_control.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "simverbs/sim/nic/device.h"
#include "simverbs/sim/faults/fault.h"
#include "simverbs/sim/sched/sched.h"
#include "simverbs/sim/trace/trace.h"

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

std::vector<FaultPointDescription> DescribeFaultPoints() {
  std::vector<FaultPointDescription> points;
  for (int i = 0; i < kNumFaultPoints; ++i) {
    const FaultPointInfo& info = GetFaultPointInfo(static_cast<FaultPoint>(i));
    FaultPointDescription point;
    point.name = info.name;
    point.description = info.description;
    point.actions = FaultActionForms(info.point);
    point.accepts_qp = info.has_qp;
    points.push_back(std::move(point));
  }
  return points;
}

absl::StatusOr<uint64_t> FaultTotalHitCount(absl::string_view point) {
  absl::StatusOr<FaultPoint> p = PointByName(point);
  if (!p.ok()) return p.status();
  return GlobalFaultInjector().total_hits(*p);
}

absl::StatusOr<uint64_t> KeptObjectCount(absl::string_view point) {
  absl::StatusOr<FaultPoint> p = PointByName(point);
  if (!p.ok()) return p.status();
  return GlobalFaultInjector().kept_objects(*p);
}

std::string CurrentFaultPlan() {
  const FaultPlan* plan = GlobalFaultInjector().current();
  if (plan == nullptr) return "";
  return plan->Text("; ");
}

absl::Status SetScenario(absl::string_view text, absl::string_view name) {
  absl::StatusOr<Scenario> scenario = ParseScenario(text, name);
  if (!scenario.ok()) return scenario.status();
  if (scenario->seed.has_value()) SetSeed(*scenario->seed);
  GlobalFaultInjector().Install(std::make_unique<FaultPlan>(std::move(scenario->rules)));
  return absl::OkStatus();
}

absl::Status LoadScenario(const std::string& path) {
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(path);
  if (!scenario.ok()) return scenario.status();
  if (scenario->seed.has_value()) SetSeed(*scenario->seed);
  GlobalFaultInjector().Install(std::make_unique<FaultPlan>(std::move(scenario->rules)));
  return absl::OkStatus();
}

void SetSimSeed(uint64_t seed) { SetSeed(seed); }

uint64_t SimSeed() { return CurrentSeed(); }

absl::StatusOr<uint64_t> ParseSimSeed(absl::string_view text) { return ParseSeed(text); }

uint64_t SimClockNs() { return GlobalClock().now_ns(); }

absl::Status StartSimTrace(const std::string& path) {
  const FaultPlan* plan = GlobalFaultInjector().current();
  return StartTrace(path, CurrentSeed(), plan != nullptr ? plan->Text(";") : "", ProcessName());
}

void FinishSimTrace() { FinishTrace(); }

}  // namespace softrpma::sim
