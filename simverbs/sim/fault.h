// fault.h: the simulated NIC's fault model: named fault points, the fault spec grammar
// (RPMA_SIM_FAULTS), a parsed fault plan and the process-wide injector that consults it.
//
// The fault model, in one paragraph: every Backend method of the simulator is a fault point
// named after the verbs / rdma_cm call it stands for ("ibv_post_send", "rdma_connect", ...),
// plus "malloc" (every softrpma::New<T> in the process, see simverbs/alloc.h). A fault plan is a
// list of rules `point:action[:condition...]`; each call of a point is one "hit" (counted per
// point, per plan, atomically) and the first rule of that point whose conditions hold for the
// hit's number decides what happens: `fail=<errno>` makes the call fail with that errno (without
// doing anything else) and `unknown_cq` (ibv_get_cq_event only) makes it return a CQ that
// belongs to no channel. Every injection is logged to stderr and counted. With no plan
// installed a fault point costs one relaxed atomic load. The full grammar and every point are
// in docs/FAULTS.md.
//
// Adding a point: add an enumerator to FaultPoint and a row to kFaultPointTable (fault.cc) in the
// same position. Adding an action: a FaultAction::Kind, its parse rule in ParseAction (fault.cc)
// and the points it is valid for (FaultPointInfo).

#ifndef SOFTRPMA_SIMVERBS_SIM_FAULT_H_
#define SOFTRPMA_SIMVERBS_SIM_FAULT_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "simverbs/mutex.h"

namespace softrpma::sim {

// The name of the environment variable read once when the simulator starts.
inline constexpr char kFaultsEnvVar[] = "RPMA_SIM_FAULTS";

// Every fault point. The order matches kFaultPointTable in fault.cc.
enum class FaultPoint : uint8_t {
  kIbvQueryDeviceEx,
  kIbvAllocPd,
  kIbvDeallocPd,
  kIbvRegMr,
  kIbvDeregMr,
  kIbvAdviseMr,
  kIbvCreateCompChannel,
  kIbvDestroyCompChannel,
  kIbvCreateCq,
  kIbvDestroyCq,
  kIbvReqNotifyCq,
  kIbvGetCqEvent,
  kIbvAckCqEvents,
  kIbvPollCq,
  kIbvCreateSrq,
  kIbvDestroySrq,
  kIbvPostSrqRecv,
  kIbvPostSend,
  kIbvPostRecv,
  kRdmaGetaddrinfo,
  kRdmaFreeaddrinfo,
  kRdmaCreateEventChannel,
  kRdmaDestroyEventChannel,
  kRdmaCreateId,
  kRdmaDestroyId,
  kRdmaMigrateId,
  kRdmaBindAddr,
  kRdmaResolveAddr,
  kRdmaResolveRoute,
  kRdmaListen,
  kRdmaCreateQp,
  kRdmaDestroyQp,
  kRdmaConnect,
  kRdmaAccept,
  kRdmaReject,
  kRdmaDisconnect,
  kRdmaGetCmEvent,
  kRdmaAckCmEvent,
  kMalloc,
};
inline constexpr int kNumFaultPoints = static_cast<int>(FaultPoint::kMalloc) + 1;

// What a fault point is and which actions it accepts.
struct FaultPointInfo {
  FaultPoint point;
  const char* name;     // the verbs call, e.g. "ibv_post_send"
  bool can_fail;        // false for calls that return void in verbs
  bool can_unknown_cq;  // only ibv_get_cq_event
};

// The row of `point`. Never fails.
const FaultPointInfo& GetFaultPointInfo(FaultPoint point);
// The name of `point`, e.g. "ibv_get_cq_event".
const char* FaultPointName(FaultPoint point);
// The point called `name`, or nullopt.
std::optional<FaultPoint> FaultPointByName(absl::string_view name);
// Every point's name, in enum order.
std::vector<std::string> FaultPointNames();

// The errno called `name` ("EIO", "ENOMEM", ...), or nullopt. And the reverse: the name of
// `err`, or nullptr when it is not in the table.
std::optional<int> ErrnoByName(absl::string_view name);
const char* ErrnoName(int err);

// What a rule does when it fires.
struct FaultAction {
  enum class Kind : uint8_t {
    kFail,       // the call fails with `err` (a positive errno or kNoErrno) and does nothing
    kUnknownCq,  // ibv_get_cq_event succeeds with a CQ that is on no channel
  };
  Kind kind = Kind::kFail;
  int err = 0;
};

// When a rule fires, given the 1-based number of the hit. Unset fields do not constrain; all
// set fields must hold (they are ANDed).
struct FaultCondition {
  std::optional<uint64_t> nth;    // hit == nth
  std::optional<uint64_t> after;  // hit > after
  std::optional<uint64_t> every;  // hit % every == 0
  bool Matches(uint64_t hit) const;
};

// One parsed rule.
struct FaultRule {
  FaultPoint point;
  FaultAction action;
  FaultCondition condition;
  std::string text;         // canonical form, e.g. "ibv_get_cq_event:fail=EIO:nth=1"
  std::string action_text;  // canonical action, e.g. "fail=EIO", used in the log line
};

// The result of consulting the injector at a fault point.
struct FaultDecision {
  enum class Kind : uint8_t { kNone, kFail, kUnknownCq };
  Kind kind = Kind::kNone;
  int err = 0;  // for kFail
  bool fired() const { return kind != Kind::kNone; }
};

// A parsed, immutable rule list plus its own hit and injection counters.
// Thread-safe: OnHit may be called from any number of threads at once.
class FaultPlan final {
 public:
  explicit FaultPlan(std::vector<FaultRule> rules);
  FaultPlan(const FaultPlan&) = delete;
  FaultPlan& operator=(const FaultPlan&) = delete;

