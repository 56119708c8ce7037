// chrome_trace.cc: the Chrome layout of a parsed trace. Each work request is followed from its
// post to its completion and each completion from its CQE to its poll; the resulting slices are
// then laid out in lanes in which they nest.

#include "tools/rpma_sim/chrome_trace.h"

#include <memory>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tools/rpma_sim/json.h"

namespace softrpma::rpma_sim {
namespace {

bool IsRecvOpcode(absl::string_view wc_opcode) {
  return wc_opcode == "IBV_WC_RECV" || wc_opcode == "IBV_WC_RECV_RDMA_WITH_IMM";
}

std::string F(const TraceEvent& e, absl::string_view key) { return e.Field(key); }

// A track kind, in display order.
enum class TrackKind { kApi, kQp, kCq, kCm, kFaults };

struct TrackKey {
  TrackKind kind;
  uint64_t number;  // thread number / QP number / CQ handle; 0 for the CM and faults tracks
  bool operator<(const TrackKey& o) const {
    return std::tie(kind, number) < std::tie(o.kind, o.number);
  }
};

std::string TrackName(const TrackKey& key) {
  switch (key.kind) {
    case TrackKind::kApi: return absl::StrCat("librpma (thread ", key.number, ")");
    case TrackKind::kQp: return absl::StrCat("QP ", key.number);
    case TrackKind::kCq: return absl::StrCat("CQ ", key.number);
    case TrackKind::kCm: return "rdma_cm";
    case TrackKind::kFaults: return "faults";
  }
  return "?";
}

struct Arg {
  std::string key;
  std::string value;
};

// One Chrome event before its track (tid) is known.
struct Item {
  bool slice = false;  // "X" (else "i")
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;  // slices
  std::string name;
  std::string scope = "t";  // instants: "t" (track) or "p" (process)
  std::vector<Arg> args;
  uint64_t seq = 0;   // the event that made it (order among equals)
  std::string cname;  // a color name of the viewer's palette, "" for the default
};

// A librpma call waiting for its return (api_call, docs/TRACE.md).
struct PendingCall {
  std::string fn;
  uint64_t start_ns;
  uint64_t seq;
  std::vector<Arg> args;
};

// A work request waiting for its completion.
struct PendingWr {
  uint64_t start_ns;
  uint64_t seq;
  std::string wr_id;
  std::string opcode;  // IBV_WR_* (sends) or "RECV"
  std::string len;
  bool signaled;
};

// A completion waiting to be polled.
struct PendingCqe {
  uint64_t ready_ns;
  uint64_t seq;
  std::string qp;
  std::string wr_id;
  std::string status;
  std::string opcode;
  std::string byte_len;
};

// What waits for something (work requests for their completions, completions for their poll),
// in arrival order, found by key in O(1) amortized: the first waiting entry with a key, the
// unsignaled entries before a position, and what is left at the end. A real trace has up to
// 16,384 WRs in flight per QP, so nothing here may be linear per lookup.
template <typename T>
class PendingQueue {
 public:
  static constexpr size_t kNone = static_cast<size_t>(-1);

  void Push(std::string key, T value, bool unsignaled = false) {
    const size_t index = entries_.size();
    entries_.push_back(std::move(value));
    waiting_.push_back(true);
    by_key_[std::move(key)].push_back(index);
    if (unsignaled) unsignaled_.push_back(index);
  }

  // The position of the first waiting entry with `key`, or kNone.
  size_t Find(const std::string& key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return kNone;
    std::deque<size_t>& indices = it->second;
    while (!indices.empty() && !waiting_[indices.front()]) indices.pop_front();
    if (indices.empty()) {
      by_key_.erase(it);
      return kNone;
    }
    return indices.front();
  }

  // REQUIRES: `index` is waiting (from Find()).
  T Take(size_t index) {
    waiting_[index] = false;
    return std::move(entries_[index]);
  }

  // Takes the waiting entries pushed as unsignaled before `index`, in arrival order.
  std::vector<T> TakeUnsignaledBefore(size_t index) {
    std::vector<T> taken;
    while (!unsignaled_.empty() && unsignaled_.front() < index) {
      const size_t i = unsignaled_.front();
      unsignaled_.pop_front();
      if (waiting_[i]) taken.push_back(Take(i));
    }
    return taken;
  }

