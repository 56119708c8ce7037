#include "tools/rpma_sim/trace.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "simverbs/sim/read_file.h"

namespace softrpma::rpma_sim {
namespace {

constexpr char kMagic[] = "softrpma-sim-trace";
constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

uint64_t Fnv1a(absl::string_view bytes, uint64_t hash) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= kFnvPrime;
  }
  return hash;
}

std::optional<uint64_t> ParseNumber(absl::string_view text) {
  uint64_t value = 0;
  if (absl::StartsWith(text, "0x") || absl::StartsWith(text, "0X")) {
    if (text.size() > 2 && absl::SimpleHexAtoi(text.substr(2), &value)) return value;
    return std::nullopt;
  }
  if (absl::SimpleAtoi(text, &value)) return value;
  return std::nullopt;
}

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

std::string Micros(uint64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e3); }

std::string F(const TraceEvent& e, absl::string_view key) { return e.Field(key); }

}  // namespace

std::string RunFingerprint(const std::vector<Trace>& traces) {
  std::vector<uint64_t> hashes;
  hashes.reserve(traces.size());
  for (const Trace& trace : traces) {
    // Normalized values of the fields that follow the command line or the address space.
    absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, std::string>> renamed;
    auto normal = [&renamed](const std::string& key, const std::string& value) {
      if (key != "port" && key != "wr_id" && key != "op_context") return value;
      absl::flat_hash_map<std::string, std::string>& names = renamed[key];
      auto [it, added] = names.try_emplace(value, "");
      if (added) it->second = absl::StrCat("#", names.size());
      return it->second;
    };
    uint64_t hash = Fnv1a(absl::StrCat("process ", trace.process, "\n"), kFnvOffsetBasis);
    for (const TraceEvent& event : trace.events) {
      std::string line = absl::StrCat(event.time_ns, " ", event.type);
      for (const auto& [key, value] : event.fields) {
        absl::StrAppend(&line, " ", key, "=", normal(key, value));
      }
      hash = Fnv1a(line, hash);
      hash = Fnv1a("\n", hash);
    }
    hashes.push_back(hash);
  }
  std::sort(hashes.begin(), hashes.end());
  uint64_t run = kFnvOffsetBasis;
  for (uint64_t hash : hashes) run = Fnv1a(absl::StrFormat("%016x\n", hash), run);
  return absl::StrFormat("0x%016x", run);
}

std::string ShortOpcode(absl::string_view opcode) {
  absl::string_view s = opcode;
  if (!absl::ConsumePrefix(&s, "IBV_WR_")) absl::ConsumePrefix(&s, "IBV_WC_");
  return std::string(s);
}

std::optional<std::string> TraceEvent::Get(absl::string_view key) const {
  for (const auto& [k, v] : fields) {
    if (k == key) return v;
  }
  return std::nullopt;
}

std::string TraceEvent::Field(absl::string_view key) const {
  std::optional<std::string> v = Get(key);
  return v.has_value() ? *v : "?";
}

std::optional<uint64_t> TraceEvent::GetNumber(absl::string_view key) const {
  std::optional<std::string> v = Get(key);
  if (!v.has_value()) return std::nullopt;
  return ParseNumber(*v);
}

absl::StatusOr<std::string> ReadTraceFile(const std::string& path, uint64_t max_bytes) {
  return softrpma::sim::ReadFileUpTo(path, max_bytes, "trace file");
}