  // Counts one hit of `point` and returns what the first matching rule says; logs and counts
  // an injection when one fires.
  FaultDecision OnHit(FaultPoint point);

  const std::vector<FaultRule>& rules() const { return rules_; }
  bool has_malloc_rule() const { return has_malloc_rule_; }
  uint64_t hits(FaultPoint point) const;
  uint64_t injections(FaultPoint point) const;
  void ResetCounters();

 private:
  std::vector<FaultRule> rules_;
  // Indexes into rules_ per point, in spec order.
  std::array<std::vector<uint32_t>, kNumFaultPoints> rules_by_point_;
  std::array<std::atomic<uint64_t>, kNumFaultPoints> hits_{};
  std::array<std::atomic<uint64_t>, kNumFaultPoints> injections_{};
  bool has_malloc_rule_ = false;
};

// Parses a fault spec (grammar in docs/FAULTS.md). An empty or all-blank spec is a valid plan
// with no rules (it counts hits and injects nothing).
// Errors: InvalidArgument naming the bad part, its rule number and its 1-based column, e.g.
//   fault spec rule 2, column 23: unknown errno name "EFOO" in "fail=EFOO"
absl::StatusOr<std::unique_ptr<FaultPlan>> ParseFaultSpec(absl::string_view spec);

// The process-wide injector every fault point consults.
// Thread-safe. A replaced plan is retired, not freed, because another thread may still be
// evaluating it; plans are small and replaced only by tests and tools.
class FaultInjector final {
 public:
  FaultInjector() = default;
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // What the current plan says about one hit of `point`. With no plan: one relaxed load.
  FaultDecision Check(FaultPoint point) {
    if (plan_.load(std::memory_order_relaxed) == nullptr) return FaultDecision{};
    // Slow path: load again with acquire to see the plan's contents (a fence would do, but
    // ThreadSanitizer does not understand fences).
    FaultPlan* plan = plan_.load(std::memory_order_acquire);
    if (plan == nullptr) return FaultDecision{};
    return plan->OnHit(point);
  }

  // Installs `plan` (nullptr: no plan, the fast path). Installs the alloc.h hook while the plan
  // has a "malloc" rule, and removes it otherwise (only if it is ours).
  void Install(std::unique_ptr<FaultPlan> plan);
  // The current plan, or nullptr. Stays valid for the life of the process.
  const FaultPlan* current() const { return plan_.load(std::memory_order_acquire); }
  // Resets the current plan's counters.
  void ResetCounters();

 private:
  std::atomic<FaultPlan*> plan_{nullptr};
  softrpma::Mutex mu_;
  std::vector<std::unique_ptr<FaultPlan>> plans_ ABSL_GUARDED_BY(mu_);  // current + retired
};

// The injector of this process.
FaultInjector& GlobalFaultInjector();

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_FAULT_H_