  // Takes every waiting entry, in arrival order.
  std::vector<T> TakeAll() {
    std::vector<T> taken;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (waiting_[i]) taken.push_back(Take(i));
    }
    by_key_.clear();
    unsignaled_.clear();
    return taken;
  }

 private:
  std::vector<T> entries_;  // every entry ever pushed; taken ones are moved-from
  std::vector<bool> waiting_;
  // Per key, the positions of its entries in ascending order; taken ones are dropped lazily
  // (when they reach the front), so that each position is dropped once.
  absl::flat_hash_map<std::string, std::deque<size_t>> by_key_;
  std::deque<size_t> unsignaled_;  // positions pushed as unsignaled, ascending, dropped lazily
};

using PendingWrQueue = PendingQueue<PendingWr>;

// The key of a completion on its CQ: the QP and the wr_id it names.
std::string CqeKey(absl::string_view qp, absl::string_view wr_id) {
  return absl::StrCat(qp, " ", wr_id);
}

// Assigns the slices of one track to lanes in which they nest: each slice goes to the first lane
// in which every open slice (one that has not ended by the slice's start) contains it, or to a
// new lane when there is none. Per lane, the ends of its open slices form a stack whose top is
// the innermost one; a lane accepts a slice ending at `end` when its top is >= end (or it has
// no open slice). A segment tree over the lanes keeps the maximum of their tops, which finds the
// first lane that accepts in O(log n); a min-heap of the open ends closes slices as the start
// times pass. O(n log n) for n slices where a scan of every lane per slice was O(n^2).
// REQUIRES: Assign() calls come in order of start, at equal starts the longer slice first.
class LaneAssigner {
 public:
  // `max_slices`: how many slices at most will be assigned (bounds the number of lanes).
  explicit LaneAssigner(size_t max_slices) {
    leaves_ = 1;
    while (leaves_ < max_slices + 1) leaves_ *= 2;
    tree_.assign(2 * leaves_, kNoOpenSlice);
  }

  // The lane (0, 1, ...) of the slice [start_ns, end_ns].
  size_t Assign(uint64_t start_ns, uint64_t end_ns) {
    CloseEndedBy(start_ns);
    const size_t lane = FirstLaneAccepting(end_ns);
    if (lane == open_ends_.size()) open_ends_.emplace_back();
    open_ends_[lane].push_back(end_ns);
    SetTop(lane, end_ns);
    ends_.push({end_ns, lane});
    return lane;
  }

 private:
  static constexpr uint64_t kNoOpenSlice = UINT64_MAX;  // accepts any slice

  // Pops, in every lane, the open slices that end at or before `start_ns`.
  void CloseEndedBy(uint64_t start_ns) {
    while (!ends_.empty() && ends_.top().first <= start_ns) {
      const size_t lane = ends_.top().second;
      ends_.pop();
      std::vector<uint64_t>& open = open_ends_[lane];
      while (!open.empty() && open.back() <= start_ns) open.pop_back();
      SetTop(lane, open.empty() ? kNoOpenSlice : open.back());
    }
  }

  void SetTop(size_t lane, uint64_t top) {
    size_t node = leaves_ + lane;
    tree_[node] = top;
    for (node /= 2; node >= 1; node /= 2) {
      tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]);
    }
  }

  // The first lane whose top is >= end_ns. Lanes not made yet have no open slice, so there is
  // always one, at most open_ends_.size().
  size_t FirstLaneAccepting(uint64_t end_ns) const {
    size_t node = 1;
    while (node < leaves_) node = tree_[2 * node] >= end_ns ? 2 * node : 2 * node + 1;
    return node - leaves_;
  }

  size_t leaves_ = 1;
  std::vector<uint64_t> tree_;  // tree_[leaves_ + lane]: the lane's top; above: the maximum
  std::vector<std::vector<uint64_t>> open_ends_;  // per lane, innermost last
  // (end, lane) of every slice assigned and not closed yet, the earliest end on top.
  std::priority_queue<std::pair<uint64_t, size_t>, std::vector<std::pair<uint64_t, size_t>>,
                      std::greater<>>
      ends_;
};

