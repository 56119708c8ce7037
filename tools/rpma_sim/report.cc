#include "tools/rpma_sim/report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/rpma_sim/classify.h"
#include "tools/rpma_sim/json.h"
#include "tools/rpma_sim/sim_env.h"
#include "tools/rpma_sim/sweep_kinds.h"

namespace softrpma::rpma_sim {
namespace {

// Runs per class name.
using ClassCounts = std::map<std::string, uint64_t>;

uint64_t Sum(const ClassCounts& c) {
  uint64_t n = 0;
  for (const auto& [name, k] : c) n += k;
  return n;
}

std::string RunLabel(const ReportRun& r) { return PointLabel(PointHits{r.point, 0, r.prog}); }

// Whether the table names the kind of each row: not in a sweep of fail=<errno> only (the
// table before kinds, and a report written then).
bool TableNamesKinds(const SweepReport& report) {
  return !(report.kinds.empty() || (report.kinds.size() == 1 && report.kinds[0] == "fail"));
}

// The table's row of a run: its point's label, and its kind (TableNamesKinds).
std::string RowLabel(const SweepReport& report, const ReportRun& r) {
  if (!TableNamesKinds(report)) return RunLabel(r);
  return absl::StrCat(RunLabel(r), " [", r.kind, "]");
}

// ---- Writing -----------------------------------------------------------------------------

void WriteRun(JsonWriter& w, const ReportRun& r) {
  w.BeginObject();
  w.Key("point");
  r.point.empty() ? w.Null() : w.String(r.point);
  w.Key("prog");
  r.prog.empty() ? w.Null() : w.String(r.prog);
  w.Key("nth");
  r.nth == 0 ? w.Null() : w.Uint(r.nth);
  w.Key("spec");
  r.spec.empty() ? w.Null() : w.String(r.spec);
  w.Key("kind");
  r.kind.empty() ? w.Null() : w.String(r.kind);
  w.Key("action");
  r.action.empty() ? w.Null() : w.String(r.action);
  if (r.seed.has_value()) {  // (only under --seeds: other reports stay as they were)
    w.Key("seed");
    w.Uint(*r.seed);
  }
  w.Key("exit");
  r.exit_code.has_value() ? w.Int(*r.exit_code) : w.Null();
  w.Key("signal");
  r.signal.empty() ? w.Null() : w.String(r.signal);
  w.Key("class");
  w.String(r.class_name);
  w.Key("detail");
  w.String(r.detail);
  w.Key("fails_sweep");
  w.Bool(r.fails_sweep);
  w.Key("kept_objects");
  w.Uint(r.kept_objects);
  w.Key("duration_ms");
  w.Double(r.duration_ms);
  w.Key("replay");
  w.String(r.replay);
  if (!r.output_tail.empty()) {
    w.Key("output_tail");
    w.String(r.output_tail);
  }
  if (!r.hang_report.empty()) {
    w.Key("hang_report");
    w.String(r.hang_report);
  }
  if (!r.traces.empty()) {
    w.Key("traces");
    w.BeginArray();
    for (const std::string& trace : r.traces) w.String(trace);
    w.EndArray();
  }
  w.EndObject();
}

// ---- Reading -----------------------------------------------------------------------------

// Reads the members of one JSON object, remembering the first error (its path and what was
// expected), so that a parse reads as a list of fields.
class Fields final {
 public:
  Fields(const JsonValue* object, std::string path, std::string* error)
      : object_(object), path_(std::move(path)), error_(error) {
    if (object_ == nullptr || object_->kind != JsonValue::Kind::kObject) {
      Fail("", "an object");
      object_ = nullptr;
    }
  }

