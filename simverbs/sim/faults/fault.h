// fault.h: the simulated NIC's fault model: named fault points, the fault spec grammar
// (RPMA_SIM_FAULTS) and scenario files (RPMA_SIM_SCENARIO), a parsed fault plan and the
// process-wide injector that consults it.
//
// The fault model, in one paragraph: every Backend method of the simulator is a fault point
// named after the verbs / rdma_cm call it stands for ("ibv_post_send", "rdma_connect", ...),
// plus "malloc" (every softrpma::New<T> in the process, see simverbs/alloc.h). A fault plan is a
// list of rules `point:action[:condition...]`; each call of a point is one "hit" (counted per
// point, per plan, atomically) and the first rule of that point whose conditions hold for the
// hit decides what happens. Actions: `fail=<errno>` (the call fails with that errno and does
// nothing else); on ibv_get_cq_event `unknown_cq` (an event of a CQ on no channel) and
// `spurious` (an event of a CQ with nothing new); on ibv_req_notify_cq `no_notify` (the arm is
// taken but sends no event); on the posts `wc_status=<IBV_WC_*>` (the WR completes with that
// error) and `delay=<ns>` (its completion arrives later, in simulated time); on the connection
// calls `reject`, `unreachable`, `lost`, `disconnect` (the connection ends that way); at every
// point `kill` (the process dies of SIGKILL there, so that its peers meet a dead peer).
// Conditions: nth / after / every on the hit number, prob (seeded, see sched.h), qp (only
// that QP's hits, numbered on their own) and prog (the rule applies only in the process of that
// name, ProcessName(): so one spec serves a server and its client). Every action is off unless a rule asks for it. Every
// injection is logged to stderr, counted and traced (trace.h). A destroy call that a fault
// fails leaves its object alive, as a real provider does; the injector keeps a reference to it
// (a leak checker sees it reachable) and counts it for the stats file (`# kept` lines). With no
// plan installed a fault point costs one relaxed atomic load. The full grammar and every point are in docs/FAULTS.md.
//
// Adding a point: add an enumerator to FaultPoint and a row to kFaultPointTable (fault.cc) in the
// same position. Adding an action: a FaultKind, its parse rule in ParseAction (fault.cc), the
// points whose row lists it (ActionBit) and what the point does with it (sim_backend.cc).

#ifndef SOFTRPMA_SIMVERBS_SIM_FAULTS_FAULT_H_
#define SOFTRPMA_SIMVERBS_SIM_FAULTS_FAULT_H_

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "simverbs/mutex.h"

