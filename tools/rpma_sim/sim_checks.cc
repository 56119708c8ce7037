#include "tools/rpma_sim/sim_checks.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "simverbs/sim/sim_control.h"

namespace softrpma::rpma_sim {

absl::Status CheckFaultSpec(absl::string_view spec) {
  absl::Status status = sim::SetFaultPlan(spec);
  sim::ClearFaultPlan();
  return status;
}

absl::Status CheckScenarioFile(const std::string& path) {
  absl::Status status = sim::LoadScenario(path);
  sim::ClearFaultPlan();
  return status;
}

bool CanFail(absl::string_view point, absl::string_view err_name) {
  return CheckFaultSpec(absl::StrCat(point, ":fail=", err_name, ":nth=1")).ok();
}

std::vector<PointInfo> ListPoints() {
  std::vector<PointInfo> points;
  for (sim::FaultPointDescription& d : sim::DescribeFaultPoints()) {
    PointInfo info;
    info.can_fail = CanFail(d.name, "EIO");
    info.name = std::move(d.name);
    info.description = std::move(d.description);
    info.actions = std::move(d.actions);
    info.accepts_qp = d.accepts_qp;
    points.push_back(std::move(info));
  }
  return points;
}

}  // namespace softrpma::rpma_sim