  const JsonValue* Get(absl::string_view key, JsonValue::Kind kind, bool nullable,
                       const char* expected) {
    if (object_ == nullptr) return nullptr;
    const JsonValue* v = object_->Find(key);
    if (v == nullptr) {
      Fail(key, expected, "missing; expected ");
      return nullptr;
    }
    if (nullable && v->is_null()) return nullptr;
    if (v->kind != kind) {
      Fail(key, expected);
      return nullptr;
    }
    return v;
  }
  std::string String(absl::string_view key, bool nullable = false) {
    const JsonValue* v = Get(key, JsonValue::Kind::kString, nullable,
                             nullable ? "a string or null" : "a string");
    return v != nullptr ? v->text : "";
  }
  std::optional<uint64_t> Uint(absl::string_view key, bool nullable = false) {
    return Whole<uint64_t>(key, nullable, "a whole number >= 0");
  }
  std::optional<int64_t> Int(absl::string_view key, bool nullable = false) {
    return Whole<int64_t>(key, nullable, "a whole number");
  }
  // A whole number of type T (`what`: "a whole number", ...), or null when `nullable`.
  template <typename T>
  std::optional<T> Whole(absl::string_view key, bool nullable, const std::string& what) {
    const std::string expected = nullable ? what + " or null" : what;
    const JsonValue* v = Get(key, JsonValue::Kind::kNumber, nullable, expected.c_str());
    if (v == nullptr) return std::nullopt;
    T n = 0;
    if (!absl::SimpleAtoi(v->text, &n)) {
      Fail(key, what.c_str());
      return std::nullopt;
    }
    return n;
  }
  double Number(absl::string_view key) {
    const JsonValue* v = Get(key, JsonValue::Kind::kNumber, false, "a number");
    return v != nullptr ? v->number : 0;
  }
  bool Bool(absl::string_view key) {
    const JsonValue* v = Get(key, JsonValue::Kind::kBool, false, "true or false");
    return v != nullptr && v->boolean;
  }
  const JsonValue* Array(absl::string_view key) {
    return Get(key, JsonValue::Kind::kArray, false, "an array");
  }
  const JsonValue* Object(absl::string_view key, bool nullable = false) {
    return Get(key, JsonValue::Kind::kObject, nullable, nullable ? "an object or null" : "an object");
  }
  std::string Path(absl::string_view key) const {
    return key.empty() ? path_ : path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }

 private:
  void Fail(absl::string_view key, absl::string_view expected,
            absl::string_view how = "expected ") {
    if (!error_->empty()) return;
    std::string where = Path(key);
    *error_ = absl::StrCat(where.empty() ? "the report" : where, ": ", how, expected);
  }