absl::StatusOr<Trace> ParseTrace(absl::string_view text) {
  Trace trace;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  // The text ends with '\n': the split leaves an empty last piece. Anything else there is a cut
  // line (the run died while writing it).
  if (!lines.empty()) {
    if (!lines.back().empty()) {
      trace.warnings.push_back(absl::StrCat("line ", lines.size(),
                                            " is cut (no newline at the end of the file); "
                                            "ignored"));
    }
    lines.pop_back();
  }
  if (lines.size() < 3) {
    return LineError(static_cast<int>(lines.size()) + 1,
                     "missing header: a trace starts with `softrpma-sim-trace <version>`, "
                     "`seed <seed>` and `faults <plan>` lines");
  }
  {
    std::vector<absl::string_view> magic = absl::StrSplit(lines[0], ' ');
    if (magic.size() != 2 || magic[0] != kMagic) {
      return LineError(1, absl::StrCat("not a softrpma-sim trace (expected \"", kMagic,
                                       " <version>\", got \"", lines[0], "\")"));
    }
    if (!absl::SimpleAtoi(magic[1], &trace.version) || trace.version < kOldestTraceVersion ||
        trace.version > kTraceVersion) {
      return LineError(1, absl::StrCat("trace format version ", magic[1],
                                       "; rpma-sim reads versions ", kOldestTraceVersion, " to ",
                                       kTraceVersion));
    }
  }
  absl::string_view seed = lines[1];
  if (!absl::ConsumePrefix(&seed, "seed ")) {
    return LineError(2, absl::StrCat("expected `seed <seed>`, got \"", lines[1], "\""));
  }
  trace.seed = std::string(seed);
  absl::string_view faults = lines[2];
  if (!absl::ConsumePrefix(&faults, "faults ")) {
    return LineError(3, absl::StrCat("expected `faults <plan>`, got \"", lines[2], "\""));
  }
  trace.faults = std::string(faults);
  size_t first_event = 3;
  if (trace.version >= 2) {
    absl::string_view process = lines.size() > 3 ? lines[3] : absl::string_view();
    if (!absl::ConsumePrefix(&process, "process ") || process.empty()) {
      return LineError(4, absl::StrCat("expected `process <name>`, got \"",
                                       lines.size() > 3 ? lines[3] : "", "\""));
    }
    trace.process = std::string(process);
    first_event = 4;
  }

  uint64_t hash = kFnvOffsetBasis;
  uint64_t last_time = 0;
  for (size_t i = first_event; i < lines.size(); ++i) {
    int number = static_cast<int>(i) + 1;
    absl::string_view line = lines[i];
    if (trace.has_end) {
      if (line.empty()) continue;
      return LineError(number, "a line after the end line");
    }
    if (absl::StartsWith(line, "end ")) {
      trace.has_end = true;
      for (absl::string_view field : absl::StrSplit(line.substr(4), ' ', absl::SkipEmpty())) {
        std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(field, '=');
        if (kv.first == "events") {
          std::optional<uint64_t> n = ParseNumber(kv.second);
          if (!n.has_value()) return LineError(number, "bad events= in the end line");
          trace.end_events = *n;
        } else if (kv.first == "fingerprint") {
          trace.end_fingerprint = std::string(kv.second);
        }
      }
      continue;
    }
    std::vector<absl::string_view> tokens = absl::StrSplit(line, ' ');
    if (tokens.size() < 3) {
      return LineError(
          number,
          absl::StrCat("expected `<seq> <time_ns> <type> key=value...`, got \"", line, "\""));
    }
    TraceEvent event;
    event.line = number;
    if (!absl::SimpleAtoi(tokens[0], &event.seq) || !absl::SimpleAtoi(tokens[1], &event.time_ns)) {
      return LineError(
          number,
          absl::StrCat("expected `<seq> <time_ns> <type> key=value...`, got \"", line, "\""));
    }
    event.type = std::string(tokens[2]);
    for (size_t t = 3; t < tokens.size(); ++t) {
      size_t eq = tokens[t].find('=');
      if (eq == absl::string_view::npos || eq == 0) {
        return LineError(number, absl::StrCat("field \"", tokens[t], "\" is not key=value"));
      }
      event.fields.emplace_back(std::string(tokens[t].substr(0, eq)),
                                std::string(tokens[t].substr(eq + 1)));
    }
    if (event.seq != trace.events.size() + 1 && trace.warnings.size() < 10) {
      trace.warnings.push_back(absl::StrCat("line ", number, ": seq ", event.seq, ", expected ",
                                            trace.events.size() + 1));
    }
    if (event.time_ns < last_time && trace.warnings.size() < 10) {
      trace.warnings.push_back(absl::StrCat("line ", number, ": time goes back from ", last_time,
                                            " to ", event.time_ns, " ns"));
    }
    last_time = std::max(last_time, event.time_ns);
    hash = Fnv1a(line, hash);
    hash = Fnv1a("\n", hash);
    trace.events.push_back(std::move(event));
  }
  trace.fingerprint = absl::StrFormat("0x%016x", hash);
  if (!trace.has_end) {
    trace.warnings.push_back("no end line: the run did not exit normally (crash, _exit, killed)");
  }
  return trace;
}

// ---- Readable text -----------------------------------------------------------------------