class ChromeBuilder final {
 public:
  explicit ChromeBuilder(const Trace& trace) : trace_(trace) {}
  // Appends the trace's events (metadata, slices, instants) to the open traceEvents array of
  // `w`, as process `pid` named `process_name`.
  // `merged`: one of several processes (they get a sort index, in pid order).
  void Write(JsonWriter& w, int pid, absl::string_view process_name, bool merged);
  // Appends the trace's summary fields (seed, faults, events, ...) to the open object of `w`.
  // REQUIRES: Write was called.
  void WriteSummary(JsonWriter& w) const;

 private:
  void Add(const TrackKey& key, Item item) {
    max_ns_ = std::max(max_ns_, item.slice ? item.end_ns : item.start_ns);
    items_[key].push_back(std::move(item));
  }
  void Instant(const TrackKey& key, const TraceEvent& e, std::string name,
               std::string scope = "t") {
    Item item;
    item.start_ns = e.time_ns;
    item.name = std::move(name);
    item.scope = std::move(scope);
    item.seq = e.seq;
    for (const auto& [k, v] : e.fields) item.args.push_back({k, v});
    Add(key, std::move(item));
  }
  // A call's slice on its thread's track, from its api_call to `end_ns`.
  void CloseCall(uint64_t thread, PendingCall call, uint64_t end_ns, Arg result, bool failed);
  void OnCqe(const TraceEvent& e);
  void OnWc(const TraceEvent& e);
  void CloseWr(uint64_t qp, const PendingWr& wr, uint64_t end_ns, const std::vector<Arg>& extra,
               const std::string& status, uint64_t end_seq);

  const Trace& trace_;
  std::map<TrackKey, std::vector<Item>> items_;
  // Ordered maps: what is left at the end is closed in the order of their numbers.
  std::map<uint64_t, PendingWrQueue> sends_;       // by QP, keyed by wr_id
  std::map<uint64_t, PendingWrQueue> recvs_;       // by QP, keyed by wr_id
  std::map<uint64_t, PendingWrQueue> srq_recvs_;   // by SRQ, keyed by wr_id
  std::map<uint64_t, uint64_t> srq_of_qp_;         // QP -> SRQ
  std::map<uint64_t, std::vector<PendingCall>> calls_;  // by thread: the calls it is in
  std::map<uint64_t, PendingQueue<PendingCqe>> cqes_;  // by CQ, keyed by CqeKey()
  uint64_t max_ns_ = 0;
  uint64_t unhandled_ = 0;
};

void ChromeBuilder::CloseCall(uint64_t thread, PendingCall call, uint64_t end_ns, Arg result,
                              bool failed) {
  Item item;
  item.slice = true;
  item.start_ns = call.start_ns;
  item.end_ns = std::max(end_ns, call.start_ns);
  item.name = std::move(call.fn);
  if (failed) {
    absl::StrAppend(&item.name, " ", result.value);
    item.cname = "terrible";
  }
  item.seq = call.seq;
  item.args = std::move(call.args);
  item.args.push_back(std::move(result));
  Add(TrackKey{TrackKind::kApi, thread}, std::move(item));
}

void ChromeBuilder::CloseWr(uint64_t qp, const PendingWr& wr, uint64_t end_ns,
                            const std::vector<Arg>& extra, const std::string& status,
                            uint64_t end_seq) {
  Item item;
  item.slice = true;
  item.start_ns = wr.start_ns;
  item.end_ns = std::max(end_ns, wr.start_ns);
  item.name = ShortOpcode(wr.opcode);
  if (!status.empty() && status != "IBV_WC_SUCCESS") {
    absl::StrAppend(&item.name, " ", status);
    item.cname = "terrible";
  }
  item.seq = wr.seq;
  item.args = {{"wr_id", wr.wr_id},
               {"opcode", wr.opcode},
               {"len", wr.len},
               {"signaled", wr.signaled ? "1" : "0"},
               {"post_seq", absl::StrCat(wr.seq)}};
  if (end_seq != 0) item.args.push_back({"cqe_seq", absl::StrCat(end_seq)});
  item.args.insert(item.args.end(), extra.begin(), extra.end());
  Add(TrackKey{TrackKind::kQp, qp}, std::move(item));
}

