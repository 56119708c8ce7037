#include "simverbs/sim/fault.h"

#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"

namespace softrpma::sim {
namespace {

using FP = FaultPoint;

// One row per FaultPoint, in enum order (checked by a static_assert below and at start-up).
constexpr FaultPointInfo kFaultPointTable[] = {
    {FP::kIbvQueryDeviceEx, "ibv_query_device_ex", true, false},
    {FP::kIbvAllocPd, "ibv_alloc_pd", true, false},
    {FP::kIbvDeallocPd, "ibv_dealloc_pd", true, false},
    {FP::kIbvRegMr, "ibv_reg_mr", true, false},
    {FP::kIbvDeregMr, "ibv_dereg_mr", true, false},
    {FP::kIbvAdviseMr, "ibv_advise_mr", true, false},
    {FP::kIbvCreateCompChannel, "ibv_create_comp_channel", true, false},
    {FP::kIbvDestroyCompChannel, "ibv_destroy_comp_channel", true, false},
    {FP::kIbvCreateCq, "ibv_create_cq", true, false},
    {FP::kIbvDestroyCq, "ibv_destroy_cq", true, false},
    {FP::kIbvReqNotifyCq, "ibv_req_notify_cq", true, false},
    {FP::kIbvGetCqEvent, "ibv_get_cq_event", true, true},
    {FP::kIbvAckCqEvents, "ibv_ack_cq_events", false, false},
    {FP::kIbvPollCq, "ibv_poll_cq", true, false},
    {FP::kIbvCreateSrq, "ibv_create_srq", true, false},
    {FP::kIbvDestroySrq, "ibv_destroy_srq", true, false},
    {FP::kIbvPostSrqRecv, "ibv_post_srq_recv", true, false},
    {FP::kIbvPostSend, "ibv_post_send", true, false},
    {FP::kIbvPostRecv, "ibv_post_recv", true, false},
    {FP::kRdmaGetaddrinfo, "rdma_getaddrinfo", true, false},
    {FP::kRdmaFreeaddrinfo, "rdma_freeaddrinfo", false, false},
    {FP::kRdmaCreateEventChannel, "rdma_create_event_channel", true, false},
    {FP::kRdmaDestroyEventChannel, "rdma_destroy_event_channel", false, false},
    {FP::kRdmaCreateId, "rdma_create_id", true, false},
    {FP::kRdmaDestroyId, "rdma_destroy_id", true, false},
    {FP::kRdmaMigrateId, "rdma_migrate_id", true, false},
    {FP::kRdmaBindAddr, "rdma_bind_addr", true, false},
    {FP::kRdmaResolveAddr, "rdma_resolve_addr", true, false},
    {FP::kRdmaResolveRoute, "rdma_resolve_route", true, false},
    {FP::kRdmaListen, "rdma_listen", true, false},
    {FP::kRdmaCreateQp, "rdma_create_qp", true, false},
    {FP::kRdmaDestroyQp, "rdma_destroy_qp", false, false},
    {FP::kRdmaConnect, "rdma_connect", true, false},
    {FP::kRdmaAccept, "rdma_accept", true, false},
    {FP::kRdmaReject, "rdma_reject", true, false},
    {FP::kRdmaDisconnect, "rdma_disconnect", true, false},
    {FP::kRdmaGetCmEvent, "rdma_get_cm_event", true, false},
    {FP::kRdmaAckCmEvent, "rdma_ack_cm_event", true, false},
    {FP::kMalloc, "malloc", true, false},
};
static_assert(sizeof(kFaultPointTable) / sizeof(kFaultPointTable[0]) == kNumFaultPoints,
              "kFaultPointTable must have one row per FaultPoint");

constexpr bool TableInEnumOrder() {
  for (int i = 0; i < kNumFaultPoints; ++i) {
    if (static_cast<int>(kFaultPointTable[i].point) != i) return false;
  }
  return true;
}
static_assert(TableInEnumOrder(), "kFaultPointTable rows must be in FaultPoint order");

struct ErrnoEntry {
  const char* name;
  int value;
};

// The errno names a spec may use. EWOULDBLOCK and ENOTSUP are aliases (same values as EAGAIN
// and EOPNOTSUPP on Linux); ErrnoName returns the first name of a value.
constexpr ErrnoEntry kErrnoTable[] = {
    {"EPERM", EPERM},
    {"ENOENT", ENOENT},
    {"ESRCH", ESRCH},
    {"EINTR", EINTR},
    {"EIO", EIO},
    {"ENXIO", ENXIO},
    {"E2BIG", E2BIG},
    {"EBADF", EBADF},
    {"EAGAIN", EAGAIN},
    {"EWOULDBLOCK", EWOULDBLOCK},
    {"ENOMEM", ENOMEM},
    {"EACCES", EACCES},
    {"EFAULT", EFAULT},
    {"EBUSY", EBUSY},
    {"EEXIST", EEXIST},
    {"ENODEV", ENODEV},
    {"EINVAL", EINVAL},
    {"ENFILE", ENFILE},
    {"EMFILE", EMFILE},
    {"ENOSPC", ENOSPC},
    {"EPIPE", EPIPE},
    {"ERANGE", ERANGE},
    {"ENOSYS", ENOSYS},
    {"ENODATA", ENODATA},
    {"ETIME", ETIME},
    {"EPROTO", EPROTO},
    {"EOVERFLOW", EOVERFLOW},
    {"EAFNOSUPPORT", EAFNOSUPPORT},
    {"EOPNOTSUPP", EOPNOTSUPP},
    {"ENOTSUP", ENOTSUP},
    {"EADDRINUSE", EADDRINUSE},
    {"EADDRNOTAVAIL", EADDRNOTAVAIL},
    {"ENETDOWN", ENETDOWN},
    {"ENETUNREACH", ENETUNREACH},
    {"ENETRESET", ENETRESET},
    {"ECONNABORTED", ECONNABORTED},
    {"ECONNRESET", ECONNRESET},
    {"ENOBUFS", ENOBUFS},
    {"EISCONN", EISCONN},
    {"ENOTCONN", ENOTCONN},
    {"ESHUTDOWN", ESHUTDOWN},
    {"ETIMEDOUT", ETIMEDOUT},
    {"ECONNREFUSED", ECONNREFUSED},
    {"EHOSTDOWN", EHOSTDOWN},
    {"EHOSTUNREACH", EHOSTUNREACH},
    {"EALREADY", EALREADY},
    {"EINPROGRESS", EINPROGRESS},
    {"ECANCELED", ECANCELED},
    {"EREMOTEIO", EREMOTEIO},
};

// ---- The parser -----------------------------------------------------------------------------

// A piece of the spec with its 0-based offset in the whole spec.
struct Token {
  absl::string_view text;
  size_t offset;
};

// `piece` (which starts at `offset`) without surrounding blanks.
Token Trim(absl::string_view piece, size_t offset) {
  size_t begin = 0;
  while (begin < piece.size() && absl::ascii_isspace(static_cast<unsigned char>(piece[begin]))) {
    ++begin;
  }
  size_t end = piece.size();
  while (end > begin && absl::ascii_isspace(static_cast<unsigned char>(piece[end - 1]))) --end;
  return Token{piece.substr(begin, end - begin), offset + begin};
}

// Splits `whole` (starting at `offset`) at every `sep`, trimming each part.
std::vector<Token> Split(absl::string_view whole, size_t offset, char sep) {
  std::vector<Token> parts;
  size_t start = 0;
  while (true) {
    size_t pos = whole.find(sep, start);
    size_t end = pos == absl::string_view::npos ? whole.size() : pos;
    parts.push_back(Trim(whole.substr(start, end - start), offset + start));
    if (pos == absl::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

class SpecParser final {
 public:
  explicit SpecParser(absl::string_view spec) : spec_(spec) {}

  absl::StatusOr<std::vector<FaultRule>> Parse() {
    std::vector<FaultRule> rules;
    std::vector<Token> raw_rules = Split(spec_, 0, ';');
    for (size_t i = 0; i < raw_rules.size(); ++i) {
      rule_number_ = i + 1;
      const Token& raw = raw_rules[i];
      if (raw.text.empty()) {
        // A blank spec is an empty plan, and one trailing ';' is allowed ("a:fail=EIO;").
        bool whole_spec_blank = raw_rules.size() == 1;
        bool trailing = i + 1 == raw_rules.size() && i > 0;
        if (whole_spec_blank || trailing) continue;
        return Error(raw.offset, "empty rule (two ';' in a row, or a leading ';')");
      }
      absl::StatusOr<FaultRule> rule = ParseRule(raw);
      if (!rule.ok()) return rule.status();
      rules.push_back(*std::move(rule));
    }
    return rules;
  }

 private:
  absl::Status Error(size_t offset, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("fault spec rule ", rule_number_, ", column ", offset + 1, ": ", what));
  }

  absl::StatusOr<FaultRule> ParseRule(const Token& raw) {
    std::vector<Token> fields = Split(raw.text, raw.offset, ':');
    FaultRule rule;
    // The point.
    const Token& point_token = fields[0];
    if (point_token.text.empty()) return Error(point_token.offset, "missing fault point name");
    std::optional<FaultPoint> point = FaultPointByName(point_token.text);
    if (!point.has_value()) {
      return Error(point_token.offset,
                   absl::StrCat("unknown fault point \"", point_token.text,
                                "\"; known points: ", absl::StrJoin(FaultPointNames(), ", ")));
    }
    rule.point = *point;
    // The action.
    if (fields.size() < 2) {
      return Error(raw.offset + raw.text.size(),
                   absl::StrCat("fault point \"", point_token.text,
                                "\" has no action; expected point:action[:condition...]"));
    }
    absl::Status status = ParseAction(fields[1], &rule);
    if (!status.ok()) return status;
    // The conditions.
    std::string conditions_text;
    for (size_t i = 2; i < fields.size(); ++i) {
      status = ParseCondition(fields[i], &rule.condition, &conditions_text);
      if (!status.ok()) return status;
    }
    rule.text = absl::StrCat(FaultPointName(rule.point), ":", rule.action_text, conditions_text);
    return rule;
  }

  // Splits "name=value" (blanks around '=' ignored). Returns false when there is no '='.
  static bool SplitAssignment(const Token& token, Token* name, Token* value) {
    size_t eq = token.text.find('=');
    if (eq == absl::string_view::npos) return false;
    *name = Trim(token.text.substr(0, eq), token.offset);
    *value = Trim(token.text.substr(eq + 1), token.offset + eq + 1);
    return true;
  }

  absl::Status ParseAction(const Token& token, FaultRule* rule) {
    const FaultPointInfo& info = GetFaultPointInfo(rule->point);
    if (token.text.empty()) return Error(token.offset, "empty action");
    if (token.text == "unknown_cq") {
      if (!info.can_unknown_cq) {
        return Error(token.offset, absl::StrCat("action unknown_cq is valid only for "
                                                "ibv_get_cq_event, not for ",
                                                info.name));
      }
      rule->action.kind = FaultAction::Kind::kUnknownCq;
      rule->action_text = "unknown_cq";
      return absl::OkStatus();
    }
    Token name, value;
    if (!SplitAssignment(token, &name, &value) || name.text != "fail") {
      return Error(token.offset, absl::StrCat("unknown action \"", token.text,
                                              "\"; expected fail=<errno> or unknown_cq"));
    }
    if (!info.can_fail) {
      return Error(token.offset, absl::StrCat("action fail is not valid for ", info.name,
                                              ": that call returns void and cannot fail"));
    }
    if (value.text.empty()) {
      return Error(value.offset, "fail needs a value: an errno name (EIO), a number (5) or none");
    }
    rule->action.kind = FaultAction::Kind::kFail;
    if (value.text == "none") {
      rule->action.err = kNoErrno;
      rule->action_text = "fail=none";
      return absl::OkStatus();
    }
    if (absl::ascii_isdigit(static_cast<unsigned char>(value.text[0]))) {
      int number = 0;
      if (!absl::SimpleAtoi(value.text, &number) || number < 1 || number > 4095) {
        return Error(value.offset,
                     absl::StrCat("bad errno number \"", value.text, "\" (expected 1..4095)"));
      }
      rule->action.err = number;
    } else {
      std::optional<int> err = ErrnoByName(value.text);
      if (!err.has_value()) {
        return Error(value.offset, absl::StrCat("unknown errno name \"", value.text, "\" in \"",
                                                token.text, "\""));
      }
      rule->action.err = *err;
    }
    const char* canonical = ErrnoName(rule->action.err);
    rule->action_text = canonical != nullptr ? absl::StrCat("fail=", canonical)
                                             : absl::StrCat("fail=", rule->action.err);
    return absl::OkStatus();
  }

  absl::Status ParseCondition(const Token& token, FaultCondition* condition,
                              std::string* canonical) {
    if (token.text.empty())
      return Error(token.offset, "empty condition (\"::\" or a trailing ':')");
    Token name, value;
    if (!SplitAssignment(token, &name, &value)) {
      return Error(token.offset, absl::StrCat("unknown condition \"", token.text,
                                              "\"; expected nth=N, after=N or every=K"));
    }
    std::optional<uint64_t>* slot = nullptr;
    uint64_t min_value = 1;
    if (name.text == "nth") {
      slot = &condition->nth;
    } else if (name.text == "after") {
      slot = &condition->after;
      min_value = 0;
    } else if (name.text == "every") {
      slot = &condition->every;
    } else {
      return Error(name.offset, absl::StrCat("unknown condition \"", name.text,
                                             "\"; expected nth=N, after=N or every=K"));
    }
    if (slot->has_value()) {
      return Error(name.offset, absl::StrCat("duplicate condition \"", name.text, "\""));
    }
    uint64_t number = 0;
    bool digits_only =
        !value.text.empty() && absl::ascii_isdigit(static_cast<unsigned char>(value.text[0]));
    if (!digits_only || !absl::SimpleAtoi(value.text, &number) || number < min_value) {
      return Error(value.offset, absl::StrCat("bad number \"", value.text, "\" for ", name.text,
                                              " (expected an integer >= ", min_value, ")"));
    }
    *slot = number;
    absl::StrAppend(canonical, ":", name.text, "=", number);
    return absl::OkStatus();
  }

  absl::string_view spec_;
  size_t rule_number_ = 0;
};

// The alloc.h hook installed while a plan has a "malloc" rule.
bool MallocFaultHook() { return GlobalFaultInjector().Check(FaultPoint::kMalloc).fired(); }

}  // namespace

const FaultPointInfo& GetFaultPointInfo(FaultPoint point) {
  return kFaultPointTable[static_cast<int>(point)];
}

const char* FaultPointName(FaultPoint point) { return GetFaultPointInfo(point).name; }

std::optional<FaultPoint> FaultPointByName(absl::string_view name) {
  for (const FaultPointInfo& info : kFaultPointTable) {
    if (name == info.name) return info.point;
  }
  return std::nullopt;
}

std::vector<std::string> FaultPointNames() {
  std::vector<std::string> names;
  names.reserve(kNumFaultPoints);
  for (const FaultPointInfo& info : kFaultPointTable) names.emplace_back(info.name);
  return names;
}

std::optional<int> ErrnoByName(absl::string_view name) {
  for (const ErrnoEntry& entry : kErrnoTable) {
    if (name == entry.name) return entry.value;
  }
  return std::nullopt;
}

const char* ErrnoName(int err) {
  for (const ErrnoEntry& entry : kErrnoTable) {
    if (entry.value == err) return entry.name;
  }
  return nullptr;
}

bool FaultCondition::Matches(uint64_t hit) const {
  if (nth.has_value() && hit != *nth) return false;
  if (after.has_value() && hit <= *after) return false;
  if (every.has_value() && hit % *every != 0) return false;
  return true;
}

FaultPlan::FaultPlan(std::vector<FaultRule> rules) : rules_(std::move(rules)) {
  for (uint32_t i = 0; i < rules_.size(); ++i) {
    rules_by_point_[static_cast<int>(rules_[i].point)].push_back(i);
    if (rules_[i].point == FaultPoint::kMalloc) has_malloc_rule_ = true;
  }
}

FaultDecision FaultPlan::OnHit(FaultPoint point) {
  const int index = static_cast<int>(point);
  const uint64_t hit = hits_[index].fetch_add(1, std::memory_order_relaxed) + 1;
  for (uint32_t rule_index : rules_by_point_[index]) {
    const FaultRule& rule = rules_[rule_index];
    if (!rule.condition.Matches(hit)) continue;
    injections_[index].fetch_add(1, std::memory_order_relaxed);
    // One line, written with one stdio call so that lines of different threads do not mix.
    // (No allocation here: this also runs inside the "malloc" hook.)
    std::fprintf(stderr, "softrpma-sim: fault injected: %s:%s (hit %llu)\n", FaultPointName(point),
                 rule.action_text.c_str(), static_cast<unsigned long long>(hit));
    FaultDecision decision;
    decision.kind = rule.action.kind == FaultAction::Kind::kUnknownCq
                        ? FaultDecision::Kind::kUnknownCq
                        : FaultDecision::Kind::kFail;
    decision.err = rule.action.err;
    return decision;
  }
  return FaultDecision{};
}

uint64_t FaultPlan::hits(FaultPoint point) const {
  return hits_[static_cast<int>(point)].load(std::memory_order_relaxed);
}

uint64_t FaultPlan::injections(FaultPoint point) const {
  return injections_[static_cast<int>(point)].load(std::memory_order_relaxed);
}

void FaultPlan::ResetCounters() {
  for (auto& count : hits_) count.store(0, std::memory_order_relaxed);
  for (auto& count : injections_) count.store(0, std::memory_order_relaxed);
}

absl::StatusOr<std::unique_ptr<FaultPlan>> ParseFaultSpec(absl::string_view spec) {
  absl::StatusOr<std::vector<FaultRule>> rules = SpecParser(spec).Parse();
  if (!rules.ok()) return rules.status();
  return std::make_unique<FaultPlan>(*std::move(rules));
}

void FaultInjector::Install(std::unique_ptr<FaultPlan> plan) {
  softrpma::MutexLock lock(&mu_);
  FaultPlan* raw = plan.get();
  const bool wants_malloc_hook = raw != nullptr && raw->has_malloc_rule();
  if (plan != nullptr) plans_.push_back(std::move(plan));
  plan_.store(raw, std::memory_order_release);
  if (wants_malloc_hook) {
    SetAllocFailHook(&MallocFaultHook);
  } else {
    AllocFailHook previous = SetAllocFailHook(nullptr);
    // Not ours: put it back (a test may have installed its own hook).
    if (previous != nullptr && previous != &MallocFaultHook) SetAllocFailHook(previous);
  }
}

void FaultInjector::ResetCounters() {
  FaultPlan* plan = plan_.load(std::memory_order_acquire);
  if (plan != nullptr) plan->ResetCounters();
}

FaultInjector& GlobalFaultInjector() {
  static FaultInjector* injector = new FaultInjector();  // Never destroyed: used until exit.
  return *injector;
}

}  // namespace softrpma::sim