namespace {

// What an event means, in words, and whom it is about ("QP 17", "CQ 1", ...).
std::pair<std::string, std::string> Describe(const TraceEvent& e) {
  const std::string& t = e.type;
  if (t == "create_cq") {
    std::string channel = F(e, "channel");
    return {"CQ " + F(e, "cq"), absl::StrCat("created: ", F(e, "cqe"), " entries, ",
                                             channel == "0" ? "no channel" : "channel " + channel)};
  }
  if (t == "destroy_cq") return {"CQ " + F(e, "cq"), "destroyed"};
  if (t == "create_qp") {
    std::string srq = F(e, "srq");
    return {"QP " + F(e, "qp"),
            absl::StrCat("created on id ", F(e, "id"), ": send CQ ", F(e, "send_cq"), ", recv CQ ",
                         F(e, "recv_cq"), srq == "0" ? ", no SRQ" : ", SRQ " + srq)};
  }
  if (t == "destroy_qp") return {"QP " + F(e, "qp"), "destroyed"};
  if (t == "qp_state") return {"QP " + F(e, "qp"), "state " + F(e, "state")};
  if (t == "post_send") {
    return {"QP " + F(e, "qp"), absl::StrCat("post_send ", ShortOpcode(F(e, "opcode")), " wr_id=",
                                             F(e, "wr_id"), ", ", F(e, "len"), " bytes, ",
                                             F(e, "signaled") == "1" ? "signaled" : "unsignaled")};
  }
  if (t == "post_recv") {
    return {"QP " + F(e, "qp"),
            absl::StrCat("post_recv wr_id=", F(e, "wr_id"), ", room for ", F(e, "len"), " bytes")};
  }
  if (t == "post_srq_recv") {
    return {"SRQ " + F(e, "srq"), absl::StrCat("post_srq_recv wr_id=", F(e, "wr_id"), ", room for ",
                                               F(e, "len"), " bytes")};
  }
  if (t == "cqe") {
    std::optional<uint64_t> ready = e.GetNumber("ready");
    return {"CQ " + F(e, "cq"),
            absl::StrCat("completion of QP ", F(e, "qp"), " wr_id=", F(e, "wr_id"), ": ",
                         ShortOpcode(F(e, "opcode")), " ", F(e, "status"), ", ", F(e, "byte_len"),
                         " bytes, ready at ", ready.has_value() ? Micros(*ready) + " us" : "?")};
  }
  if (t == "wc") {
    return {"CQ " + F(e, "cq"), absl::StrCat("polled: QP ", F(e, "qp"), " wr_id=", F(e, "wr_id"),
                                             " ", ShortOpcode(F(e, "opcode")), " ", F(e, "status"),
                                             ", ", F(e, "byte_len"), " bytes")};
  }
  if (t == "cq_overflow") return {"CQ " + F(e, "cq"), "OVERFLOW: a completion was lost"};
  if (t == "race") {
    if (F(e, "flushed_by_disconnect") == "1") {
      return {"QP " + F(e, "qp"), "RACE: " + F(e, "opcode") + " wr_id=" + F(e, "wr_id") +
                                      ": flushed by rdma_disconnect before it executed"};
    }
    return {"QP " + F(e, "qp"), "RACE: " + F(e, "opcode") + " wr_id=" + F(e, "wr_id") +
                                    ": source bytes [" + F(e, "first") + ", " + F(e, "end") +
                                    ") of " + F(e, "len") + " changed after the post"};
  }
  if (t == "cq_arm") {
    return {"CQ " + F(e, "cq"), F(e, "solicited_only") == "1" ? "armed (solicited only)" : "armed"};
  }
  if (t == "cq_event") {
    std::optional<uint64_t> at = e.GetNumber("at");
    return {"CQ " + F(e, "cq"),
            absl::StrCat("event queued on channel ", F(e, "channel"), ", due at ",
                         at.has_value() ? Micros(*at) : "?", " us")};
  }
  if (t == "cq_event_suppressed") {
    return {"CQ " + F(e, "cq"), "event suppressed (no_notify fault): no wake-up"};
  }
  if (t == "cq_event_got") {
    std::string what = absl::StrCat("event received from channel ", F(e, "channel"));
    if (e.Get("spurious") == "1") what += " (SPURIOUS: made by a fault)";
    if (e.Get("unknown") == "1") what += " (UNKNOWN CQ: made by a fault)";
    return {"CQ " + F(e, "cq"), what};
  }
  if (t == "cq_event_ack") return {"CQ " + F(e, "cq"), absl::StrCat(F(e, "n"), " events acked")};
  if (t == "cm_event") {
    std::string what =
        absl::StrCat("CM event ", F(e, "type"), " queued (status ", F(e, "status"), ")");
    if (std::optional<std::string> at = e.Get("at"); at.has_value()) {
      absl::StrAppend(&what, ", due at ", *at, " ns");  // a CM timer
    }
    return {"id " + F(e, "id"), what};
  }
  if (t == "cm_drep") return {"id " + F(e, "id"), "DREP received: DISCONNECTED due now"};
  if (t == "cm_event_got") return {"id " + F(e, "id"), "CM event " + F(e, "type") + " received"};
  if (t == "cm_event_ack") return {"id " + F(e, "id"), "CM event " + F(e, "type") + " acked"};
  if (t == "cm_connect_response") {
    return {"id " + F(e, "id"), "connect response processed: QP " + F(e, "qp") + " RTS, RTU sent"};
  }
  if (t == "fault") {
    std::optional<std::string> qp = e.Get("qp");
    return {qp.has_value() ? "QP " + *qp : "fault",
            absl::StrCat("FAULT injected: ", F(e, "point"), " ", F(e, "action"), " (hit ",
                         F(e, "hit"), ")")};
  }
  if (t == "api_call" || t == "api_return") {
    const std::string subject = "thread " + F(e, "thread");
    if (t == "api_return") return {subject, F(e, "fn") + " returned " + F(e, "ret")};
    std::vector<std::string> args;
    for (const auto& [key, value] : e.fields) {
      if (key != "thread" && key != "fn") args.push_back(key + "=" + value);
    }
    return {subject, F(e, "fn") + "(" + absl::StrJoin(args, " ") + ")"};
  }
  if (t == "plan") return {"sim", "fault plan now: " + F(e, "faults")};
  if (t == "seed") return {"sim", "seed now " + F(e, "value")};
  // A type this reader does not know: the fields as they are.
  std::string raw = t;
  for (const auto& [k, v] : e.fields) absl::StrAppend(&raw, " ", k, "=", v);
  return {"?", raw};
}

}  // namespace