void ChromeBuilder::OnCqe(const TraceEvent& e) {
  std::optional<uint64_t> qp = e.GetNumber("qp");
  std::optional<uint64_t> cq = e.GetNumber("cq");
  uint64_t ready = e.GetNumber("ready").value_or(e.time_ns);
  std::string wr_id = F(e, "wr_id");
  std::string status = F(e, "status");
  std::string opcode = F(e, "opcode");
  max_ns_ = std::max(max_ns_, ready);
  if (cq.has_value()) {
    cqes_[*cq].Push(CqeKey(F(e, "qp"), wr_id),
                    PendingCqe{ready, e.seq, F(e, "qp"), wr_id, status, opcode, F(e, "byte_len")});
  }
  if (!qp.has_value()) return;
  std::vector<Arg> extra = {{"status", status},
                            {"wc_opcode", opcode},
                            {"byte_len", F(e, "byte_len")},
                            {"cq", F(e, "cq")},
                            {"ready_ns", absl::StrCat(ready)}};
  // The WR it completes: in the queue its opcode says (an error completion's opcode may not be
  // meaningful, so the other queues are tried too), the first one with that wr_id.
  PendingWrQueue* send_queue = &sends_[*qp];
  PendingWrQueue* recv_queue = &recvs_[*qp];
  PendingWrQueue* srq_queue = nullptr;
  if (auto it = srq_of_qp_.find(*qp); it != srq_of_qp_.end()) srq_queue = &srq_recvs_[it->second];
  const std::array<PendingWrQueue*, 3> queues =
      IsRecvOpcode(opcode) ? std::array<PendingWrQueue*, 3>{recv_queue, srq_queue, send_queue}
                           : std::array<PendingWrQueue*, 3>{send_queue, recv_queue, srq_queue};
  for (PendingWrQueue* queue : queues) {
    if (queue == nullptr) continue;
    const size_t k = queue->Find(wr_id);
    if (k == PendingWrQueue::kNone) continue;
    PendingWr done = queue->Take(k);
    // Sends complete in order: the unsignaled ones posted before it are done by now.
    if (queue == send_queue) {
      for (const PendingWr& implied : queue->TakeUnsignaledBefore(k)) {
        CloseWr(*qp, implied, ready, {{"completion", "implied by a later completion"}}, "", 0);
      }
    }
    CloseWr(*qp, done, ready, extra, status, e.seq);
    return;
  }
  Instant(TrackKey{TrackKind::kQp, *qp}, e, "completion of an unseen WR " + ShortOpcode(opcode));
}

void ChromeBuilder::OnWc(const TraceEvent& e) {
  std::optional<uint64_t> cq = e.GetNumber("cq");
  if (!cq.has_value()) return;
  PendingQueue<PendingCqe>& queue = cqes_[*cq];
  std::string qp = F(e, "qp");
  std::string wr_id = F(e, "wr_id");
  const size_t index = queue.Find(CqeKey(qp, wr_id));
  if (index == PendingQueue<PendingCqe>::kNone) {
    Instant(TrackKey{TrackKind::kCq, *cq}, e, "polled " + ShortOpcode(F(e, "opcode")));
    return;
  }
  const PendingCqe cqe = queue.Take(index);
  Item item;
  item.slice = true;
  item.start_ns = std::min(cqe.ready_ns, e.time_ns);
  item.end_ns = e.time_ns;
  item.name = absl::StrCat(ShortOpcode(cqe.opcode), " QP ", qp);
  if (cqe.status != "IBV_WC_SUCCESS") {
    absl::StrAppend(&item.name, " ", cqe.status);
    item.cname = "terrible";
  }
  item.seq = cqe.seq;
  item.args = {{"qp", qp},
               {"wr_id", wr_id},
               {"status", cqe.status},
               {"opcode", cqe.opcode},
               {"byte_len", cqe.byte_len},
               {"cqe_seq", absl::StrCat(cqe.seq)},
               {"wc_seq", absl::StrCat(e.seq)}};
  Add(TrackKey{TrackKind::kCq, *cq}, std::move(item));
}

