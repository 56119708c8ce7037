// chrome_trace.cc: the Chrome layout of a parsed trace. Each work request is followed from its
// post to its completion and each completion from its CQE to its poll; the resulting slices are
// then laid out in lanes in which they nest.

#include "tools/rpma_sim/chrome_trace.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

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
enum class TrackKind { kQp = 0, kCq = 1, kCm = 2, kFaults = 3 };

struct TrackKey {
  TrackKind kind;
  uint64_t number;  // QP number / CQ handle; 0 for the CM and faults tracks
  bool operator<(const TrackKey& o) const {
    return std::tie(kind, number) < std::tie(o.kind, o.number);
  }
};

std::string TrackName(const TrackKey& key) {
  switch (key.kind) {
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

class ChromeBuilder final {
 public:
  explicit ChromeBuilder(const Trace& trace) : trace_(trace) {}
  std::string Build();

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
  void OnCqe(const TraceEvent& e);
  void OnWc(const TraceEvent& e);
  void CloseWr(uint64_t qp, const PendingWr& wr, uint64_t end_ns, const std::vector<Arg>& extra,
               const std::string& status, uint64_t end_seq);

  const Trace& trace_;
  std::map<TrackKey, std::vector<Item>> items_;
  absl::flat_hash_map<uint64_t, std::deque<PendingWr>> sends_;      // by QP
  absl::flat_hash_map<uint64_t, std::deque<PendingWr>> recvs_;      // by QP
  absl::flat_hash_map<uint64_t, std::deque<PendingWr>> srq_recvs_;  // by SRQ
  absl::flat_hash_map<uint64_t, uint64_t> srq_of_qp_;
  absl::flat_hash_map<uint64_t, std::deque<PendingCqe>> cqes_;  // by CQ
  uint64_t max_ns_ = 0;
  uint64_t unhandled_ = 0;
};

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
    cqes_[*cq].push_back(
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
  std::vector<std::deque<PendingWr>*> queues;
  std::deque<PendingWr>* send_queue = &sends_[*qp];
  std::deque<PendingWr>* recv_queue = &recvs_[*qp];
  std::deque<PendingWr>* srq_queue = nullptr;
  if (auto it = srq_of_qp_.find(*qp); it != srq_of_qp_.end()) srq_queue = &srq_recvs_[it->second];
  if (IsRecvOpcode(opcode)) {
    queues = {recv_queue, srq_queue, send_queue};
  } else {
    queues = {send_queue, recv_queue, srq_queue};
  }
  for (std::deque<PendingWr>* queue : queues) {
    if (queue == nullptr) continue;
    auto match = std::find_if(queue->begin(), queue->end(),
                              [&wr_id](const PendingWr& wr) { return wr.wr_id == wr_id; });
    if (match == queue->end()) continue;
    size_t k = static_cast<size_t>(match - queue->begin());
    PendingWr done = *match;
    std::deque<PendingWr> rest;
    for (size_t i = 0; i < queue->size(); ++i) {
      if (i == k) continue;
      // Sends complete in order: the unsignaled ones posted before it are done by now.
      if (queue == send_queue && i < k && !(*queue)[i].signaled) {
        CloseWr(*qp, (*queue)[i], ready, {{"completion", "implied by a later completion"}}, "", 0);
      } else {
        rest.push_back((*queue)[i]);
      }
    }
    *queue = std::move(rest);
    CloseWr(*qp, done, ready, extra, status, e.seq);
    return;
  }
  Instant(TrackKey{TrackKind::kQp, *qp}, e, "completion of an unseen WR " + ShortOpcode(opcode));
}

void ChromeBuilder::OnWc(const TraceEvent& e) {
  std::optional<uint64_t> cq = e.GetNumber("cq");
  if (!cq.has_value()) return;
  std::deque<PendingCqe>& queue = cqes_[*cq];
  std::string qp = F(e, "qp");
  std::string wr_id = F(e, "wr_id");
  auto match = std::find_if(queue.begin(), queue.end(),
                            [&](const PendingCqe& c) { return c.qp == qp && c.wr_id == wr_id; });
  if (match == queue.end()) {
    Instant(TrackKey{TrackKind::kCq, *cq}, e, "polled " + ShortOpcode(F(e, "opcode")));
    return;
  }
  Item item;
  item.slice = true;
  item.start_ns = std::min(match->ready_ns, e.time_ns);
  item.end_ns = e.time_ns;
  item.name = absl::StrCat(ShortOpcode(match->opcode), " QP ", qp);
  if (match->status != "IBV_WC_SUCCESS") {
    absl::StrAppend(&item.name, " ", match->status);
    item.cname = "terrible";
  }
  item.seq = match->seq;
  item.args = {{"qp", qp},
               {"wr_id", wr_id},
               {"status", match->status},
               {"opcode", match->opcode},
               {"byte_len", match->byte_len},
               {"cqe_seq", absl::StrCat(match->seq)},
               {"wc_seq", absl::StrCat(e.seq)}};
  queue.erase(match);
  Add(TrackKey{TrackKind::kCq, *cq}, std::move(item));
}

std::string ChromeBuilder::Build() {
  for (const TraceEvent& e : trace_.events) {
    max_ns_ = std::max(max_ns_, e.time_ns);
    const std::string& t = e.type;
    std::optional<uint64_t> qp = e.GetNumber("qp");
    std::optional<uint64_t> cq = e.GetNumber("cq");
    if (t == "post_send" || t == "post_recv") {
      if (!qp.has_value()) continue;
      PendingWr wr{e.time_ns,     e.seq,
                   F(e, "wr_id"), t == "post_send" ? F(e, "opcode") : "RECV",
                   F(e, "len"),   t == "post_recv" || e.Get("signaled") == "1"};
      (t == "post_send" ? sends_ : recvs_)[*qp].push_back(std::move(wr));
    } else if (t == "post_srq_recv") {
      std::optional<uint64_t> srq = e.GetNumber("srq");
      if (!srq.has_value()) continue;
      srq_recvs_[*srq].push_back(
          PendingWr{e.time_ns, e.seq, F(e, "wr_id"), "SRQ_RECV", F(e, "len"), true});
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
  auto close_rest = [this](uint64_t qp, std::deque<PendingWr>& queue) {
    for (const PendingWr& wr : queue) {
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
    queue.clear();
  };
  std::vector<uint64_t> keys;
  for (auto& [qp, queue] : sends_) keys.push_back(qp);
  std::sort(keys.begin(), keys.end());
  for (uint64_t qp : keys) close_rest(qp, sends_[qp]);
  keys.clear();
  for (auto& [qp, queue] : recvs_) keys.push_back(qp);
  std::sort(keys.begin(), keys.end());
  for (uint64_t qp : keys) close_rest(qp, recvs_[qp]);
  // SRQ receives never taken: on the first QP that uses the SRQ, if any.
  for (auto& [qp, srq] : srq_of_qp_) {
    auto it = srq_recvs_.find(srq);
    if (it != srq_recvs_.end()) close_rest(qp, it->second);
  }
  keys.clear();
  for (auto& [cq, queue] : cqes_) keys.push_back(cq);
  std::sort(keys.begin(), keys.end());
  for (uint64_t cq : keys) {
    for (const PendingCqe& c : cqes_[cq]) {
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
    std::vector<uint64_t> open_ends;  // stack of the ends of the slices that contain "now"
  };
  JsonWriter w;
  w.BeginObject();
  w.Key("traceEvents");
  w.BeginArray();
  auto metadata = [&w](const char* name, int tid, auto write_value) {
    w.NewlineBeforeNext();
    w.BeginObject();
    w.Key("ph");
    w.String("M");
    w.Key("name");
    w.String(name);
    w.Key("pid");
    w.Int(1);
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
    w.String(absl::StrCat("softrpma-sim (seed ", trace_.seed, ")"));
  });

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
    for (const Item& item : items) {
      if (!item.slice) {
        lanes[0].items.push_back(&item);
        continue;
      }
      size_t chosen = lanes.size();
      for (size_t l = 0; l < lanes.size() && chosen == lanes.size(); ++l) {
        std::vector<uint64_t>& open = lanes[l].open_ends;
        while (!open.empty() && open.back() <= item.start_ns) open.pop_back();
        if (open.empty() || open.back() >= item.end_ns) chosen = l;
      }
      if (chosen == lanes.size()) lanes.emplace_back();
      lanes[chosen].open_ends.push_back(item.end_ns);
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
      w.Int(1);
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
  w.EndArray();
  w.Key("displayTimeUnit");
  w.String("ns");
  w.Key("otherData");
  w.BeginObject();
  w.Key("source");
  w.String("softrpma-sim trace (rpma-sim trace --chrome)");
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
  w.EndObject();
  w.EndObject();
  return w.text();
}

}  // namespace

std::string ChromeTraceJson(const Trace& trace) {
  ChromeBuilder builder(trace);
  return builder.Build();
}

}  // namespace softrpma::rpma_sim