namespace softrpma::sim {

// The names of the environment variables read once when the simulator starts.
inline constexpr char kFaultsEnvVar[] = "RPMA_SIM_FAULTS";
inline constexpr char kScenarioEnvVar[] = "RPMA_SIM_SCENARIO";
inline constexpr char kStatsEnvVar[] = "RPMA_SIM_STATS";
// The name a process goes by in prog= conditions and in its stats file; unset or empty: the
// executable's file name.
inline constexpr char kRoleEnvVar[] = "RPMA_SIM_ROLE";

// This process's name for prog= conditions: RPMA_SIM_ROLE, else the executable's file name.
std::string ProcessName();

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
  kIbvCreateCqEx,
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
  kIbvWrComplete,
  kIbvCreateQp,
  kIbvCreateQpEx,
  kIbvModifyQp,
  kIbvQueryQp,
  kIbvDestroyQp,
  kIbvCreateAh,
  kIbvDestroyAh,
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
  kRdmaCreateQpEx,
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

// What a rule does when it fires (kNone: nothing fired; never the kind of a rule).
enum class FaultKind : uint8_t {
  kNone,
  kFail,         // the call fails with `err` (a positive errno or kNoErrno) and does nothing
  kUnknownCq,    // ibv_get_cq_event succeeds with a CQ that is on no channel
  kSpurious,     // ibv_get_cq_event succeeds with a CQ of the channel that has nothing new
  kNoNotify,     // ibv_req_notify_cq succeeds, but the arm sends no event when it fires
  kWcStatus,     // the WR posted completes with `wc_status`; its QP goes to ERROR
  kDelay,        // the WR's completion is ready `delay_ns` simulated ns later
  kReject,       // the connection ends in RDMA_CM_EVENT_REJECTED
  kUnreachable,  // the connection ends in RDMA_CM_EVENT_UNREACHABLE
  kLost,         // the connection ends in RDMA_CM_EVENT_CONNECT_ERROR (librpma: CONN_LOST)
  kDisconnect,   // the connection is disconnected (DISCONNECTED on both sides)
  kKill,         // the process dies of SIGKILL at this hit (a peer that dies; valid everywhere)
};

// The bit of `kind` in FaultPointInfo::actions.
constexpr uint32_t ActionBit(FaultKind kind) { return uint32_t{1} << static_cast<int>(kind); }

// What a fault point is and which actions it accepts.
struct FaultPointInfo {
  FaultPoint point;
  const char* name;         // the verbs call, e.g. "ibv_post_send"
  uint32_t actions;         // ActionBit()s of the actions valid here (kill: every point)
  bool has_qp;              // its hits belong to a QP (the qp= condition is valid)
  const char* description;  // one line: the call and what failing it does in librpma terms
  bool can_fail() const { return (actions & ActionBit(FaultKind::kFail)) != 0; }
};

// The row of `point`. Never fails.
const FaultPointInfo& GetFaultPointInfo(FaultPoint point);
// The name of `point`, e.g. "ibv_get_cq_event".
const char* FaultPointName(FaultPoint point);
// The point called `name`, or nullopt.
std::optional<FaultPoint> FaultPointByName(absl::string_view name);
// Every point's name, in enum order.
std::vector<std::string> FaultPointNames();
// The actions `point` accepts, as written in a spec ("fail=<errno>", "unknown_cq", ...).
std::vector<std::string> FaultActionForms(FaultPoint point);

// The errno called `name` ("EIO", "ENOMEM", ...), or nullopt. And the reverse: the name of
// `err`, or nullptr when it is not in the table.
std::optional<int> ErrnoByName(absl::string_view name);
const char* ErrnoName(int err);

// A rule's action.
struct FaultAction {
  FaultKind kind = FaultKind::kFail;
  int err = 0;                                   // kFail
  ibv_wc_status wc_status = IBV_WC_GENERAL_ERR;  // kWcStatus
  uint64_t delay_ns = 0;                         // kDelay
};

// When a rule fires. Unset fields do not constrain; all set fields must hold (they are ANDed).
// `hit` is the 1-based hit number of the point, or, with `qp` set, of that QP's hits only.
struct FaultCondition {
  std::optional<uint64_t> nth;    // hit == nth
  std::optional<uint64_t> after;  // hit > after
  std::optional<uint64_t> every;  // hit % every == 0
  std::optional<double> prob;     // a seeded draw for (rule, hit) is below prob
  std::optional<uint32_t> qp;     // the hit is on this QP number
  std::optional<std::string> prog;  // the rule exists only in the process named so (ProcessName)
  // nth / after / every only (qp and prob are checked by the plan).
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
  FaultKind kind = FaultKind::kNone;
  int err = 0;                                   // kFail
  ibv_wc_status wc_status = IBV_WC_GENERAL_ERR;  // kWcStatus
  uint64_t delay_ns = 0;                         // kDelay
  bool fired() const { return kind != FaultKind::kNone; }
};

// A parsed, immutable rule list plus its own hit and injection counters.
// Thread-safe: OnHit may be called from any number of threads at once.
class FaultPlan final {
 public:
  explicit FaultPlan(std::vector<FaultRule> rules);
  FaultPlan(const FaultPlan&) = delete;
  FaultPlan& operator=(const FaultPlan&) = delete;

  // Counts one hit of `point` (on QP `qp_num`, 0 = none) and returns what the first matching
  // rule says; logs, traces and counts an injection when one fires.
  FaultDecision OnHit(FaultPoint point, uint32_t qp_num);

  const std::vector<FaultRule>& rules() const { return rules_; }
  bool has_malloc_rule() const { return has_malloc_rule_; }
  uint64_t hits(FaultPoint point) const;
  uint64_t injections(FaultPoint point) const;
  void ResetCounters();
  // The canonical text of the rules joined by `separator` ("" for none).
  std::string Text(absl::string_view separator) const;

