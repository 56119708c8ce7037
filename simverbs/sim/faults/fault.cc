#include "simverbs/sim/faults/fault.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"
#include "simverbs/did_you_mean.h"
#include "simverbs/sim/read_file.h"
#include "simverbs/sim/sched/sched.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {
namespace {

using FP = FaultPoint;
using FK = FaultKind;

constexpr uint32_t kFail = ActionBit(FK::kFail);
constexpr uint32_t kCount = 0;  // void calls: counted only
constexpr uint32_t kGetCqEvent = kFail | ActionBit(FK::kUnknownCq) | ActionBit(FK::kSpurious);
constexpr uint32_t kReqNotify = kFail | ActionBit(FK::kNoNotify);
constexpr uint32_t kPost = kFail | ActionBit(FK::kWcStatus) | ActionBit(FK::kDelay) |
                           ActionBit(FK::kLost) | ActionBit(FK::kDisconnect);
constexpr uint32_t kConnect =
    kFail | ActionBit(FK::kReject) | ActionBit(FK::kUnreachable) | ActionBit(FK::kLost);
constexpr uint32_t kAccept = kConnect | ActionBit(FK::kDisconnect);

// One row per FaultPoint, in enum order (checked by a static_assert below).
constexpr FaultPointInfo kFaultPointTable[] = {
    {FP::kIbvQueryDeviceEx, "ibv_query_device_ex", kFail, false,
     "query the device's attributes; fails rpma_utils_ibv_context_is_odp_capable "
     "(RPMA_E_PROVIDER)"},
    {FP::kIbvAllocPd, "ibv_alloc_pd", kFail, false,
     "allocate a protection domain; fails rpma_peer_new (ENOMEM: RPMA_E_NOMEM, fail=none: "
     "RPMA_E_UNKNOWN, else RPMA_E_PROVIDER)"},
    {FP::kIbvDeallocPd, "ibv_dealloc_pd", kFail, false,
     "free a protection domain; fails rpma_peer_delete (RPMA_E_PROVIDER, the peer is kept)"},
    {FP::kIbvRegMr, "ibv_reg_mr", kFail, false,
     "register memory; fails rpma_mr_reg (RPMA_E_PROVIDER)"},
    {FP::kIbvDeregMr, "ibv_dereg_mr", kFail, false,
     "deregister memory; fails rpma_mr_dereg (RPMA_E_PROVIDER, the region is kept)"},
    {FP::kIbvAdviseMr, "ibv_advise_mr", kFail, false,
     "advise (prefetch) registered memory; fails rpma_mr_advise (RPMA_E_PROVIDER)"},
    {FP::kIbvCreateCompChannel, "ibv_create_comp_channel", kFail, false,
     "create a completion channel; fails rpma_conn_req_new, rpma_ep_next_conn_req and "
     "rpma_srq_new (RPMA_E_PROVIDER)"},
    {FP::kIbvDestroyCompChannel, "ibv_destroy_comp_channel", kFail, false,
     "destroy a completion channel; fails rpma_conn_delete, rpma_conn_req_delete and "
     "rpma_srq_delete (RPMA_E_PROVIDER)"},
    {FP::kIbvCreateCq, "ibv_create_cq", kFail, false,
     "create a completion queue; fails rpma_conn_req_new, rpma_ep_next_conn_req and "
     "rpma_srq_new (RPMA_E_PROVIDER)"},
    {FP::kIbvCreateCqEx, "ibv_create_cq_ex", kFail, false,
     "create an extended completion queue (ibv_start_poll / ibv_next_poll / ibv_wc_read_*, "
     "which are hits of ibv_poll_cq); librpma never calls it"},
    {FP::kIbvDestroyCq, "ibv_destroy_cq", kFail, false,
     "destroy a completion queue; fails rpma_conn_delete, rpma_conn_req_delete and "
     "rpma_srq_delete (RPMA_E_PROVIDER)"},
    {FP::kIbvReqNotifyCq, "ibv_req_notify_cq", kReqNotify, false,
     "arm a CQ for one completion event; fails rpma_conn_req_new and the re-arm in "
     "rpma_conn_wait / rpma_cq_wait (RPMA_E_PROVIDER); no_notify: armed but the completion "
     "sends no event (a lost interrupt: the next wait blocks)"},
    {FP::kIbvGetCqEvent, "ibv_get_cq_event", kGetCqEvent, false,
     "wait for a completion event; fails rpma_conn_wait / rpma_cq_wait "
     "(RPMA_E_NO_COMPLETION); unknown_cq: an event of a CQ the connection does not own "
     "(RPMA_E_UNKNOWN); spurious: an event with no new completion (the next rpma_cq_get_wc "
     "may give RPMA_E_NO_COMPLETION)"},
    {FP::kIbvAckCqEvents, "ibv_ack_cq_events", kCount, false,
     "acknowledge completion events (rpma_conn_wait / rpma_cq_wait); returns void: counted "
     "only"},
    {FP::kIbvPollCq, "ibv_poll_cq", kFail, false,
     "poll a completion queue; fails rpma_cq_get_wc (RPMA_E_PROVIDER; fail=none: "
     "RPMA_E_UNKNOWN)"},
    {FP::kIbvCreateSrq, "ibv_create_srq", kFail, false,
     "create a shared receive queue; fails rpma_srq_new (RPMA_E_PROVIDER)"},
    {FP::kIbvDestroySrq, "ibv_destroy_srq", kFail, false,
     "destroy a shared receive queue; fails rpma_srq_delete (RPMA_E_PROVIDER)"},
    {FP::kIbvPostSrqRecv, "ibv_post_srq_recv", kFail, false,
     "post a receive to a shared receive queue; fails rpma_srq_recv (RPMA_E_PROVIDER)"},
    {FP::kIbvPostSend, "ibv_post_send", kPost, true,
     "post a send-queue work request; fails rpma_read / rpma_write / rpma_send / ... "
     "(RPMA_E_PROVIDER); wc_status: it completes with that error (rpma_cq_get_wc); delay: its "
     "completion comes later; lost / disconnect: the connection breaks first (RPMA_CONN_LOST / "
     "RPMA_CONN_CLOSED, the work requests flush); on a UD QP, lost: its first datagram arrives "
     "nowhere"},
    {FP::kIbvPostRecv, "ibv_post_recv", kPost, true,
     "post a receive; fails rpma_recv and rpma_conn_req_recv (RPMA_E_PROVIDER); wc_status, "
     "delay, lost, disconnect as for ibv_post_send"},
    {FP::kIbvWrComplete, "ibv_wr_complete", kPost, true,
     "post a batch of the extended post API (rpma_atomic_write on a device with native atomic "
     "write); fails it (RPMA_E_PROVIDER); wc_status, delay, lost, disconnect as for "
     "ibv_post_send"},
    {FP::kIbvCreateQp, "ibv_create_qp", kFail, false,
     "create a QP without the CM (ibv_rc_pingpong, perftest); librpma never calls it"},
    {FP::kIbvCreateQpEx, "ibv_create_qp_ex", kFail, false,
     "create an extended QP without the CM (the ibv_wr_* post API); librpma never calls it"},
    {FP::kIbvModifyQp, "ibv_modify_qp", kFail, false,
     "move a QP of ibv_create_qp to another state (INIT, RTR, RTS...); librpma never calls it"},
    {FP::kIbvQueryQp, "ibv_query_qp", kFail, false,
     "query a QP's attributes; librpma never calls it"},
    {FP::kIbvDestroyQp, "ibv_destroy_qp", kFail, false,
     "destroy a QP of ibv_create_qp; librpma never calls it"},
    {FP::kIbvCreateAh, "ibv_create_ah", kFail, false,
     "create an address handle (the destination of UD sends); librpma never calls it"},
    {FP::kIbvDestroyAh, "ibv_destroy_ah", kFail, false,
     "destroy an address handle; librpma never calls it"},
    {FP::kRdmaGetaddrinfo, "rdma_getaddrinfo", kFail, false,
     "resolve an address string; fails rpma_utils_get_ibv_context, rpma_ep_listen and "
     "rpma_conn_req_new (RPMA_E_PROVIDER)"},
    {FP::kRdmaFreeaddrinfo, "rdma_freeaddrinfo", kCount, false,
     "free a resolved address; returns void: counted only"},
    {FP::kRdmaCreateEventChannel, "rdma_create_event_channel", kFail, false,
     "create a CM event channel; fails rpma_ep_listen and rpma_conn_req_connect "
     "(RPMA_E_PROVIDER)"},
    {FP::kRdmaDestroyEventChannel, "rdma_destroy_event_channel", kCount, false,
     "destroy a CM event channel; returns void: counted only"},
    {FP::kRdmaCreateId, "rdma_create_id", kFail, false,
     "create a CM id; fails rpma_utils_get_ibv_context, rpma_ep_listen and rpma_conn_req_new "
     "(RPMA_E_PROVIDER)"},
    {FP::kRdmaDestroyId, "rdma_destroy_id", kFail, false,
     "destroy a CM id; fails rpma_ep_shutdown, rpma_conn_delete and rpma_conn_req_delete "
     "(RPMA_E_PROVIDER)"},
    {FP::kRdmaMigrateId, "rdma_migrate_id", kFail, false,
     "move a CM id to another event channel; fails rpma_conn_req_connect (RPMA_E_PROVIDER)"},
    {FP::kRdmaBindAddr, "rdma_bind_addr", kFail, false,
     "bind a CM id to a local address; fails rpma_ep_listen and rpma_utils_get_ibv_context "
     "(RPMA_E_PROVIDER)"},
    {FP::kRdmaResolveAddr, "rdma_resolve_addr", kFail, false,
     "resolve the peer's address; fails rpma_conn_req_new and rpma_utils_get_ibv_context "
     "(RPMA_E_PROVIDER)"},
    {FP::kRdmaResolveRoute, "rdma_resolve_route", kFail, false,
     "resolve the route to the peer; fails rpma_conn_req_new (RPMA_E_PROVIDER)"},
    {FP::kRdmaListen, "rdma_listen", kFail, false,
     "listen for connection requests; fails rpma_ep_listen (RPMA_E_PROVIDER)"},
    {FP::kRdmaCreateQpEx, "rdma_create_qp_ex", kFail, false,
     "create the connection's queue pair; fails rpma_conn_req_new and rpma_ep_next_conn_req "
     "(RPMA_E_PROVIDER)"},
    {FP::kRdmaDestroyQp, "rdma_destroy_qp", kCount, false,
     "destroy the connection's queue pair; returns void: counted only"},
    {FP::kRdmaConnect, "rdma_connect", kConnect, true,
     "send a connection request (client); fails rpma_conn_req_connect (RPMA_E_PROVIDER); "
     "reject / unreachable / lost: it succeeds, then rpma_conn_next_event gives "
     "RPMA_CONN_REJECTED / RPMA_CONN_UNREACHABLE / RPMA_CONN_LOST"},
    {FP::kRdmaAccept, "rdma_accept", kAccept, true,
     "accept a connection request (server); fails rpma_conn_req_connect (RPMA_E_PROVIDER); "
     "reject / unreachable / lost: both sides get RPMA_CONN_REJECTED / RPMA_CONN_UNREACHABLE "
     "/ RPMA_CONN_LOST instead of ESTABLISHED; disconnect: ESTABLISHED, then RPMA_CONN_CLOSED"},
    {FP::kRdmaReject, "rdma_reject", kFail, false,
     "reject a connection request; fails rpma_conn_req_delete (RPMA_E_PROVIDER)"},
    {FP::kRdmaDisconnect, "rdma_disconnect", kFail, true,
     "disconnect; fails rpma_conn_disconnect (RPMA_E_PROVIDER)"},
    {FP::kRdmaGetCmEvent, "rdma_get_cm_event", kFail, false,
     "get the next CM event; fails rpma_ep_next_conn_req and rpma_conn_next_event "
     "(RPMA_E_PROVIDER; EAGAIN: RPMA_E_NO_EVENT)"},
    {FP::kRdmaAckCmEvent, "rdma_ack_cm_event", kFail, false,
     "release a CM event; fails rpma_ep_next_conn_req, rpma_conn_next_event and "
     "rpma_conn_req_connect (RPMA_E_PROVIDER)"},
    {FP::kMalloc, "malloc", kFail, false,
     "every allocation of a softrpma object (softrpma::New); the librpma call that needed it "
     "fails with RPMA_E_NOMEM (a sim call with ENOMEM)"},
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

// The actions as written in a spec, in FaultKind order (index = kind).
struct ActionSyntax {
  FaultKind kind;
  const char* name;
  const char* form;  // how a spec writes it
};
constexpr ActionSyntax kActionSyntax[] = {
    {FK::kFail, "fail", "fail=<errno>"},
    {FK::kUnknownCq, "unknown_cq", "unknown_cq"},
    {FK::kSpurious, "spurious", "spurious"},
    {FK::kNoNotify, "no_notify", "no_notify"},
    {FK::kWcStatus, "wc_status", "wc_status=<IBV_WC_*>"},
    {FK::kDelay, "delay", "delay=<ns>"},
    {FK::kReject, "reject", "reject"},
    {FK::kUnreachable, "unreachable", "unreachable"},
    {FK::kLost, "lost", "lost"},
    {FK::kDisconnect, "disconnect", "disconnect"},
    {FK::kKill, "kill", "kill"},
};

// The actions `info` accepts: its row's, and kill, which every point accepts (a process can die
// anywhere, a call that returns void included).
uint32_t AcceptedActions(const FaultPointInfo& info) {
  return info.actions | ActionBit(FK::kKill);
}

const ActionSyntax* FindAction(absl::string_view name) {
  for (const ActionSyntax& syntax : kActionSyntax) {
    if (name == syntax.name) return &syntax;
  }
  return nullptr;
}

std::string AllActionForms() {
  std::vector<std::string> forms;
  for (const ActionSyntax& syntax : kActionSyntax) forms.push_back(syntax.form);
  return absl::StrJoin(forms, ", ");
}

// The names of the points whose row accepts `kind`.
std::string PointsAccepting(FaultKind kind) {
  std::vector<std::string> names;
  for (const FaultPointInfo& info : kFaultPointTable) {
    if ((info.actions & ActionBit(kind)) != 0) names.push_back(info.name);
  }
  return absl::StrJoin(names, ", ");
}

std::string PointsWithQp() {
  std::vector<std::string> names;
  for (const FaultPointInfo& info : kFaultPointTable) {
    if (info.has_qp) names.push_back(info.name);
  }
  return absl::StrJoin(names, ", ");
}

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

// A piece of the text with its 0-based offset in the whole text.
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

bool AllDigits(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Parses one rule; errors are prefixed by `where_(offset)` (offset: 0-based, in the text the
// tokens' offsets refer to).
class RuleParser final {
 public:
  using Where = std::function<std::string(size_t offset)>;
  explicit RuleParser(Where where) : where_(std::move(where)) {}

  absl::Status Error(size_t offset, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(where_(offset), what));
  }

  absl::StatusOr<FaultRule> ParseRule(const Token& raw) const {
    std::vector<Token> fields = Split(raw.text, raw.offset, ':');
    FaultRule rule;
    // The point.
    const Token& point_token = fields[0];
    if (point_token.text.empty()) return Error(point_token.offset, "missing fault point name");
    std::optional<FaultPoint> point = FaultPointByName(point_token.text);
    if (!point.has_value()) {
      return Error(point_token.offset,
                   absl::StrCat("unknown fault point \"", point_token.text, "\"",
                                DidYouMeanSuffix(point_token.text, FaultPointNames()),
                                "; known points: ", absl::StrJoin(FaultPointNames(), ", ")));
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
      status = ParseCondition(fields[i], rule.point, &rule.condition, &conditions_text);
      if (!status.ok()) return status;
    }
    rule.text = absl::StrCat(FaultPointName(rule.point), ":", rule.action_text, conditions_text);
    return rule;
  }

 private:
  // Splits "name=value" (blanks around '=' ignored). Returns false when there is no '='.
  static bool SplitAssignment(const Token& token, Token* name, Token* value) {
    size_t eq = token.text.find('=');
    if (eq == absl::string_view::npos) return false;
    *name = Trim(token.text.substr(0, eq), token.offset);
    *value = Trim(token.text.substr(eq + 1), token.offset + eq + 1);
    return true;
  }

  absl::Status ParseAction(const Token& token, FaultRule* rule) const {
    const FaultPointInfo& info = GetFaultPointInfo(rule->point);
    if (token.text.empty()) return Error(token.offset, "empty action");
    Token name{token.text, token.offset};
    Token value{absl::string_view(), token.offset + token.text.size()};
    const bool has_value = SplitAssignment(token, &name, &value);
    const ActionSyntax* syntax = FindAction(name.text);
    if (syntax == nullptr) {
      return Error(token.offset, absl::StrCat("unknown action \"", token.text,
                                              "\"; expected one of ", AllActionForms()));
    }
    const FaultKind kind = syntax->kind;
    const bool takes_value =
        kind == FaultKind::kFail || kind == FaultKind::kWcStatus || kind == FaultKind::kDelay;
    if (!takes_value && has_value) {
      return Error(token.offset, absl::StrCat("action ", syntax->name,
                                              " takes no value; write just ", syntax->name));
    }
    if (takes_value && !has_value) {
      return Error(token.offset + token.text.size(),
                   absl::StrCat("action ", syntax->name, " needs a value: ", syntax->form));
    }
    if ((AcceptedActions(info) & ActionBit(kind)) == 0) {
      if (kind == FaultKind::kFail) {
        return Error(token.offset, absl::StrCat("action fail is not valid for ", info.name,
                                                ": that call returns void and cannot fail"));
      }
      return Error(token.offset, absl::StrCat("action ", syntax->name, " is valid only for ",
                                              PointsAccepting(kind), ", not for ", info.name));
    }
    rule->action.kind = kind;
    switch (kind) {
      case FaultKind::kFail:
        return ParseFail(token, value, rule);
      case FaultKind::kWcStatus: {
        if (value.text.empty()) {
          return Error(value.offset,
                       "wc_status needs a value: an error status name such as "
                       "IBV_WC_REM_ACCESS_ERR");
        }
        std::optional<ibv_wc_status> status = WcStatusByName(value.text);
        if (!status.has_value()) {
          return Error(value.offset,
                       absl::StrCat("unknown work completion status \"", value.text, "\" in \"",
                                    token.text, "\"; expected an IBV_WC_* error status name"));
        }
        if (*status == IBV_WC_SUCCESS) {
          return Error(value.offset,
                       "wc_status=IBV_WC_SUCCESS is not a fault; expected an error status");
        }
        rule->action.wc_status = *status;
        rule->action_text = absl::StrCat("wc_status=", value.text);
        return absl::OkStatus();
      }
      case FaultKind::kDelay: {
        uint64_t delay = 0;
        if (!AllDigits(value.text) || !absl::SimpleAtoi(value.text, &delay) || delay < 1 ||
            delay > kMaxDelayNs) {
          return Error(value.offset,
                       absl::StrCat("bad delay \"", value.text,
                                    "\" (expected simulated nanoseconds, an integer from 1 to ",
                                    kMaxDelayNs, ")"));
        }
        rule->action.delay_ns = delay;
        rule->action_text = absl::StrCat("delay=", delay);
        return absl::OkStatus();
      }
      default:
        rule->action_text = syntax->name;
        return absl::OkStatus();
    }
  }

  absl::Status ParseFail(const Token& token, const Token& value, FaultRule* rule) const {
    if (value.text.empty()) {
      return Error(value.offset, "fail needs a value: an errno name (EIO), a number (5) or none");
    }
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

  absl::Status ParseCondition(const Token& token, FaultPoint point, FaultCondition* condition,
                              std::string* canonical) const {
    static constexpr char kExpected[] =
        "expected nth=N, after=N, every=K, prob=P, qp=QP_NUM or prog=NAME";
    if (token.text.empty()) {
      return Error(token.offset, "empty condition (\"::\" or a trailing ':')");
    }
    Token name, value;
    if (!SplitAssignment(token, &name, &value)) {
      return Error(token.offset,
                   absl::StrCat("unknown condition \"", token.text, "\"; ", kExpected));
    }
    if (name.text == "prob") {
      if (condition->prob.has_value()) {
        return Error(name.offset, "duplicate condition \"prob\"");
      }
      double p = 0;
      bool plain = !value.text.empty();
      int dots = 0;
      for (char c : value.text) {
        if (c == '.') {
          ++dots;
        } else if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
          plain = false;
        }
      }
      if (!plain || dots > 1 || value.text == "." || !absl::SimpleAtod(value.text, &p) || p < 0 ||
          p > 1) {
        return Error(value.offset, absl::StrCat("bad probability \"", value.text,
                                                "\" for prob (expected a number from 0 to 1, "
                                                "e.g. 0.25)"));
      }
      condition->prob = p;
      absl::StrAppend(canonical, ":prob=", value.text);
      return absl::OkStatus();
    }
    if (name.text == "qp") {
      if (condition->qp.has_value()) return Error(name.offset, "duplicate condition \"qp\"");
      if (!GetFaultPointInfo(point).has_qp) {
        return Error(name.offset, absl::StrCat("condition qp is valid only for ", PointsWithQp(),
                                               ", not for ", FaultPointName(point)));
      }
      uint32_t qp_num = 0;
      if (!AllDigits(value.text) || !absl::SimpleAtoi(value.text, &qp_num) || qp_num < 1) {
        return Error(value.offset,
                     absl::StrCat("bad number \"", value.text,
                                  "\" for qp (expected a QP number from 1 to 4294967295)"));
      }
      condition->qp = qp_num;
      absl::StrAppend(canonical, ":qp=", qp_num);
      return absl::OkStatus();
    }
    if (name.text == "prog") {
      if (condition->prog.has_value()) return Error(name.offset, "duplicate condition \"prog\"");
      bool valid = !value.text.empty() && value.text.size() <= 64;
      for (char c : value.text) {
        valid = valid && (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                          c == '_' || c == '-');
      }
      if (!valid) {
        return Error(value.offset,
                     absl::StrCat("bad program name \"", value.text,
                                  "\" for prog (expected 1 to 64 of A-Z a-z 0-9 . _ -)"));
      }
      condition->prog = std::string(value.text);
      absl::StrAppend(canonical, ":prog=", value.text);
      return absl::OkStatus();
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
      return Error(name.offset, absl::StrCat("unknown condition \"", name.text, "\"; ", kExpected));
    }
    if (slot->has_value()) {
      return Error(name.offset, absl::StrCat("duplicate condition \"", name.text, "\""));
    }
    uint64_t number = 0;
    if (!AllDigits(value.text) || !absl::SimpleAtoi(value.text, &number) || number < min_value) {
      return Error(value.offset, absl::StrCat("bad number \"", value.text, "\" for ", name.text,
                                              " (expected an integer >= ", min_value, ")"));
    }
    *slot = number;
    absl::StrAppend(canonical, ":", name.text, "=", number);
    return absl::OkStatus();
  }

  Where where_;
};

// The alloc.h hook installed while a plan has a "malloc" rule (or all hits are counted).
bool MallocFaultHook() { return GlobalFaultInjector().Check(FaultPoint::kMalloc).fired(); }

// Whether the seeded draw of (rule, hit) falls below `prob`.
bool ProbabilityFires(double prob, uint32_t rule_index, uint64_t hit) {
  if (prob >= 1) return true;
  if (prob <= 0) return false;
  const uint64_t draw =
      Mix64(Mix64(DeriveSeed(CurrentSeed(), SeedStream::kFaults), rule_index), hit);
  // draw / 2^64 < prob, in integers (prob * 2^64 < 2^64 here).
  const uint64_t threshold = static_cast<uint64_t>(prob * 18446744073709551616.0);
  return draw < threshold;
}

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

std::vector<std::string> FaultActionForms(FaultPoint point) {
  std::vector<std::string> forms;
  // The row's own actions: kill, which every point accepts, would only repeat on every line.
  const uint32_t actions = GetFaultPointInfo(point).actions;
  for (const ActionSyntax& syntax : kActionSyntax) {
    if ((actions & ActionBit(syntax.kind)) != 0) forms.emplace_back(syntax.form);
  }
  return forms;
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

std::string ProcessName() {
  const char* role = std::getenv(kRoleEnvVar);
  if (role != nullptr && *role != '\0') return role;
  return program_invocation_short_name;
}

FaultPlan::FaultPlan(std::vector<FaultRule> rules)
    : rules_(std::move(rules)), rule_hits_(new std::atomic<uint64_t>[rules_.size()]) {
  const std::string process = ProcessName();
  for (uint32_t i = 0; i < rules_.size(); ++i) {
    rule_hits_[i].store(0, std::memory_order_relaxed);
    // A rule for another program is part of the plan (its text, the trace) but never fires.
    if (rules_[i].condition.prog.has_value() && *rules_[i].condition.prog != process) continue;
    rules_by_point_[static_cast<int>(rules_[i].point)].push_back(i);
    if (rules_[i].point == FaultPoint::kMalloc) has_malloc_rule_ = true;
  }
}

FaultDecision FaultPlan::OnHit(FaultPoint point, uint32_t qp_num) {
  const int index = static_cast<int>(point);
  const uint64_t hit = hits_[index].fetch_add(1, std::memory_order_relaxed) + 1;
  const FaultRule* fired = nullptr;
  uint64_t fired_hit = 0;
  for (uint32_t rule_index : rules_by_point_[index]) {
    const FaultRule& rule = rules_[rule_index];
    uint64_t rule_hit = hit;
    if (rule.condition.qp.has_value()) {
      if (*rule.condition.qp != qp_num) continue;
      // Counted even when an earlier rule fired: each qp= rule numbers that QP's hits.
      rule_hit = rule_hits_[rule_index].fetch_add(1, std::memory_order_relaxed) + 1;
    }
    if (fired != nullptr || !rule.condition.Matches(rule_hit)) continue;
    if (rule.condition.prob.has_value() &&
        !ProbabilityFires(*rule.condition.prob, rule_index, rule_hit)) {
      continue;
    }
    fired = &rule;
    fired_hit = rule_hit;
  }
  if (fired == nullptr) return FaultDecision{};
  injections_[index].fetch_add(1, std::memory_order_relaxed);
  // One line, written with one stdio call so that lines of different threads do not mix.
  // (No allocation through alloc.h here: this also runs inside the "malloc" hook.)
  std::fprintf(stderr, "softrpma-sim: fault injected: %s:%s (hit %llu)\n", FaultPointName(point),
               fired->action_text.c_str(), static_cast<unsigned long long>(fired_hit));
  if (TraceOn()) {
    if (qp_num != 0) {
      TraceEvent("fault point=%s action=%s hit=%llu qp=%u", FaultPointName(point),
                 fired->action_text.c_str(), static_cast<unsigned long long>(fired_hit), qp_num);
    } else {
      TraceEvent("fault point=%s action=%s hit=%llu", FaultPointName(point),
                 fired->action_text.c_str(), static_cast<unsigned long long>(fired_hit));
    }
  }
  if (fired->action.kind == FaultKind::kKill) {
    // The process dies here as a crashed or OOM-killed peer does: no destructor, no atexit, no
    // stats or trace end line, so that its peers (and rpma-sim) see exactly a dead process. The
    // log line above is flushed first (stderr is unbuffered) and is what tells an injected kill
    // from a real one.
    kill(getpid(), SIGKILL);
    for (;;) pause();  // SIGKILL is delivered before kill() returns to a single-threaded caller
  }
  FaultDecision decision;
  decision.kind = fired->action.kind;
  decision.err = fired->action.err;
  decision.wc_status = fired->action.wc_status;
  decision.delay_ns = fired->action.delay_ns;
  return decision;
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
  for (size_t i = 0; i < rules_.size(); ++i) rule_hits_[i].store(0, std::memory_order_relaxed);
}

std::string FaultPlan::Text(absl::string_view separator) const {
  return absl::StrJoin(rules_, separator,
                       [](std::string* out, const FaultRule& rule) { out->append(rule.text); });
}

absl::StatusOr<std::vector<FaultRule>> ParseFaultRules(absl::string_view spec) {
  std::vector<FaultRule> rules;
  std::vector<Token> raw_rules = Split(spec, 0, ';');
  for (size_t i = 0; i < raw_rules.size(); ++i) {
    const size_t rule_number = i + 1;
    RuleParser parser([rule_number](size_t offset) {
      return absl::StrCat("fault spec rule ", rule_number, ", column ", offset + 1, ": ");
    });
    const Token& raw = raw_rules[i];
    if (raw.text.empty()) {
      // A blank spec is an empty plan, and one trailing ';' is allowed ("a:fail=EIO;").
      bool whole_spec_blank = raw_rules.size() == 1;
      bool trailing = i + 1 == raw_rules.size() && i > 0;
      if (whole_spec_blank || trailing) continue;
      return parser.Error(raw.offset, "empty rule (two ';' in a row, or a leading ';')");
    }
    absl::StatusOr<FaultRule> rule = parser.ParseRule(raw);
    if (!rule.ok()) return rule.status();
    rules.push_back(*std::move(rule));
  }
  return rules;
}

absl::StatusOr<std::unique_ptr<FaultPlan>> ParseFaultSpec(absl::string_view spec) {
  absl::StatusOr<std::vector<FaultRule>> rules = ParseFaultRules(spec);
  if (!rules.ok()) return rules.status();
  return std::make_unique<FaultPlan>(*std::move(rules));
}

absl::StatusOr<Scenario> ParseScenario(absl::string_view text, absl::string_view file_name) {
  Scenario scenario;
  size_t seed_line = 0;
  size_t line_number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(start, end - start);
    ++line_number;
    const std::string file(file_name);
    RuleParser parser([file, line_number](size_t offset) {
      return absl::StrCat(file, ":", line_number, ":", offset + 1, ": ");
    });
    // A '#' starts a comment that runs to the end of the line.
    const size_t hash = line.find('#');
    const Token content = Trim(hash == absl::string_view::npos ? line : line.substr(0, hash), 0);
    start = end + 1;
    if (content.text.empty()) continue;
    const size_t semicolon = content.text.find(';');
    if (semicolon != absl::string_view::npos) {
      return parser.Error(content.offset + semicolon,
                          "one rule per line: ';' is not allowed in a scenario file");
    }
    // "seed <n>": the word seed, blanks, a number.
    const bool seed_word = absl::StartsWith(content.text, "seed") &&
                           (content.text.size() == 4 ||
                            absl::ascii_isspace(static_cast<unsigned char>(content.text[4])));
    if (seed_word) {
      if (seed_line != 0) {
        return parser.Error(content.offset, absl::StrCat("duplicate seed line (the first is line ",
                                                         seed_line, ")"));
      }
      const Token value = Trim(content.text.substr(4), content.offset + 4);
      if (value.text.empty()) {
        return parser.Error(content.offset + 4,
                            "seed needs a value: a decimal or 0x-hex 64-bit number");
      }
      absl::StatusOr<uint64_t> seed = ParseSeed(value.text);
      if (!seed.ok()) return parser.Error(value.offset, seed.status().message());
      scenario.seed = *seed;
      seed_line = line_number;
      continue;
    }
    absl::StatusOr<FaultRule> rule = parser.ParseRule(content);
    if (!rule.ok()) return rule.status();
    scenario.rules.push_back(*std::move(rule));
  }
  return scenario;
}

absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileUpTo(path, kMaxScenarioBytes, "scenario file");
  if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
  return ParseScenario(*text, path);
}

void FaultInjector::Install(std::unique_ptr<FaultPlan> plan) {
  softrpma::MutexLock lock(&mu_);
  InstallLocked(std::move(plan));
}

void FaultInjector::InstallLocked(std::unique_ptr<FaultPlan> plan) {
  if (plan == nullptr && count_all_) plan = std::make_unique<FaultPlan>(std::vector<FaultRule>());
  FaultPlan* raw = plan.get();
  const bool wants_malloc_hook = raw != nullptr && (raw->has_malloc_rule() || count_all_);
  if (plan != nullptr) plans_.push_back(std::move(plan));
  plan_.store(raw, std::memory_order_release);
  if (wants_malloc_hook) {
    SetAllocFailHook(&MallocFaultHook);
  } else {
    AllocFailHook previous = SetAllocFailHook(nullptr);
    // Not ours: put it back (a test may have installed its own hook).
    if (previous != nullptr && previous != &MallocFaultHook) SetAllocFailHook(previous);
  }
  if (TraceOn()) {
    const std::string text = raw != nullptr ? raw->Text(";") : "";
    TraceEvent("plan faults=%s", text.empty() ? "-" : text.c_str());
  }
}

void FaultInjector::CountAllHits() {
  softrpma::MutexLock lock(&mu_);
  if (count_all_) return;
  count_all_ = true;
  FaultPlan* current = plan_.load(std::memory_order_acquire);
  if (current == nullptr) {
    InstallLocked(nullptr);  // an empty plan: every point takes the counting path
  } else if (!current->has_malloc_rule()) {
    SetAllocFailHook(&MallocFaultHook);
  }
}

void FaultInjector::ResetCounters() {
  FaultPlan* plan = plan_.load(std::memory_order_acquire);
  if (plan != nullptr) plan->ResetCounters();
}

uint64_t FaultInjector::total_hits(FaultPoint point) const {
  return totals_[static_cast<int>(point)].load(std::memory_order_relaxed);
}

void FaultInjector::KeepObject(FaultPoint point, const void* object) {
  softrpma::MutexLock lock(&mu_);
  kept_.emplace_back(point, object);
  kept_size_.store(kept_.size(), std::memory_order_relaxed);
}

void FaultInjector::ForgetKept(const void* object) {
  if (kept_size_.load(std::memory_order_relaxed) == 0) return;
  softrpma::MutexLock lock(&mu_);
  kept_.erase(std::remove_if(kept_.begin(), kept_.end(),
                             [object](const auto& kept) { return kept.second == object; }),
              kept_.end());
  kept_size_.store(kept_.size(), std::memory_order_relaxed);
}

uint64_t FaultInjector::kept_objects(FaultPoint point) const {
  softrpma::MutexLock lock(&mu_);
  return std::count_if(kept_.begin(), kept_.end(),
                       [point](const auto& kept) { return kept.first == point; });
}

void FaultInjector::WriteStats(std::FILE* file) const {
  std::fprintf(file, "# process %s pid %d\n", ProcessName().c_str(), static_cast<int>(getpid()));
  for (const FaultPointInfo& info : kFaultPointTable) {
    std::fprintf(file, "%s %llu\n", info.name,
                 static_cast<unsigned long long>(total_hits(info.point)));
  }
  for (const FaultPointInfo& info : kFaultPointTable) {
    if (const uint64_t kept = kept_objects(info.point); kept != 0) {
      std::fprintf(file, "# kept %s %llu\n", info.name, static_cast<unsigned long long>(kept));
    }
  }
}

FaultInjector& GlobalFaultInjector() {
  static FaultInjector* injector = new FaultInjector();  // Never destroyed: used until exit.
  return *injector;
}

}  // namespace softrpma::sim