  const JsonValue* object_;
  std::string path_;
  std::string* error_;
};

ReportRun ParseRun(const JsonValue& value, const std::string& path, std::string* error) {
  Fields f(&value, path, error);
  ReportRun r;
  r.point = f.String("point", true);
  r.prog = f.String("prog", true);
  r.nth = f.Uint("nth", true).value_or(0);
  r.spec = f.String("spec", true);
  // Reports written before kinds have no kind: their runs were all fail=<errno>.
  if (value.Find("kind") != nullptr) {
    r.kind = f.String("kind", true);
    r.action = f.String("action", true);
  } else if (!r.spec.empty()) {
    r.kind = "fail";
    std::vector<std::string> fields = absl::StrSplit(r.spec, ':');
    if (fields.size() >= 2) r.action = fields[1];
  }
  if (value.Find("seed") != nullptr) r.seed = f.Uint("seed", true);
  std::optional<int64_t> exit = f.Int("exit", true);
  if (exit.has_value()) r.exit_code = static_cast<int>(*exit);
  r.signal = f.String("signal", true);
  r.class_name = f.String("class");
  r.detail = f.String("detail");
  r.fails_sweep = f.Bool("fails_sweep");
  r.kept_objects = f.Uint("kept_objects").value_or(0);
  r.duration_ms = f.Number("duration_ms");
  r.replay = f.String("replay");
  if (value.Find("output_tail") != nullptr) r.output_tail = f.String("output_tail");
  if (value.Find("hang_report") != nullptr) r.hang_report = f.String("hang_report");
  if (value.Find("traces") != nullptr) {
    if (const JsonValue* traces = f.Array("traces"); traces != nullptr) {
      for (size_t i = 0; i < traces->elements.size(); ++i) {
        if (traces->elements[i].kind != JsonValue::Kind::kString) {
          if (error->empty()) *error = absl::StrCat(path, ".traces[", i, "]: expected a string");
          break;
        }
        r.traces.push_back(traces->elements[i].text);
      }
    }
  }
  if (error->empty() && r.class_name.empty()) *error = absl::StrCat(path, ".class: empty");
  return r;
}

PointHits ParsePoint(const JsonValue& value, const std::string& path, bool with_prog,
                     std::string* error) {
  Fields f(&value, path, error);
  PointHits p;
  p.point = f.String("point");
  // not_swept entries have "prog" since reports of two-process sweeps needed it (older ones:
  // read as one program's).
  if (with_prog || value.Find("prog") != nullptr) p.prog = f.String("prog", true);
  p.hits = f.Uint("hits").value_or(0);
  return p;
}

// ---- Merging -----------------------------------------------------------------------------

std::string SeedText(const std::optional<uint64_t>& seed) {
  return seed.has_value() ? absl::StrCat(*seed) : "the simulator's default";
}

}  // namespace

std::vector<std::string> ClassColumns(const SweepReport& report) {
  std::vector<std::string> columns;
  for (int i = 0; i < kNumRunClasses; ++i) columns.push_back(RunClassName(static_cast<RunClass>(i)));
  std::set<std::string> extra;
  for (const ReportRun& r : report.runs) {
    if (std::find(columns.begin(), columns.end(), r.class_name) == columns.end()) {
      extra.insert(r.class_name);
    }
  }
  columns.insert(columns.end(), extra.begin(), extra.end());
  return columns;
}

std::string FormatTable(const SweepReport& report) {
  const std::vector<std::string> columns = ClassColumns(report);
  absl::flat_hash_map<std::string, ClassCounts> by_point;
  ClassCounts total;
  for (const ReportRun& r : report.runs) {
    ++by_point[RowLabel(report, r)][r.class_name];
    ++total[r.class_name];
  }
  // A row per point, or per point and kind (in the kinds' order) when several were injected.
  std::vector<std::pair<std::string, const PointHits*>> rows;
  for (const PointHits& p : report.points) {
    bool any = false;
    if (TableNamesKinds(report)) {
      for (const std::string& kind : report.kinds) {
        std::string label = absl::StrCat(PointLabel(p), " [", kind, "]");
        if (by_point.contains(label)) {
          rows.emplace_back(std::move(label), &p);
          any = true;
        }
      }
    }
    if (!any) rows.emplace_back(PointLabel(p), &p);
  }
  size_t width = 5;  // "total"
  for (const auto& [label, p] : rows) width = std::max(width, label.size());
  std::string out;
  auto row = [&](absl::string_view name, absl::string_view hits, absl::string_view runs,
                 const std::vector<std::string>& cells) {
    absl::StrAppendFormat(&out, "%-*s %7s %6s", static_cast<int>(width), name, hits, runs);
    for (size_t i = 0; i < columns.size(); ++i) {
      // Each class column is one wider than its name ("clean" takes 6).
      absl::StrAppendFormat(&out, " %*s", static_cast<int>(columns[i].size() + 1), cells[i]);
    }
    out += '\n';
  };
  auto counted = [&](const ClassCounts& c) {
    std::vector<std::string> cells;
    for (const std::string& name : columns) {
      auto it = c.find(name);
      cells.push_back(absl::StrCat(it == c.end() ? 0 : it->second));
    }
    return cells;
  };
  out += '\n';
  row("point", "hits", "runs", columns);
  uint64_t total_hits = 0;
  for (const auto& [label, p] : rows) {
    const ClassCounts& c = by_point[label];
    row(label, absl::StrCat(p->hits), absl::StrCat(Sum(c)), counted(c));
  }
  for (const PointHits& p : report.points) total_hits += p.hits;
  row("total", absl::StrCat(total_hits), absl::StrCat(Sum(total)), counted(total));
  if (!report.not_swept.empty()) {
    absl::StrAppend(&out, "not swept (calls that return void and cannot fail): ",
                    absl::StrJoin(report.not_swept, ", ",
                                  [](std::string* o, const PointHits& p) {
                                    absl::StrAppend(o, PointLabel(p), " (", p.hits, " hits)");
                                  }),
                    "\n");
  }
  return out;
}

std::string ReportJson(const SweepReport& report) {
  JsonWriter w;
  w.BeginObject();
  w.Key("program");
  w.BeginArray();
  for (const std::string& arg : report.program) w.String(arg);
  w.EndArray();
  w.Key("device");
  w.String(report.device);
  w.Key("seed");
  report.seed.has_value() ? w.Uint(*report.seed) : w.Null();
  if (report.seeds > 1) {
    w.Key("seeds");
    w.Uint(report.seeds);
  }
  w.Key("jobs");
  w.Int(report.jobs);
  w.Key("timeout_s");
  w.Double(report.timeout_s);
  w.Key("max_runs");
  w.Uint(report.max_runs);
  w.Key("kinds");
  w.BeginArray();
  for (const std::string& kind : report.kinds) w.String(kind);
  w.EndArray();
  w.Key("leak_checker");
  w.String(report.leak_checker);
  w.Key("interrupted");
  w.Bool(report.interrupted);
  w.Key("shard");
  if (report.shard.has_value()) {
    w.BeginObject();
    w.Key("index");
    w.Uint(report.shard->index);
    w.Key("total");
    w.Uint(report.shard->total);
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("plan_runs");
  w.Uint(report.plan_runs);
  if (report.merged_shards > 0) {
    w.Key("merged_shards");
    w.Uint(report.merged_shards);
    w.Key("missing_shards");
    w.BeginArray();
    for (uint64_t s : report.missing_shards) w.Uint(s);
    w.EndArray();
  }
  w.Key("clean_run");
  WriteRun(w, report.clean_run);

  const std::vector<std::string> columns = ClassColumns(report);
  absl::flat_hash_map<std::string, ClassCounts> by_point;
  ClassCounts total;
  for (const ReportRun& r : report.runs) {
    ++by_point[RunLabel(r)][r.class_name];
    ++total[r.class_name];
  }
  auto counts = [&](const ClassCounts& c) {
    w.Key("runs");
    w.Uint(Sum(c));
    for (const std::string& name : columns) {
      auto it = c.find(name);
      w.Key(name);
      w.Uint(it == c.end() ? 0 : it->second);
    }
  };
  w.Key("points");
  w.BeginArray();
  for (const PointHits& p : report.points) {
    w.NewlineBeforeNext();
    w.BeginObject();
    w.Key("point");
    w.String(p.point);
    w.Key("prog");
    p.prog.empty() ? w.Null() : w.String(p.prog);
    w.Key("hits");
    w.Uint(p.hits);
    counts(by_point[PointLabel(p)]);
    w.EndObject();
  }
  w.EndArray();
  w.Key("not_swept");
  w.BeginArray();
  for (const PointHits& p : report.not_swept) {
    w.BeginObject();
    w.Key("point");
    w.String(p.point);
    // As on "points": a two-process sweep has the same point in each program.
    w.Key("prog");
    p.prog.empty() ? w.Null() : w.String(p.prog);
    w.Key("hits");
    w.Uint(p.hits);
    w.Key("reason");
    w.String("returns void: cannot fail");
    w.EndObject();
  }
  w.EndArray();
  w.Key("totals");
  w.BeginObject();
  counts(total);
  w.EndObject();
  w.Key("runs");
  w.BeginArray();
  for (const ReportRun& r : report.runs) {
    w.NewlineBeforeNext();
    WriteRun(w, r);
  }
  w.EndArray();
  w.EndObject();
  return w.text();
}

absl::StatusOr<SweepReport> ParseReport(absl::string_view text) {
  absl::StatusOr<JsonValue> json = ParseJson(text);
  if (!json.ok()) return json.status();
  std::string error;
  Fields f(&*json, "", &error);
  SweepReport report;
  if (const JsonValue* program = f.Array("program"); program != nullptr) {
    for (size_t i = 0; i < program->elements.size(); ++i) {
      if (program->elements[i].kind != JsonValue::Kind::kString) {
        if (error.empty()) error = absl::StrCat("program[", i, "]: expected a string");
        break;
      }
      report.program.push_back(program->elements[i].text);
    }
  }
  report.device = f.String("device");
  report.seed = f.Uint("seed", true);
  if (json->Find("seeds") != nullptr) report.seeds = f.Uint("seeds").value_or(1);
  report.jobs = f.Int("jobs").value_or(0);
  report.timeout_s = f.Number("timeout_s");
  report.max_runs = f.Uint("max_runs").value_or(0);
  if (json->Find("kinds") == nullptr) {
    report.kinds = {"fail"};  // a report written before kinds
  } else if (const JsonValue* kinds = f.Array("kinds"); kinds != nullptr) {
    for (size_t i = 0; i < kinds->elements.size(); ++i) {
      if (kinds->elements[i].kind != JsonValue::Kind::kString) {
        if (error.empty()) error = absl::StrCat("kinds[", i, "]: expected a string");
        break;
      }
      report.kinds.push_back(kinds->elements[i].text);
    }
  }
  report.leak_checker = f.String("leak_checker");
  report.interrupted = f.Bool("interrupted");
  if (const JsonValue* shard = f.Object("shard", true); shard != nullptr) {
    Fields s(shard, "shard", &error);
    std::optional<uint64_t> index = s.Uint("index");
    std::optional<uint64_t> total = s.Uint("total");
    if (index.has_value() && total.has_value()) {
      absl::StatusOr<Shard> parsed = ParseShard(absl::StrCat(*index, "/", *total));
      if (parsed.ok()) {
        report.shard = *parsed;
      } else if (error.empty()) {
        error = absl::StrCat("shard: ", parsed.status().message());
      }
    }
  }
  report.plan_runs = f.Uint("plan_runs").value_or(0);
  if (const JsonValue* clean = f.Object("clean_run"); clean != nullptr) {
    report.clean_run = ParseRun(*clean, "clean_run", &error);
  }
  if (const JsonValue* points = f.Array("points"); points != nullptr) {
    for (size_t i = 0; i < points->elements.size(); ++i) {
      report.points.push_back(
          ParsePoint(points->elements[i], absl::StrCat("points[", i, "]"), true, &error));
    }
  }
  if (const JsonValue* not_swept = f.Array("not_swept"); not_swept != nullptr) {
    for (size_t i = 0; i < not_swept->elements.size(); ++i) {
      report.not_swept.push_back(
          ParsePoint(not_swept->elements[i], absl::StrCat("not_swept[", i, "]"), false, &error));
    }
  }
  if (const JsonValue* runs = f.Array("runs"); runs != nullptr) {
    for (size_t i = 0; i < runs->elements.size(); ++i) {
      report.runs.push_back(ParseRun(runs->elements[i], absl::StrCat("runs[", i, "]"), &error));
    }
  }
  if (json->Find("merged_shards") != nullptr) {
    report.merged_shards = f.Uint("merged_shards").value_or(0);
    if (const JsonValue* missing = f.Array("missing_shards"); missing != nullptr) {
      for (const JsonValue& m : missing->elements) {
        uint64_t n = 0;
        if (m.kind == JsonValue::Kind::kNumber && absl::SimpleAtoi(m.text, &n)) {
          report.missing_shards.push_back(n);
        } else if (error.empty()) {
          error = "missing_shards: expected whole numbers";
        }
      }
    }
  }
  if (!error.empty()) return absl::InvalidArgumentError(error);
  return report;
}

bool ReportFailed(const SweepReport& report) {
  if (report.clean_run.fails_sweep || report.interrupted || !report.missing_shards.empty()) {
    return true;
  }
  return std::any_of(report.runs.begin(), report.runs.end(),
                     [](const ReportRun& r) { return r.fails_sweep; });
}

absl::StatusOr<SweepReport> MergeReports(const std::vector<SweepReport>& reports,
                                         const std::vector<std::string>& names,
                                         std::vector<std::string>* warnings) {
  if (reports.empty()) return absl::InvalidArgumentError("no report to merge");
  if (reports.size() == 1 && !reports[0].shard.has_value()) return reports[0];
  // Every report must be a shard of the same sweep.
  std::vector<size_t> order;
  for (size_t i = 0; i < reports.size(); ++i) {
    const SweepReport& r = reports[i];
    if (!r.shard.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          names[i], " is the report of a whole sweep (no --shard): it overlaps every shard; "
                    "merge the reports of the shards of one sweep"));
    }
    const SweepReport& first = reports[0];
    auto differ = [&](absl::string_view what, const std::string& a, const std::string& b) {
      return absl::InvalidArgumentError(absl::StrCat(names[0], " and ", names[i],
                                                     " are reports of different sweeps: ", what,
                                                     " ", a, " and ", b));
    };
    if (r.program != first.program) {
      return differ("program", ShellJoin(first.program), ShellJoin(r.program));
    }
    if (r.device != first.device) return differ("device", first.device, r.device);
    if (r.seed != first.seed) return differ("seed", SeedText(first.seed), SeedText(r.seed));
    if (r.seeds != first.seeds) {
      return differ("--seeds", absl::StrCat(first.seeds), absl::StrCat(r.seeds));
    }
    if (r.max_runs != first.max_runs) {
      return differ("--max-runs", absl::StrCat(first.max_runs), absl::StrCat(r.max_runs));
    }
    if (r.kinds != first.kinds) {
      return differ("--kinds", absl::StrJoin(first.kinds, ","), absl::StrJoin(r.kinds, ","));
    }
    if (r.leak_checker != first.leak_checker) {
      return differ("leak checker", first.leak_checker, r.leak_checker);
    }
    if (r.shard->total != first.shard->total) {
      return differ("shard count", ShardName(*first.shard), ShardName(*r.shard));
    }
    for (size_t j : order) {
      if (reports[j].shard->index == r.shard->index) {
        return absl::InvalidArgumentError(
            absl::StrCat("overlapping shards: ", names[j], " and ", names[i], " are both shard ",
                         ShardName(*r.shard)));
      }
    }
    order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reports[a].shard->index < reports[b].shard->index;
  });

  const SweepReport& lowest = reports[order[0]];
  SweepReport merged = lowest;
  merged.shard.reset();
  merged.runs.clear();
  merged.merged_shards = reports.size();
  merged.interrupted = false;
  // The points in the lowest shard's order, then any other shard's new ones.
  auto merge_points = [&](std::vector<PointHits>* into, const std::vector<PointHits>& from,
                          const std::string& name) {
    for (const PointHits& p : from) {
      auto it = std::find_if(into->begin(), into->end(), [&](const PointHits& q) {
        return q.point == p.point && q.prog == p.prog;
      });
      if (it == into->end()) {
        into->push_back(p);
        warnings->push_back(absl::StrCat(name, ": ", PointLabel(p),
                                         " was hit by its clean run only"));
      } else if (it->hits != p.hits) {
        warnings->push_back(absl::StrCat(name, ": its clean run hit ", PointLabel(p), " ",
                                         p.hits, " times, the first shard's ", it->hits,
                                         " (the program is not deterministic?)"));
        it->hits = std::max(it->hits, p.hits);
      }
    }
  };
  // run (prog, point, nth, action, seed) -> report
  std::map<std::tuple<std::string, std::string, uint64_t, std::string, std::optional<uint64_t>>,
           size_t>
      seen;
  for (size_t i : order) {
    const SweepReport& r = reports[i];
    if (i != order[0]) {
      merge_points(&merged.points, r.points, names[i]);
      merge_points(&merged.not_swept, r.not_swept, names[i]);
    }
    merged.interrupted = merged.interrupted || r.interrupted;
    merged.plan_runs = std::max(merged.plan_runs, r.plan_runs);
    if (r.clean_run.fails_sweep && !merged.clean_run.fails_sweep) merged.clean_run = r.clean_run;
    for (const ReportRun& run : r.runs) {
      auto [it, inserted] =
          seen.emplace(std::make_tuple(run.prog, run.point, run.nth, run.action, run.seed), i);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            "overlapping shards: ", names[it->second], " and ", names[i], " both ran ",
            run.spec.empty() ? RunLabel(run) : run.spec));
      }
      merged.runs.push_back(run);
    }
  }
  // The whole sweep's order: point by point as listed, hits ascending, each hit's effects in
  // the sweep's order (sweep_kinds.h).
  std::map<std::string, size_t> rank;
  for (size_t k = 0; k < merged.points.size(); ++k) rank.emplace(PointLabel(merged.points[k]), k);
  std::stable_sort(merged.runs.begin(), merged.runs.end(),
                   [&](const ReportRun& a, const ReportRun& b) {
                     auto ra = rank.find(RunLabel(a)), rb = rank.find(RunLabel(b));
                     size_t ka = ra == rank.end() ? rank.size() : ra->second;
                     size_t kb = rb == rank.end() ? rank.size() : rb->second;
                     const size_t ea = EffectRank(a.point, a.action, merged.device);
                     const size_t eb = EffectRank(b.point, b.action, merged.device);
                     return std::tie(ka, a.nth, ea, a.seed) < std::tie(kb, b.nth, eb, b.seed);
                   });
  std::set<uint64_t> present;
  for (size_t i : order) present.insert(reports[i].shard->index);
  for (uint64_t s = 1; s <= lowest.shard->total; ++s) {
    if (present.count(s) == 0) merged.missing_shards.push_back(s);
  }
  return merged;
}