 private:
  std::vector<FaultRule> rules_;
  // Indexes into rules_ per point, in spec order.
  std::array<std::vector<uint32_t>, kNumFaultPoints> rules_by_point_;
  std::array<std::atomic<uint64_t>, kNumFaultPoints> hits_{};
  std::array<std::atomic<uint64_t>, kNumFaultPoints> injections_{};
  // Per rule: its own hit count (used by rules with a qp= condition).
  std::unique_ptr<std::atomic<uint64_t>[]> rule_hits_;
  bool has_malloc_rule_ = false;
};

// Parses a fault spec (grammar in docs/FAULTS.md). An empty or all-blank spec is a valid plan
// with no rules (it counts hits and injects nothing).
// Errors: InvalidArgument naming the bad part, its rule number and its 1-based column, e.g.
//   fault spec rule 2, column 23: unknown errno name "EFOO" in "fail=EFOO"
absl::StatusOr<std::vector<FaultRule>> ParseFaultRules(absl::string_view spec);
absl::StatusOr<std::unique_ptr<FaultPlan>> ParseFaultSpec(absl::string_view spec);

// A parsed scenario file: its rules, in file order, and its `seed` line if it has one.
struct Scenario {
  std::vector<FaultRule> rules;
  std::optional<uint64_t> seed;
};

// Parses the text of a scenario file (docs/FAULTS.md: `#` comments, blank lines, one rule per
// line, at most one `seed <n>` line). `file_name` names it in errors.
// Errors: InvalidArgument "<file_name>:<line>:<column>: <what>", e.g.
//   faults.txt:3:15: unknown action "explode"; expected one of ...
absl::StatusOr<Scenario> ParseScenario(absl::string_view text, absl::string_view file_name);
// The largest scenario file read: 16 MiB (a rule is a line of tens of bytes; a real scenario is
// a few hundred bytes).
inline constexpr uint64_t kMaxScenarioBytes = uint64_t{16} << 20;
// Reads (at most kMaxScenarioBytes, read_file.h) and parses the scenario file at `path`.
// Errors: InvalidArgument "<path>: cannot read scenario file: <reason>" (strerror's text, "it is
// a directory", "it is larger than 16 MiB, ..."), or ParseScenario's.
absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path);

// The process-wide injector every fault point consults.
// Thread-safe. A replaced plan is retired, not freed, because another thread may still be
// evaluating it; plans are small and replaced only by tests and tools.
class FaultInjector final {
 public:
  FaultInjector() = default;
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // What the current plan says about one hit of `point` on QP `qp_num` (0: the point has no
  // QP, or the call names none). With no plan: one relaxed load.
  FaultDecision Check(FaultPoint point, uint32_t qp_num = 0) {
    if (plan_.load(std::memory_order_relaxed) == nullptr) return FaultDecision{};
    // Slow path: load again with acquire to see the plan's contents (a fence would do, but
    // ThreadSanitizer does not understand fences).
    FaultPlan* plan = plan_.load(std::memory_order_acquire);
    if (plan == nullptr) return FaultDecision{};
    totals_[static_cast<int>(point)].fetch_add(1, std::memory_order_relaxed);
    return plan->OnHit(point, qp_num);
  }

  // Installs `plan` (nullptr: no plan, the fast path; while counting all hits, an empty plan
  // instead). Installs the alloc.h hook while the plan has a "malloc" rule or all hits are
  // counted, and removes it otherwise (only if it is ours). Traces a `plan` line.
  void Install(std::unique_ptr<FaultPlan> plan);
  // From now on every hit of every point is counted (for RPMA_SIM_STATS), with or without a
  // plan. Cannot be turned off.
  void CountAllHits();
  // The current plan, or nullptr. Stays valid for the life of the process.
  const FaultPlan* current() const { return plan_.load(std::memory_order_acquire); }
  // Resets the current plan's counters.
  void ResetCounters();
  // Hits of `point` over the whole run, across plans (counted while a plan, possibly empty, is
  // installed: always, after CountAllHits).
  uint64_t total_hits(FaultPoint point) const;
  // Records that the destroy call of `point` (ibv_dereg_mr, ibv_destroy_cq, rdma_destroy_id,
  // rdma_ack_cm_event, ...) failed by an injected fault and so left `object`, the start of the
  // simulator's allocation, alive: a real provider keeps what a failed destroy did not free.
  // The object stays referenced from here until exit, so that LeakSanitizer and valgrind see it
  // as still reachable (the provider holds it; it is not lost), and is counted per point.
  // REQUIRES: object != nullptr.
  void KeepObject(FaultPoint point, const void* object);
  // A destroy call freed `object` after all (the program tried again): no longer kept. Cheap
  // when nothing is kept.
  void ForgetKept(const void* object);
  // How many objects destroy calls of `point` left alive in this process (kept, not forgotten).
  uint64_t kept_objects(FaultPoint point) const;
  // Writes the `# process NAME pid N` line, "<point> <total hits>\n" for every point, in enum
  // order, then "# kept <point> <objects>\n" for every point that kept objects.
  void WriteStats(std::FILE* file) const;

 private:
  void InstallLocked(std::unique_ptr<FaultPlan> plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::atomic<FaultPlan*> plan_{nullptr};
  std::array<std::atomic<uint64_t>, kNumFaultPoints> totals_{};
  mutable softrpma::Mutex mu_;
  bool count_all_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<FaultPlan>> plans_ ABSL_GUARDED_BY(mu_);  // current + retired
  // What KeepObject recorded: the injector is never destroyed, so these stay referenced.
  std::vector<std::pair<FaultPoint, const void*>> kept_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> kept_size_{0};  // kept_.size(), for ForgetKept's fast path
};

// The injector of this process.
FaultInjector& GlobalFaultInjector();

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_FAULTS_FAULT_H_
