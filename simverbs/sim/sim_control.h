// sim_control.h: the simulator's own controls, for tests and tools only (production code sees
// only the Backend interface; nothing outside tests/tools includes this header): the fault plan
// (docs/FAULTS.md), scenario files, the seed and the simulated clock, the trace (docs/TRACE.md).
// C programs get the same through api/include/librpma_sim.h.
//
// The fault plan and the seed are process-wide (every backend user sees them), so tests that
// set a plan should clear it when done (ScopedFaultPlan does). Thread-safety: every function is
// thread-safe; replacing or clearing the plan while other threads run fault points is safe
// (they finish with the plan they loaded; replaced plans are kept, not freed).

#ifndef SOFTRPMA_SIMVERBS_SIM_SIM_CONTROL_H_
#define SOFTRPMA_SIMVERBS_SIM_SIM_CONTROL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "simverbs/sim/profiles/device_profile.h"

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

// Every fault point's name, in a fixed order (the order of the RPMA_SIM_STATS file).
std::vector<std::string> ListFaultPoints();

// One fault point, for `rpma-sim points`.
struct FaultPointDescription {
  std::string name;                  // e.g. "ibv_post_send"
  std::string description;           // one line: the call, and what failing it does in librpma
  std::vector<std::string> actions;  // the actions it accepts, e.g. {"fail=<errno>", "delay=<ns>"}
  bool accepts_qp = false;           // the qp= condition is valid for it
};
// Every fault point, in ListFaultPoints() order.
std::vector<FaultPointDescription> DescribeFaultPoints();

// Hits of a point over the whole run, across plan changes (counted while any plan, possibly
// empty, is installed; always when RPMA_SIM_STATS is set). Errors: NotFound (unknown point).
absl::StatusOr<uint64_t> FaultTotalHitCount(absl::string_view point);

// Objects that destroy calls of a point (ibv_dereg_mr, rdma_destroy_id, rdma_ack_cm_event...)
// left alive in this process because a fault failed the call (the `# kept` lines of the stats
// file). Errors: NotFound (unknown point).
absl::StatusOr<uint64_t> KeptObjectCount(absl::string_view point);

// Installs the rules of a scenario file's text (docs/FAULTS.md) as the fault plan, and its seed
// when it has a `seed` line. `name` names it in errors ("<name>:<line>:<column>: ...").
// Errors: InvalidArgument; nothing is changed then.
absl::Status SetScenario(absl::string_view text, absl::string_view name = "scenario");
// The same for the file at `path`. Errors: InvalidArgument (unreadable file, bad line).
absl::Status LoadScenario(const std::string& path);

// The seed (docs/TRACE.md). Setting it affects QPs created afterwards and later fault
// decisions (prob=), and writes a `seed` line to the trace.
void SetSimSeed(uint64_t seed);
uint64_t SimSeed();
// Parses a seed as RPMA_SIM_SEED does (decimal or 0x-hex). Errors: InvalidArgument.
absl::StatusOr<uint64_t> ParseSimSeed(absl::string_view text);
// The simulated clock, in nanoseconds since the process started simulating.
uint64_t SimClockNs();

// Starts writing a trace to `path` (what RPMA_SIM_TRACE does), with the current seed and plan
// in its header. Errors: FailedPrecondition (one is open), InvalidArgument (cannot open).
absl::Status StartSimTrace(const std::string& path);
// Writes the trace's end line and closes it (also done at exit). No-op without a trace.
void FinishSimTrace();

// The canonical text of the current plan's rules ("" without a plan), e.g.
// "ibv_get_cq_event:fail=EIO:nth=1; ibv_req_notify_cq:fail=ENOMEM:nth=2".
std::string CurrentFaultPlan();

// Whether the device reports on-demand paging (odp_caps in ibv_query_device_ex, and accepts
// IBV_ACCESS_ON_DEMAND and ibv_advise_mr). Default: the device profile's (on for mlx5 and
// rxe, off for siw: docs/DEVICES.md); a call overrides it for the rest of the process.
void SetOdpSupported(bool supported);
// Whether the device reports native atomic write (ibv_query_device_ex) and accepts extended
// QPs with IBV_QP_EX_WITH_ATOMIC_WRITE. Default: the device profile's (off for mlx5 and siw:
// librpma then emulates it; on for rxe); a call overrides it for the rest of the process.
void SetAtomicWriteSupported(bool supported);
// Forgets the two overrides above: the device profile decides again.
void ResetDeviceOverrides();
// (The profiles themselves, FindDeviceProfile() and SetActiveProfile(): device_profile.h.)

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