void ChromeBuilder::Write(JsonWriter& w, int pid, absl::string_view process_name,
                          bool merged) {
  for (const TraceEvent& e : trace_.events) {
    max_ns_ = std::max(max_ns_, e.time_ns);
    const std::string& t = e.type;
    std::optional<uint64_t> qp = e.GetNumber("qp");
    std::optional<uint64_t> cq = e.GetNumber("cq");
    if (t == "api_call" || t == "api_return") {
      std::optional<uint64_t> thread = e.GetNumber("thread");
      if (!thread.has_value()) continue;
      std::vector<PendingCall>& stack = calls_[*thread];
      if (t == "api_call") {
        PendingCall call{F(e, "fn"), e.time_ns, e.seq, {}};
        for (const auto& [k, v] : e.fields) {
          if (k != "thread" && k != "fn") call.args.push_back({k, v});
        }
        stack.push_back(std::move(call));
      } else if (!stack.empty() && stack.back().fn == F(e, "fn")) {
        const std::string ret = F(e, "ret");
        PendingCall call = std::move(stack.back());
        stack.pop_back();
        CloseCall(*thread, std::move(call), e.time_ns, {"ret", ret},
                  absl::StartsWith(ret, "RPMA_E_"));
      } else {
        ++unhandled_;  // a return without its call
      }
    } else if (t == "post_send" || t == "post_recv") {
      if (!qp.has_value()) continue;
      PendingWr wr{e.time_ns,     e.seq,
                   F(e, "wr_id"), t == "post_send" ? F(e, "opcode") : "RECV",
                   F(e, "len"),   t == "post_recv" || e.Get("signaled") == "1"};
      std::string key = wr.wr_id;
      const bool unsignaled = !wr.signaled;
      (t == "post_send" ? sends_ : recvs_)[*qp].Push(std::move(key), std::move(wr), unsignaled);
    } else if (t == "post_srq_recv") {
      std::optional<uint64_t> srq = e.GetNumber("srq");
      if (!srq.has_value()) continue;
      srq_recvs_[*srq].Push(F(e, "wr_id"),
                            PendingWr{e.time_ns, e.seq, F(e, "wr_id"), "SRQ_RECV", F(e, "len"),
                                      true});
    } else if (t == "cqe") {
      OnCqe(e);
    } else if (t == "wc") {
      OnWc(e);
    } else if (t == "create_qp" || t == "destroy_qp" || t == "qp_state") {
      if (!qp.has_value()) continue;
      if (t == "create_qp") {
        std::optional<uint64_t> srq = e.GetNumber("srq");
        if (srq.has_value() && *srq != 0) srq_of_qp_[*qp] = *srq;
      }
      Instant(TrackKey{TrackKind::kQp, *qp}, e, t == "qp_state" ? F(e, "state") : t);
    } else if (absl::StartsWith(t, "cq_") || t == "create_cq" || t == "destroy_cq") {
      if (!cq.has_value()) continue;
      std::string name = t;
      if (t == "cq_event_got" && e.Get("spurious") == "1") name += " (spurious)";
      if (t == "cq_event_got" && e.Get("unknown") == "1") name += " (unknown CQ)";
      Instant(TrackKey{TrackKind::kCq, *cq}, e, name);
    } else if (t == "cm_event" || t == "cm_event_got" || t == "cm_event_ack") {
      const char* step = t == "cm_event" ? "queued" : t == "cm_event_got" ? "got" : "acked";
      Instant(TrackKey{TrackKind::kCm, 0}, e,
              absl::StrCat(F(e, "type"), " ", step, " (id ", F(e, "id"), ")"));
    } else if (t == "fault") {
      std::string name = absl::StrCat("fault: ", F(e, "point"), " ", F(e, "action"));
      if (qp.has_value()) {
        Instant(TrackKey{TrackKind::kQp, *qp}, e, name, "p");
      } else {
        Instant(TrackKey{TrackKind::kFaults, 0}, e, name, "p");
      }
    } else if (t == "plan" || t == "seed") {
      Instant(TrackKey{TrackKind::kFaults, 0}, e, t == "plan" ? "fault plan changed" : "seed set");
    } else {
      ++unhandled_;
    }
  }
  // What never completed: a slice to the end of the trace (an unsignaled send: an instant).
  auto close_rest = [this](uint64_t qp, PendingWrQueue& queue) {
    for (const PendingWr& wr : queue.TakeAll()) {
      if (wr.signaled) {
        CloseWr(qp, wr, max_ns_, {{"completion", "none in the trace"}}, "", 0);
      } else {
        Item item;
        item.start_ns = wr.start_ns;
        item.name = absl::StrCat(ShortOpcode(wr.opcode), " posted (unsignaled)");
        item.seq = wr.seq;
        item.args = {{"wr_id", wr.wr_id}, {"len", wr.len}};
        Add(TrackKey{TrackKind::kQp, qp}, std::move(item));
      }
    }
  };
  // Calls that never returned (the process ended, or hung, inside them): to the end.
  for (auto& [thread, stack] : calls_) {
    for (PendingCall& call : stack) {
      CloseCall(thread, std::move(call), max_ns_, {"ret", "none in the trace"}, false);
    }
  }
  for (auto& [qp, queue] : sends_) close_rest(qp, queue);
  for (auto& [qp, queue] : recvs_) close_rest(qp, queue);
  // SRQ receives never taken: on the lowest-numbered QP that uses the SRQ. (This used to be
  // whichever QP a hash map listed first, which could change from run to run.)
  for (auto& [qp, srq] : srq_of_qp_) {
    auto it = srq_recvs_.find(srq);
    if (it != srq_recvs_.end()) close_rest(qp, it->second);
  }
  for (auto& [cq, queue] : cqes_) {
    for (const PendingCqe& c : queue.TakeAll()) {
      Item item;
      item.slice = true;
      item.start_ns = c.ready_ns;
      item.end_ns = std::max(c.ready_ns, max_ns_);
      item.name = absl::StrCat(ShortOpcode(c.opcode), " QP ", c.qp, " (never polled)");
      item.seq = c.seq;
      item.args = {{"qp", c.qp}, {"wr_id", c.wr_id}, {"status", c.status}};
      Add(TrackKey{TrackKind::kCq, cq}, std::move(item));
    }
  }

  // Lay the slices of each track out in lanes in which they nest; instants go to lane 0.
  struct Lane {
    std::string name;
    std::vector<const Item*> items;
  };
  auto metadata = [&w, pid](const char* name, int tid, auto write_value) {
    w.NewlineBeforeNext();
    w.BeginObject();
    w.Key("ph");
    w.String("M");
    w.Key("name");
    w.String(name);
    w.Key("pid");
    w.Int(pid);
    w.Key("tid");
    w.Int(tid);
    w.Key("args");
    w.BeginObject();
    write_value();
    w.EndObject();
    w.EndObject();
  };
  metadata("process_name", 0, [&] {
    w.Key("name");
    w.String(process_name);
  });
  if (merged) {
    metadata("process_sort_index", 0, [&] {
      w.Key("sort_index");
      w.Int(pid);
    });
  }

  int next_tid = 1;
  std::vector<std::pair<int, Lane>> all_lanes;
  for (auto& [key, items] : items_) {
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      // Earlier first; at the same start the longer slice first (it contains the other).
      uint64_t a_end = a.slice ? a.end_ns : a.start_ns;
      uint64_t b_end = b.slice ? b.end_ns : b.start_ns;
      return std::tie(a.start_ns, b_end, a.seq) < std::tie(b.start_ns, a_end, b.seq);
    });
    std::vector<Lane> lanes(1);
    LaneAssigner assigner(items.size());
    for (const Item& item : items) {
      if (!item.slice) {
        lanes[0].items.push_back(&item);
        continue;
      }
      const size_t chosen = assigner.Assign(item.start_ns, item.end_ns);
      if (chosen == lanes.size()) lanes.emplace_back();
      lanes[chosen].items.push_back(&item);
    }
    for (size_t l = 0; l < lanes.size(); ++l) {
      lanes[l].name = l == 0 ? TrackName(key) : absl::StrCat(TrackName(key), " (", l + 1, ")");
      int tid = next_tid++;
      metadata("thread_name", tid, [&] {
        w.Key("name");
        w.String(lanes[l].name);
      });
      metadata("thread_sort_index", tid, [&] {
        w.Key("sort_index");
        w.Int(tid);
      });
      all_lanes.emplace_back(tid, std::move(lanes[l]));
    }
  }
  for (const auto& [tid, lane] : all_lanes) {
    for (const Item* item : lane.items) {
      w.NewlineBeforeNext();
      w.BeginObject();
      w.Key("name");
      w.String(item->name);
      w.Key("ph");
      w.String(item->slice ? "X" : "i");
      w.Key("ts");
      w.Double(static_cast<double>(item->start_ns) / 1e3);
      if (item->slice) {
        w.Key("dur");
        w.Double(static_cast<double>(item->end_ns - item->start_ns) / 1e3);
      } else {
        w.Key("s");
        w.String(item->scope);
      }
      w.Key("pid");
      w.Int(pid);
      w.Key("tid");
      w.Int(tid);
      if (!item->cname.empty()) {
        w.Key("cname");
        w.String(item->cname);
      }
      w.Key("args");
      w.BeginObject();
      w.Key("seq");
      w.Uint(item->seq);
      for (const Arg& arg : item->args) {
        w.Key(arg.key);
        w.String(arg.value);
      }
      w.EndObject();
      w.EndObject();
    }
  }
}