std::string FormatTrace(const Trace& trace) {
  std::string out =
      absl::StrCat("trace format ", trace.version,
                   trace.process.empty() ? "" : absl::StrCat(", process ", trace.process),
                   ", seed ", trace.seed,
                   ", faults at start: ", trace.faults == "-" ? "none" : trace.faults, "\n");
  if (trace.has_end) {
    bool count_ok = trace.end_events == trace.events.size();
    bool hash_ok = trace.end_fingerprint == trace.fingerprint;
    absl::StrAppend(
        &out, "ended normally: ", trace.end_events, " events, fingerprint ", trace.end_fingerprint,
        count_ok && hash_ok ? " (matches the events)"
                            : absl::StrCat(" (MISMATCH: the file has ", trace.events.size(),
                                           " events, fingerprint ", trace.fingerprint, ")"),
        "\n");
  } else {
    absl::StrAppend(&out, "NO END LINE: the run did not exit normally; ", trace.events.size(),
                    " events, fingerprint so far ", trace.fingerprint, "\n");
  }
  absl::StrAppend(&out, "\n",
                  absl::StrFormat("%13s %6s  %-8s %s\n", "time (us)", "seq", "subject", "event"));
  uint64_t posted = 0, completions = 0, errors = 0, polled = 0, faults = 0, cm_events = 0;
  for (const TraceEvent& e : trace.events) {
    auto [subject, what] = Describe(e);
    absl::StrAppend(
        &out, absl::StrFormat("%13s %6d  %-8s %s\n", Micros(e.time_ns), e.seq, subject, what));
    if (e.type == "post_send" || e.type == "post_recv" || e.type == "post_srq_recv") ++posted;
    if (e.type == "cqe") {
      ++completions;
      if (e.Get("status") != "IBV_WC_SUCCESS") ++errors;
    }
    if (e.type == "wc") ++polled;
    if (e.type == "fault") ++faults;
    if (e.type == "cm_event") ++cm_events;
  }
  absl::StrAppend(&out, "\nsummary: ", posted, " work requests posted, ", completions,
                  " completions (", errors, " with an error), ", polled, " polled, ", cm_events,
                  " CM events, ", faults, " faults injected\n");
  return out;
}

}  // namespace softrpma::rpma_sim