JunitSuite ReportJunit(const SweepReport& report) {
  std::string program_name =
      report.program.empty() ? "program"
                             : std::filesystem::path(report.program[0]).filename().string();
  JunitSuite suite;
  suite.name = absl::StrCat(
      "rpma-sim sweep ", ShellJoin(report.program), " (device ", report.device,
      report.shard.has_value() ? absl::StrCat(", shard ", ShardName(*report.shard)) : "", ")");
  const std::string classname = absl::StrCat("rpma-sim.sweep.", report.device, ".", program_name);
  auto add = [&](const ReportRun& r, std::string name) {
    JunitCase c;
    c.name = std::move(name);
    c.classname = classname;
    c.time_s = r.duration_ms / 1000;
    c.failed = r.fails_sweep;
    const std::string outcome = absl::StrCat(r.class_name, " (", r.detail, ")");
    if (c.failed) {
      c.failure_message = outcome;
      c.failure_type = r.class_name;
      c.failure_text = absl::StrCat(outcome, ": ", r.spec.empty() ? "the clean run" : r.spec,
                                    "\n  replay: ", r.replay, "\n");
    }
    c.system_out = r.output_tail;
    if (!r.hang_report.empty()) {
      absl::StrAppend(&c.system_out, c.system_out.empty() ? "" : "\n",
                      r.class_name == "orphaned" ? "stopped, orphaned:\n" : "where it hangs:\n",
                      r.hang_report);
    }
    if (!r.traces.empty()) {
      absl::StrAppend(&c.system_out, c.system_out.empty() ? "" : "\n", "traces kept: ",
                      absl::StrJoin(r.traces, " "), "\n");
    }
    suite.cases.push_back(std::move(c));
  };
  add(report.clean_run, "clean run");
  for (const ReportRun& r : report.runs) {
    std::string name = absl::StrCat(RunLabel(r), " hit ", r.nth);
    // A fail run keeps the name it had before kinds (JUnit histories follow test names).
    if (!r.kind.empty() && r.kind != "fail") {
      absl::StrAppend(&name, " (", r.kind, r.action == r.kind ? "" : absl::StrCat(": ", r.action),
                      ")");
    }
    if (r.seed.has_value()) absl::StrAppend(&name, " seed ", *r.seed);
    add(r, std::move(name));
  }
  return suite;
}

}  // namespace softrpma::rpma_sim