void ChromeBuilder::WriteSummary(JsonWriter& w) const {
  w.Key("seed");
  w.String(trace_.seed);
  w.Key("faults");
  w.String(trace_.faults);
  w.Key("events");
  w.Uint(trace_.events.size());
  w.Key("fingerprint");
  w.String(trace_.has_end ? trace_.end_fingerprint : trace_.fingerprint);
  w.Key("complete");
  w.Bool(trace_.has_end);
  w.Key("events_not_shown");
  w.Uint(unhandled_);
}

void BeginTraceEvents(JsonWriter& w) {
  w.BeginObject();
  w.Key("traceEvents");
  w.BeginArray();
}

void BeginOtherData(JsonWriter& w) {
  w.EndArray();
  w.Key("displayTimeUnit");
  w.String("ns");
  w.Key("otherData");
  w.BeginObject();
  w.Key("source");
  w.String("softrpma-sim trace (rpma-sim trace --chrome)");
}

}  // namespace

std::string ChromeTraceJson(const Trace& trace) {
  ChromeBuilder builder(trace);
  JsonWriter w;
  BeginTraceEvents(w);
  builder.Write(w, 1,
                absl::StrCat(trace.process.empty() ? "softrpma-sim" : trace.process, " (seed ",
                             trace.seed, ")"),
                /*merged=*/false);
  BeginOtherData(w);
  builder.WriteSummary(w);
  w.EndObject();
  w.EndObject();
  return w.text();
}

