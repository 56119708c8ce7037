// sim_control.h: the simulator's own controls, for tests and tools only (production code sees
// only the Backend interface; nothing outside tests/tools includes this header).
//
// The fault plan is process-wide (every backend user sees it), so tests that set one should
// clear it when done (ScopedFaultPlan does). Thread-safety: every function is thread-safe;
// replacing or clearing the plan while other threads run fault points is safe (they finish with
// the plan they loaded; replaced plans are kept, not freed).

#ifndef SOFTRPMA_SIMVERBS_SIM_SIM_CONTROL_H_
#define SOFTRPMA_SIMVERBS_SIM_SIM_CONTROL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace softrpma::sim {

// Replaces the fault plan with the one `spec` describes (grammar: docs/FAULTS.md). An empty
// spec installs a plan with no rules, which counts hits and injects nothing. Counters start at
// zero. Errors: InvalidArgument naming the rule, the column and the bad part; the current plan
// is then left as it was.
absl::Status SetFaultPlan(absl::string_view spec);

// Removes the fault plan: no fault fires, hits are not counted (the fast path).
void ClearFaultPlan();

// Hits / injections of a point under the current plan (0 without a plan). A hit is one call of
// the point; "malloc" is counted only while the plan has a malloc rule.
// Errors: NotFound for an unknown point name.
absl::StatusOr<uint64_t> FaultHitCount(absl::string_view point);
absl::StatusOr<uint64_t> FaultInjectionCount(absl::string_view point);

// Zeroes the current plan's counters (the hit numbers nth/after/every see start again at 1).
void ResetFaultCounters();

// Every fault point's name, in a fixed order.
std::vector<std::string> ListFaultPoints();

// The canonical text of the current plan's rules ("" without a plan), e.g.
// "ibv_get_cq_event:fail=EIO:nth=1; ibv_req_notify_cq:fail=ENOMEM:nth=2".
std::string CurrentFaultPlan();

// Whether the device reports on-demand paging (odp_caps in ibv_query_device_ex, and accepts
// IBV_ACCESS_ON_DEMAND and ibv_advise_mr). Default: off.
void SetOdpSupported(bool supported);

// Test helper: installs a plan for its lifetime, then clears the plan.
class ScopedFaultPlan final {
 public:
  // REQUIRES: spec parses (check status()).
  explicit ScopedFaultPlan(absl::string_view spec) : status_(SetFaultPlan(spec)) {}
  ScopedFaultPlan(const ScopedFaultPlan&) = delete;
  ScopedFaultPlan& operator=(const ScopedFaultPlan&) = delete;
  ~ScopedFaultPlan() { ClearFaultPlan(); }
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_SIM_CONTROL_H_