std::string ChromeTraceJson(const std::vector<NamedTrace>& traces) {
  std::vector<std::unique_ptr<ChromeBuilder>> builders;
  JsonWriter w;
  BeginTraceEvents(w);
  for (size_t i = 0; i < traces.size(); ++i) {
    builders.push_back(std::make_unique<ChromeBuilder>(*traces[i].trace));
    builders.back()->Write(w, static_cast<int>(i) + 1,
                           absl::StrCat(traces[i].name, " (seed ", traces[i].trace->seed, ")"),
                           /*merged=*/true);
  }
  BeginOtherData(w);
  w.Key("processes");
  w.BeginArray();
  for (size_t i = 0; i < traces.size(); ++i) {
    w.BeginObject();
    w.Key("name");
    w.String(traces[i].name);
    w.Key("pid");
    w.Int(static_cast<int>(i) + 1);
    builders[i]->WriteSummary(w);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return w.text();
}

std::vector<std::string> TraceProcessNames(const std::vector<Trace>& traces,
                                           const std::vector<std::string>& files) {
  std::map<std::string, int> uses;
  for (const Trace& trace : traces) ++uses[trace.process];
  std::vector<std::string> names;
  for (size_t i = 0; i < traces.size(); ++i) {
    const std::string file = std::filesystem::path(files[i]).filename().string();
    const std::string& process = traces[i].process;
    if (process.empty()) {
      names.push_back(file);
    } else if (uses[process] > 1) {
      names.push_back(absl::StrCat(process, " (", file, ")"));
    } else {
      names.push_back(process);
    }
  }
  return names;
}

}  // namespace softrpma::rpma_sim
