#include "tools/rpma_sim/sweep.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/rpma_sim/classify.h"
#include "tools/rpma_sim/hang_report.h"
#include "tools/rpma_sim/junit.h"
#include "tools/rpma_sim/process.h"
#include "tools/rpma_sim/process_ends.h"
#include "tools/rpma_sim/report.h"
#include "tools/rpma_sim/shard.h"
#include "tools/rpma_sim/sim_checks.h"
#include "tools/rpma_sim/sim_env.h"
#include "tools/rpma_sim/sweep_plan.h"

namespace softrpma::rpma_sim {
namespace {

constexpr size_t kOutputTailBytes = 2000;  // of a failing run's output, in the JSON report
constexpr int kProgressWidth = 30;

// Counts per class, indexed by RunClass.
using ClassCounts = std::array<uint64_t, kNumRunClasses>;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

// A run's output, for classifying it: all of it up to kMaxOutputBytes, else its first and last
// parts (a sanitizer's report is at the end; a very chatty program must not exhaust memory).
constexpr size_t kMaxOutputBytes = 8 << 20;
constexpr size_t kOutputHeadBytes = 1 << 20;

std::string ReadOutput(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return "";
  size_t size = static_cast<size_t>(file.tellg());
  file.seekg(0);
  if (size <= kMaxOutputBytes) {
    return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  }
  std::string head(kOutputHeadBytes, '\0');
  file.read(head.data(), head.size());
  size_t tail_bytes = kMaxOutputBytes - kOutputHeadBytes;
  std::string tail(tail_bytes, '\0');
  file.seekg(static_cast<std::streamoff>(size - tail_bytes));
  file.read(tail.data(), tail.size());
  return absl::StrCat(head, "\n[... ", size - kMaxOutputBytes, " bytes not read ...]\n", tail);
}

// ASAN_OPTIONS log_path's file name in a run's directory (ASan appends ".<pid>").
constexpr char kAsanLogName[] = "asan";

// The sanitizer logs of `run_dir` (kAsanLogName.<pid>), by pid, each bounded as ReadOutput
// bounds a run's output.
std::vector<std::pair<int, std::string>> ReadAsanLogs(const std::string& run_dir) {
  std::vector<std::pair<int, std::string>> logs;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    int pid = 0;
    if (!absl::StartsWith(name, absl::StrCat(kAsanLogName, ".")) ||
        !absl::SimpleAtoi(name.substr(sizeof(kAsanLogName)), &pid)) {
      continue;
    }
    logs.emplace_back(pid, ReadOutput(entry.path().string()));
  }
  std::sort(logs.begin(), logs.end());
  return logs;
}

// The stats files of one run (one per process; `<dir>/<prefix><pid>.txt`), read in name order
// and removed.
std::vector<std::string> TakeStatsFiles(const std::string& dir, absl::string_view prefix) {
  std::error_code error;
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, prefix) && absl::EndsWith(name, ".txt")) {
      paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> texts;
  for (const std::string& path : paths) {
    texts.push_back(ReadFile(path));
    std::filesystem::remove(path, error);
  }
  return texts;
}

std::string Seconds(absl::Duration d) { return absl::StrFormat("%.2fs", absl::ToDoubleSeconds(d)); }

// A scratch directory, removed (with what is in it) when this goes out of scope.
class ScratchDir final {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/rpma-sim-sweep.XXXXXX");
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  // "" when it could not be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One finished run, for the table, the failure lines and the report.
struct RunRecord {
  std::string point;  // "" for the clean run
  std::string prog;   // the program whose point is failed ("" when the run has one name)
  uint64_t nth = 0;
  std::string spec;  // "" for the clean run (no RPMA_SIM_FAULTS)
  SweepKind kind = SweepKind::kFail;
  std::string action;  // the effect injected ("" for the clean run)
  std::optional<uint64_t> seed;  // --seeds: its own; none: the sweep's
  ChildExit exit;
  uint64_t kept_objects = 0;  // kept by the NIC after injected destroy failures (all processes)
  RunVerdict verdict;
  std::string replay;
  std::string output_tail;  // failing runs only
  std::vector<std::string> traces;  // kept (--keep-traces): failing runs only
  // The programs of its processes with and without AddressSanitizer (their end records), for
  // LeakChecker::kAsanProcesses.
  std::vector<std::string> asan_progs;
  std::vector<std::string> plain_progs;
};

// The sweep of one program.
// The points (of a program) whose hits differ between two clean runs' counts (0 hits: not hit).
size_t CountsThatDiffer(const std::vector<PointHits>& a, const std::vector<PointHits>& b) {
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>> hits;
  for (const PointHits& p : a) hits[{p.prog, p.point}].first += p.hits;
  for (const PointHits& p : b) hits[{p.prog, p.point}].second += p.hits;
  return std::count_if(hits.begin(), hits.end(),
                       [](const auto& entry) { return entry.second.first != entry.second.second; });
}

class Sweeper final {
 public:
  Sweeper(const SweepOptions& options, std::FILE* out) : options_(options), out_(out) {}

  int Run();

 private:
  // The device profile every run uses (docs/DEVICES.md).
  std::string DeviceName() const {
    return options_.device.empty() ? DefaultDevice() : options_.device;
  }
  // The command (and its replay line) of one run with `faults` (nullopt: none).
  // `run` numbers the run (0: the clean run) for its fabric. `run_dir` (made here) is where its
  // processes record how they end (RPMA_SIM_RUN_DIR).
  // `seed`: the run's own (--seeds); nullopt: the sweep's.
  ChildCommand Command(const std::optional<std::string>& faults, const std::string& stats,
                       const std::string& output, const std::string& run_dir, size_t run,
                       std::string* replay,
                       const std::optional<uint64_t>& seed = std::nullopt) const;
  // Classifies a finished run from its exit, output, the stats files of its processes and the
  // records in `run_dir` of how each of them ended (removed); keeps the tail of the output of a
  // run that failed or exited non-zero.
  void Finish(const ChildExit& exit, const std::string& output_path,
              const std::vector<std::string>& stats_texts, const std::string& run_dir,
              RunRecord* record) const;
  void DrawProgress(size_t done, size_t total, const ClassCounts& counts) const;
  void ClearProgress() const;
  void PrintFailure(const RunRecord& record) const;
  // Whether `record` makes the sweep fail: crashed or hung; leaked with --leaks.
  bool FailsSweep(const RunRecord& record) const;
  // Why the --plan-from report cannot plan this sweep (another program, device or kinds, or a
  // clean run that failed); "" when it can.
  std::string PlanMismatch(const SweepReport& plan) const;
  ReportRun ToReportRun(const RunRecord& record) const;
  // The sweep as a report: its clean run, the points (with the whole plan's `plan_runs`) and
  // the runs made.
  SweepReport MakeReport(const RunRecord& clean, const std::vector<PointHits>& swept,
                         const std::vector<PointHits>& not_swept,
                         const std::vector<RunRecord>& runs, uint64_t plan_runs,
                         bool interrupted) const;
  // The report of a sweep that stopped after its clean run for `why`: the clean run fails.
  SweepReport FailedBeforeTheRuns(const RunRecord& clean, absl::string_view why) const {
    SweepReport report = MakeReport(clean, {}, {}, {}, 0, false);
    report.clean_run.fails_sweep = true;
    absl::StrAppend(&report.clean_run.detail, "; ", why);
    return report;
  }
  // Writes the report (--report) and the JUnit XML (--junit) that were asked for; false when
  // one could not be written (said on stderr).
  bool WriteOutputs(const SweepReport& report) const;
  // The directory of run `run` (0: the clean run), RPMA_SIM_RUN_DIR; made on first use.
  std::string RunDir(size_t run) const;
  // Where the processes of the run of `run_dir` write their traces (--keep-traces): beside it,
  // as RunDir is removed when the run is read.
  static std::string TraceDir(const std::string& run_dir) { return run_dir + ".traces"; }
  // --keep-traces: moves the traces of `record`'s run (`run_dir`) to the kept directory when the
  // run fails the sweep (`keep`), else removes them.
  void KeepTraces(const std::string& run_dir, bool keep, RunRecord* record) const;
  // What RunChildren asks about runs that hang or are orphaned; `first_run` is the run number of
  // command 0.
  RunWatch Watch(size_t first_run, OrphanCheck* orphans) const;

  const SweepOptions& options_;
  std::string scratch_;
  std::FILE* out_;
  LeakChecker checker_ = LeakChecker::kNone;
};

ChildCommand Sweeper::Command(const std::optional<std::string>& faults, const std::string& stats,
                              const std::string& output, const std::string& run_dir, size_t run,
                              std::string* replay, const std::optional<uint64_t>& seed) const {
  std::vector<std::string> program = options_.program;
  if (checker_ == LeakChecker::kValgrind) {
    std::vector<std::string> prefixed = ValgrindPrefix();
    prefixed.insert(prefixed.end(), program.begin(), program.end());
    program = std::move(prefixed);
  }
  SimConfig config;
  config.seed = seed.has_value() ? seed : options_.seed;
  config.device = options_.device;
  config.execution = options_.execution;
  config.race_detector = options_.race_detector;
  config.faults = faults;
  config.stats = stats;
  config.lib_dir = options_.lib_dir;
  config.verbs_lib_dir = options_.verbs_lib_dir;
  config.upstream_librpma = options_.upstream_librpma;
  config.upstream_lib_dir = options_.upstream_lib_dir;
  // Runs go side by side (-j): each meets only its own processes.
  config.fabric = absl::StrCat("sweep-", getpid(), "-", run);
  // A directory that cannot be made is the simulator's error at start (RPMA_SIM_RUN_DIR: not a
  // writable directory), in the run's output: a sweep would otherwise see no process's end.
  std::error_code ignored;
  std::filesystem::create_directory(run_dir, ignored);
  config.run_dir = run_dir;
  *replay = ReplayCommand(options_.tool, config, options_.library_flags, program);
  if (!options_.keep_traces.empty()) {  // not in the replay line: it reproduces without
    std::filesystem::create_directory(TraceDir(run_dir), ignored);
    config.trace = TraceDir(run_dir) + "/%r.%p.trace";
  }
  ChildCommand command = SimCommand(config, program);
  command.output_path = output;
  if (checker_ == LeakChecker::kAsan || checker_ == LeakChecker::kAsanProcesses) {
    const char* asan = std::getenv("ASAN_OPTIONS");
    command.env_set.emplace_back(
        "ASAN_OPTIONS",
        absl::StrCat(asan != nullptr && *asan != '\0' ? asan : "",
                     asan != nullptr && *asan != '\0' ? ":" : "", "detect_leaks=1",
                     // Each process's reports into the run's directory (asan.<pid>), read by
                     // Finish: a script may send its programs' output anywhere.
                     checker_ == LeakChecker::kAsanProcesses
                         ? absl::StrCat(":log_path=", run_dir, "/", kAsanLogName)
                         : ""));
  }
  return command;
}

void Sweeper::KeepTraces(const std::string& run_dir, bool keep, RunRecord* record) const {
  const std::string from = TraceDir(run_dir);
  std::error_code error;
  if (keep) {
    std::string name = std::filesystem::path(run_dir).filename().string();  // run-N.d
    if (absl::EndsWith(name, ".d")) name.resize(name.size() - 2);
    const std::filesystem::path to = std::filesystem::path(options_.keep_traces) / name;
    std::filesystem::create_directories(to, error);
    std::vector<std::string> moved;
    for (const auto& entry : std::filesystem::directory_iterator(from, error)) {
      const std::filesystem::path target = to / entry.path().filename();
      std::error_code move_error;
      std::filesystem::rename(entry.path(), target, move_error);
      if (move_error) {
        std::fprintf(stderr, "rpma-sim: --keep-traces: cannot move %s to %s: %s\n",
                     entry.path().c_str(), target.c_str(), move_error.message().c_str());
        continue;
      }
      moved.push_back(target.string());
    }
    std::sort(moved.begin(), moved.end());
    record->traces = std::move(moved);
  }
  std::filesystem::remove_all(from, error);
}

std::string Sweeper::RunDir(size_t run) const {
  const std::string dir = absl::StrCat(scratch_, "/run-", run, ".d");
  std::error_code ignored;
  std::filesystem::create_directory(dir, ignored);
  return dir;
}

RunWatch Sweeper::Watch(size_t first_run, OrphanCheck* orphans) const {
  RunWatch watch;
  watch.before_kill = [this, first_run](size_t index, int group) {
    return HangReport(group, RunDir(first_run + index), options_.gdb_limit);
  };
  if (options_.kill_orphans) {
    watch.orphaned = [this, first_run, orphans](size_t index, int group) {
      return orphans->Check(index, group, RunDir(first_run + index));
    };
  }
  return watch;
}

void Sweeper::Finish(const ChildExit& exit, const std::string& output_path,
                     const std::vector<std::string>& stats_texts, const std::string& run_dir,
                     RunRecord* record) const {
  std::string output = ReadOutput(output_path);
  record->exit = exit;
  for (const std::string& text : stats_texts) {
    absl::StatusOr<uint64_t> kept = StatsKeptObjects(text);
    if (kept.ok()) {
      record->kept_objects += *kept;
    } else {
      std::fprintf(stderr, "rpma-sim: the simulator's stats (%s) of %s: %s\n", kStatsVar,
                   record->spec.empty() ? "the clean run" : record->spec.c_str(),
                   std::string(kept.status().message()).c_str());
    }
  }
  // Every process's sanitizer reports (kAsanProcesses), before the directory goes with the ends.
  std::vector<std::pair<int, std::string>> asan_logs;
  if (checker_ == LeakChecker::kAsanProcesses) asan_logs = ReadAsanLogs(run_dir);
  // The command rpma-sim started is one process of the run; a script's children crash unseen
  // but for their own records.
  std::vector<std::string> errors;
  const std::vector<ProcessEnd> ends = TakeProcessEnds(run_dir, &errors);
  for (const std::string& error : errors) {
    std::fprintf(stderr, "rpma-sim: a process's end record (%s) of %s: %s\n", kRunDirVar,
                 record->spec.empty() ? "the clean run" : record->spec.c_str(), error.c_str());
  }
  std::vector<std::string> leakers;  // the programs LeakSanitizer reported
  for (const auto& [pid, text] : asan_logs) {
    std::string prog = absl::StrCat("pid ", pid);
    for (const ProcessEnd& end : ends) {
      if (end.pid == pid) prog = end.prog;
    }
    if (absl::StrContains(text, kLeakReport)) leakers.push_back(prog);
    absl::StrAppend(&output, output.empty() || output.back() == '\n' ? "" : "\n", text);
  }
  for (const ProcessEnd& end : ends) {
    (end.asan ? record->asan_progs : record->plain_progs).push_back(end.prog);
  }
  record->verdict = Classify(exit, output, checker_, options_.timeout, record->kept_objects);
  if (record->verdict.run_class == RunClass::kLeaked && !leakers.empty()) {
    record->verdict.detail =
        absl::StrCat(absl::StrJoin(leakers, ", "), ": ", record->verdict.detail);
  }
  if (!record->spec.empty() && record->kind == SweepKind::kKill && !exit.timed_out &&
      exit.signal == SIGKILL && record->verdict.run_class == RunClass::kCrashed) {
    // The swept command is the process the kill was for: its death was the fault, not a crash
    // of the program (its peers' handling of it is what the run is for).
    record->verdict = {RunClass::kNonzero, "killed by the injected kill (SIGKILL)"};
  }
  record->verdict = WithProcessEnds(record->verdict, ends, exit.pid, output);
  // (The clean run's output is kept when it failed in any way: a sweep stops then. A nonzero
  // run's is kept too: whether the program reported the fault is read there.)
  const bool clean_run_failed =
      record->spec.empty() && record->verdict.run_class != RunClass::kClean;
  if (!options_.keep_traces.empty()) {
    // A failing run's, and a failed clean run's (it stops the sweep).
    KeepTraces(run_dir, FailsSweep(*record) || clean_run_failed, record);
  }
  if (IsFailure(record->verdict.run_class) || record->verdict.run_class == RunClass::kNonzero ||
      clean_run_failed) {
    record->output_tail =
        output.size() > kOutputTailBytes ? output.substr(output.size() - kOutputTailBytes) : output;
  }
  std::error_code ignored;
  std::filesystem::remove(output_path, ignored);
}

void Sweeper::DrawProgress(size_t done, size_t total, const ClassCounts& counts) const {
  // Not on a terminal (a CI log): a plain line at every tenth of the runs, no bar.
  const size_t step = std::max<size_t>(1, (total + 9) / 10);
  if (!options_.progress && (done == 0 || (done % step != 0 && done != total))) return;
  std::string text = absl::StrCat(done, "/", total);
  if (options_.shard.has_value()) absl::StrAppend(&text, "  shard ", ShardName(*options_.shard));
  for (int i = 0; i < kNumRunClasses; ++i) {
    const RunClass c = static_cast<RunClass>(i);
    if (c == RunClass::kLeaked && !options_.leaks && counts[i] == 0) continue;
    absl::StrAppend(&text, "  ", RunClassName(c), " ", counts[i]);
  }
  if (!options_.progress) {
    std::fprintf(stderr, "rpma-sim sweep: %s\n", text.c_str());
    std::fflush(stderr);
    return;
  }
  size_t filled = total == 0 ? kProgressWidth : done * kProgressWidth / total;
  std::fprintf(stderr, "\r\033[K[%s%s] %s", std::string(filled, '#').c_str(),
               std::string(kProgressWidth - filled, '.').c_str(), text.c_str());
  std::fflush(stderr);
}

void Sweeper::ClearProgress() const {
  if (!options_.progress) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

// The last `count` lines of `text`, each indented by four blanks and ended by a newline.
std::string LastLines(absl::string_view text, size_t count) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  size_t first = lines.size() > count ? lines.size() - count : 0;
  std::string out;
  for (size_t i = first; i < lines.size(); ++i) absl::StrAppend(&out, "    ", lines[i], "\n");
  return out;
}

void Sweeper::PrintFailure(const RunRecord& record) const {
  ClearProgress();
  std::fprintf(out_, "%s (%s): %s\n  replay: %s\n", RunClassName(record.verdict.run_class),
               record.verdict.detail.c_str(),
               record.spec.empty() ? "the clean run" : record.spec.c_str(), record.replay.c_str());
  if (!record.traces.empty()) {
    std::fprintf(out_, "  traces: %s\n", absl::StrJoin(record.traces, " ").c_str());
  }
  if (!record.exit.report.empty()) {  // a hung or orphaned run: where its processes were
    std::fprintf(out_, "  %s\n%s",
                 record.verdict.run_class == RunClass::kOrphaned ? "stopped, orphaned:"
                                                                 : "where it hangs:",
                 LastLines(record.exit.report, 400).c_str());
  }
  std::fflush(out_);
}

bool Sweeper::FailsSweep(const RunRecord& record) const {
  // Every failure class (IsFailure) but a leak, which only with --leaks.
  const RunClass c = record.verdict.run_class;
  return IsFailure(c) && (c != RunClass::kLeaked || options_.leaks);
}

ReportRun Sweeper::ToReportRun(const RunRecord& r) const {
  ReportRun out;
  out.point = r.point;
  out.prog = r.prog;
  out.nth = r.nth;
  out.spec = r.spec;
  if (!r.spec.empty()) {
    out.kind = SweepKindName(r.kind);
    out.action = r.action;
  }
  out.seed = r.seed;
  if (r.exit.exit_code >= 0) out.exit_code = r.exit.exit_code;
  if (r.exit.signal != 0) out.signal = SignalName(r.exit.signal);
  out.class_name = RunClassName(r.verdict.run_class);
  out.detail = r.verdict.detail;
  out.kept_objects = r.kept_objects;
  out.duration_ms = absl::ToDoubleMilliseconds(r.exit.duration);
  out.replay = r.replay;
  out.output_tail = r.output_tail;
  out.traces = r.traces;
  out.hang_report = LastLines(r.exit.report, 400);  // as PrintFailure prints it
  out.fails_sweep = FailsSweep(r);
  return out;
}

std::string Sweeper::PlanMismatch(const SweepReport& plan) const {
  if (plan.program != options_.program) {
    return absl::StrCat("it is the report of another program (", ShellJoin(plan.program), ")");
  }
  if (plan.device != DeviceName()) {
    return absl::StrCat("it was swept on device ", plan.device, ", this sweep is on ",
                        DeviceName());
  }
  std::vector<std::string> kinds;
  for (SweepKind kind : options_.kinds) kinds.push_back(SweepKindName(kind));
  if (plan.kinds != kinds) {
    return absl::StrCat("it was swept with --kinds=", absl::StrJoin(plan.kinds, ","),
                        ", this sweep has --kinds=", absl::StrJoin(kinds, ","));
  }
  if (plan.clean_run.fails_sweep) return "its clean run failed: it has no plan";
  if (plan.points.empty() && plan.not_swept.empty()) return "its clean run hit no fault point";
  return "";
}

SweepReport Sweeper::MakeReport(const RunRecord& clean, const std::vector<PointHits>& swept,
                                const std::vector<PointHits>& not_swept,
                                const std::vector<RunRecord>& runs, uint64_t plan_runs,
                                bool interrupted) const {
  SweepReport report;
  report.program = options_.program;
  report.device = DeviceName();
  report.seed = options_.seed;
  report.seeds = options_.seeds;
  report.jobs = options_.jobs;
  report.timeout_s = absl::ToDoubleSeconds(options_.timeout);
  report.max_runs = options_.max_runs;
  for (SweepKind kind : options_.kinds) report.kinds.push_back(SweepKindName(kind));
  report.leak_checker = LeakCheckerName(checker_);
  report.interrupted = interrupted;
  report.shard = options_.shard;
  report.plan_runs = plan_runs;
  report.clean_run = ToReportRun(clean);
  // Any failure of the clean run stops the sweep, a leak only with --leaks.
  report.clean_run.fails_sweep =
      clean.verdict.run_class != RunClass::kClean &&
      (clean.verdict.run_class != RunClass::kLeaked || options_.leaks);
  report.points = swept;
  report.not_swept = not_swept;
  for (const RunRecord& r : runs) report.runs.push_back(ToReportRun(r));
  return report;
}

bool Sweeper::WriteOutputs(const SweepReport& report) const {
  bool ok = true;
  auto write = [&](const std::string& path, const std::string& text, const char* what) {
    std::ofstream file(path, std::ios::trunc);
    file << text;
    file.close();
    if (!file) {
      std::fprintf(stderr, "rpma-sim: cannot write the %s %s\n", what, path.c_str());
      ok = false;
      return;
    }
    std::fprintf(out_, "%s: %s\n", what, path.c_str());
  };
  if (!options_.report_path.empty()) {
    write(options_.report_path, ReportJson(report) + "\n", "report");
  }
  if (!options_.junit_path.empty()) {
    write(options_.junit_path,
          JunitXml(absl::StrCat("rpma-sim sweep ", ShellJoin(options_.program)),
                   {ReportJunit(report)}),
          "junit");
  }
  return ok;
}

int Sweeper::Run() {
  const char* path_env = std::getenv("PATH");
  std::string path_value = path_env != nullptr ? path_env : "/usr/bin:/bin";
  absl::StatusOr<std::string> program_path = FindProgram(options_.program[0], path_value);
  if (!program_path.ok()) {
    std::fprintf(stderr, "rpma-sim: cannot run %s: %s\n", options_.program[0].c_str(),
                 std::string(program_path.status().message()).c_str());
    return kSweepUsage;
  }
  if (options_.leaks) {
    absl::StatusOr<std::string> valgrind = FindProgram("valgrind", path_value);
    absl::StatusOr<LeakChecker> checker =
        DetectLeakChecker(*program_path, valgrind.ok() ? *valgrind : "");
    if (!checker.ok()) {
      std::fprintf(stderr, "rpma-sim: %s\n", std::string(checker.status().message()).c_str());
      return kSweepUsage;
    }
    checker_ = *checker;
  }
  ScratchDir scratch;
  if (scratch.path().empty()) {
    std::fprintf(stderr, "rpma-sim: cannot create a scratch directory under $TMPDIR or /tmp\n");
    return kSweepFailed;
  }
  scratch_ = scratch.path();
  WriteTracerPid(scratch_);  // gdb may then attach to the runs' simulators (hang_report.h)
  // A run that would wait out its timeout for a peer that is gone is stopped when it has
  // looked so for this long (a peer's last messages may still be on their way).
  OrphanCheck orphans(std::min(absl::Seconds(1), options_.timeout / 4));

  std::fprintf(out_, "rpma-sim sweep: %s\n", ShellJoin(options_.program).c_str());
  std::string seed_text = options_.seed.has_value() ? absl::StrCat("seed ", *options_.seed)
                                                    : "seed (the simulator's default)";
  if (options_.seeds > 1) {
    const uint64_t base = options_.seed.value_or(kSimulatorDefaultSeed);
    seed_text = absl::StrCat("seeds ", base, " to ", base + options_.seeds - 1,
                             " (each fault run under each; the clean run under the first)");
  }
  std::fprintf(out_, "device %s, %s, %d at a time, timeout %s per run, leak check: %s%s\n",
               DeviceName().c_str(), seed_text.c_str(),
               options_.jobs, absl::FormatDuration(options_.timeout).c_str(),
               checker_ == LeakChecker::kAsan ? "LeakSanitizer (the program has ASan)"
               : checker_ == LeakChecker::kAsanProcesses
                   ? "LeakSanitizer in each process built with ASan (the program is a script)"
               : checker_ == LeakChecker::kValgrind ? "valgrind --leak-check=full"
                                                    : "off (--leaks turns it on)",
               options_.shard.has_value()
                   ? absl::StrCat(", shard ", ShardName(*options_.shard)).c_str()
                   : "");
  if (options_.plan.has_value()) {  // refused before anything runs
    if (const std::string why = PlanMismatch(*options_.plan); !why.empty()) {
      std::fprintf(stderr, "rpma-sim: --plan-from=%s: %s\n", options_.plan_from.c_str(),
                   why.c_str());
      return kSweepUsage;
    }
    std::fprintf(out_, "the plan: the clean run of %s\n", options_.plan_from.c_str());
  }

  // 1. The clean run, which counts the hits of every point.
  RunRecord clean;
  // One stats file per process of the run (%p: the simulator puts the pid there).
  const std::string stats_path = scratch.path() + "/stats.%p.txt";
  const std::string clean_output = scratch.path() + "/clean.log";
  const std::string clean_run_dir = RunDir(0);
  std::vector<ChildCommand> clean_command = {
      Command(std::nullopt, stats_path, clean_output, clean_run_dir, 0, &clean.replay)};
  absl::StatusOr<std::vector<ChildExit>> clean_exit =
      RunChildren(clean_command, 1, options_.timeout, nullptr, Watch(0, &orphans));
  if (!clean_exit.ok()) {
    std::fprintf(stderr, "rpma-sim: %s\n", std::string(clean_exit.status().message()).c_str());
    return absl::IsCancelled(clean_exit.status()) ? kSweepInterrupted : kSweepFailed;
  }
  std::vector<std::string> stats_texts = TakeStatsFiles(scratch.path(), "stats.");
  Finish((*clean_exit)[0], clean_output, stats_texts, clean_run_dir, &clean);
  std::fprintf(out_, "clean run: %s (%s) in %s\n", RunClassName(clean.verdict.run_class),
               clean.verdict.detail.c_str(), Seconds(clean.exit.duration).c_str());
  if (checker_ == LeakChecker::kAsanProcesses) {
    const std::string plain = absl::StrJoin(clean.plain_progs, ", ");
    if (clean.asan_progs.empty()) {
      std::fprintf(stderr,
                   "rpma-sim: --leaks: %s is a script, and no process of its clean run that used "
                   "the simulated NIC (%s) is built with AddressSanitizer: build its programs "
                   "with -fsanitize=address (bazel: --config=asan), or sweep one program binary "
                   "(valgrind checks a plain build)\n",
                   options_.program[0].c_str(), plain.empty() ? "none" : plain.c_str());
      return kSweepUsage;
    }
    std::fprintf(out_, "leak check: LeakSanitizer in %s%s%s\n",
                 absl::StrJoin(clean.asan_progs, ", ").c_str(),
                 plain.empty() ? "" : "; not checked (no ASan): ", plain.c_str());
  }
  if (clean.verdict.run_class == RunClass::kCrashed || clean.verdict.run_class == RunClass::kHung ||
      clean.verdict.run_class == RunClass::kOrphaned ||  // (its survivor's hit counts are lost)
      clean.verdict.run_class == RunClass::kRacy || (options_.leaks && clean.verdict.run_class == RunClass::kLeaked)) {
    PrintFailure(clean);
    std::fprintf(out_, "the program fails without any fault: no sweep\n");
    WriteOutputs(MakeReport(clean, {}, {}, {}, 0, false));
    return kSweepFailed;
  }
  if (clean.verdict.run_class == RunClass::kNonzero) {
    // Every fault run would fail as well, and "nonzero" would then say nothing about whether the
    // program reported the fault: a sweep of it would pass whatever its error paths do.
    std::fprintf(out_,
                 "sweep FAILED: the clean run failed (%s) without any fault: fix that first; "
                 "no sweep\n  replay: %s\n",
                 clean.verdict.detail.c_str(), clean.replay.c_str());
    if (!clean.output_tail.empty()) {
      std::fprintf(out_, "  its output ends with:\n%s", LastLines(clean.output_tail, 10).c_str());
    }
    WriteOutputs(MakeReport(clean, {}, {}, {}, 0, false));
    return kSweepFailed;
  }
  if (clean.verdict.run_class == RunClass::kLeaked) {
    std::fprintf(out_, "(the program leaks even without a fault; the sweep goes on)\n");
  }
  std::string stats_text = absl::StrJoin(stats_texts, "");
  if (stats_texts.size() > 1) {
    std::fprintf(out_, "the clean run's %zu processes hit fault points\n", stats_texts.size());
  }
  absl::StatusOr<std::vector<PointHits>> stats = MergeProcessStats(stats_texts);
  if (!stats.ok()) {
    std::fprintf(stderr, "rpma-sim: the simulator's hit counts (%s): %s\n", kStatsVar,
                 std::string(stats.status().message()).c_str());
    return kSweepFailed;
  }
  if (options_.plan.has_value()) {
    std::vector<PointHits> planned = options_.plan->points;
    planned.insert(planned.end(), options_.plan->not_swept.begin(),
                   options_.plan->not_swept.end());
    if (const size_t differ = CountsThatDiffer(*stats, planned); differ > 0) {
      std::fprintf(out_,
                   "this clean run's hit counts differ from the plan's at %zu points; the plan "
                   "(--plan-from=%s) decides the runs\n",
                   differ, options_.plan_from.c_str());
    }
    *stats = std::move(planned);
  }
  std::vector<PointHits> swept;
  std::vector<PointHits> not_swept;
  uint64_t hit_total = 0;
  size_t without_kinds = 0;  // points that can fail, but no kind of --kinds applies to
  for (const PointHits& p : *stats) {
    if (p.hits == 0) continue;
    if (!options_.points.empty() && std::find(options_.points.begin(), options_.points.end(),
                                              p.point) == options_.points.end()) {
      continue;
    }
    hit_total += p.hits;
    if (!CanFail(p.point, SweepErrno(p.point))) {
      not_swept.push_back(p);
    } else if (!EffectsAt(p.point, !p.prog.empty(), options_.kinds, DeviceName()).empty()) {
      swept.push_back(p);
    } else {
      ++without_kinds;
    }
  }
  if (without_kinds > 0) {
    const std::string kinds = absl::StrJoin(
        options_.kinds, ",", [](std::string* o, SweepKind k) { o->append(SweepKindName(k)); });
    std::fprintf(out_, "--kinds=%s: %zu of the points hit have no fault of those kinds\n",
                 kinds.c_str(), without_kinds);
    if (swept.empty()) {
      // Not a passing sweep of no runs: the kinds asked for find nothing to inject here.
      const std::string why =
          absl::StrCat("no point the clean run hit has a fault of --kinds=", kinds, ": no sweep");
      std::fprintf(out_, "%s\n", why.c_str());
      WriteOutputs(FailedBeforeTheRuns(clean, why));
      return kSweepFailed;
    }
  }
  if (!options_.points.empty()) {
    for (const std::string& point : options_.points) {
      bool hit = std::any_of(stats->begin(), stats->end(), [&point](const PointHits& p) {
        return p.point == point && p.hits > 0;
      });
      if (!hit) std::fprintf(out_, "--points: %s was not hit by the clean run\n", point.c_str());
    }
    if (swept.empty()) {
      std::fprintf(out_, "none of the --points can be failed: no sweep\n");
      WriteOutputs(FailedBeforeTheRuns(clean, "none of the --points can be failed: no sweep"));
      return kSweepFailed;
    }
  } else if (swept.empty() && not_swept.empty()) {
    std::fprintf(stderr,
                 "rpma-sim: the clean run hit no fault point (%s): does %s use softrpma's "
                 "librpma on the simulated NIC?\n",
                 stats_text.empty() ? "the simulator wrote no hit counts" : "all counts are 0",
                 options_.program[0].c_str());
    WriteOutputs(FailedBeforeTheRuns(clean, "the clean run hit no fault point: no sweep"));
    return kSweepFailed;
  }

  // 2. One run per hit to fail (bounded by --max-runs), then this shard's part of them.
  // With --seeds, each of them once per seed.
  std::vector<PlannedRun> plan =
      WithSeeds(PlanSweep(swept, options_.kinds, DeviceName(), options_.max_runs),
                options_.seed.value_or(kSimulatorDefaultSeed), options_.seeds);
  const uint64_t plan_runs = plan.size();
  uint64_t possible = 0;
  for (const PointHits& p : swept) {
    possible += p.hits * EffectsAt(p.point, !p.prog.empty(), options_.kinds, DeviceName()).size() *
                options_.seeds;
  }
  std::fprintf(out_, "%zu points hit (%llu hits); %zu runs",
               swept.size() + not_swept.size() + without_kinds,
               static_cast<unsigned long long>(hit_total), plan.size());
  if (plan.size() < possible) {
    std::fprintf(out_,
                 " of %llu possible (--max-runs=%llu, shared fairly between the points and kinds)",
                 static_cast<unsigned long long>(possible),
                 static_cast<unsigned long long>(options_.max_runs));
  }
  if (options_.plan_only) {
    std::fprintf(out_, "\nplan only: no fault run; give the report to the sweeps that run it "
                       "(--plan-from=REPORT, with --shard=K/N)\n");
    const bool ok = WriteOutputs(MakeReport(clean, swept, not_swept, {}, plan_runs, false));
    return ok ? kSweepPassed : kSweepFailed;
  }
  if (options_.shard.has_value()) {
    plan = TakeShard(plan, *options_.shard);
    std::fprintf(out_, "; shard %s runs %zu of them", ShardName(*options_.shard).c_str(),
                 plan.size());
  }
  std::fprintf(out_, "\n");
  std::fflush(out_);

  std::vector<RunRecord> runs(plan.size());
  std::vector<ChildCommand> commands;
  std::vector<std::string> outputs;
  std::vector<std::string> run_dirs;
  for (size_t i = 0; i < plan.size(); ++i) {
    runs[i].point = plan[i].point;
    runs[i].prog = plan[i].prog;
    runs[i].nth = plan[i].nth;
    runs[i].spec = plan[i].spec;
    runs[i].kind = plan[i].kind;
    runs[i].action = plan[i].action;
    runs[i].seed = plan[i].seed;
    outputs.push_back(absl::StrCat(scratch.path(), "/run-", i, ".log"));
    // Its stats files say what the NIC kept (the hit counts were the clean run's business).
    const std::string stats = absl::StrCat(scratch.path(), "/run-", i, ".stats.%p.txt");
    run_dirs.push_back(RunDir(i + 1));
    commands.push_back(
        Command(plan[i].spec, stats, outputs.back(), run_dirs.back(), i + 1, &runs[i].replay,
                plan[i].seed));
  }
  ClassCounts counts{};
  size_t done = 0;
  std::vector<bool> finished(plan.size(), false);
  DrawProgress(0, plan.size(), counts);
  absl::StatusOr<std::vector<ChildExit>> exits = RunChildren(
      commands, options_.jobs, options_.timeout, [&](size_t index, const ChildExit& exit) {
        Finish(exit, outputs[index],
               TakeStatsFiles(scratch.path(), absl::StrCat("run-", index, ".stats.")),
               run_dirs[index], &runs[index]);
        finished[index] = true;
        ++counts[static_cast<int>(runs[index].verdict.run_class)];
        ++done;
        if (IsFailure(runs[index].verdict.run_class) ||
            runs[index].verdict.run_class == RunClass::kOrphaned) {
          PrintFailure(runs[index]);
        }
        DrawProgress(done, plan.size(), counts);
      },
      Watch(1, &orphans));
  ClearProgress();
  bool interrupted = !exits.ok() && absl::IsCancelled(exits.status());
  if (!exits.ok() && !interrupted) {
    std::fprintf(stderr, "rpma-sim: %s\n", std::string(exits.status().message()).c_str());
    return kSweepFailed;
  }
  if (interrupted) {
    std::vector<RunRecord> finished_runs;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (finished[i]) finished_runs.push_back(std::move(runs[i]));
    }
    runs = std::move(finished_runs);
  }

  // 3. The table, the verdict and the report.
  const SweepReport report = MakeReport(clean, swept, not_swept, runs, plan_runs, interrupted);
  std::fputs(FormatTable(report).c_str(), out_);
  // A leak fails the sweep only when asked for (--leaks); a program built with ASan reports
  // leaks by itself, and those show in the table and get a replay line either way.
  const uint64_t failures = std::count_if(runs.begin(), runs.end(),
                                          [this](const RunRecord& r) { return FailsSweep(r); });
  bool report_ok = WriteOutputs(report);
  if (interrupted) {
    std::fprintf(out_, "sweep INTERRUPTED after %zu of %zu runs\n", done, plan.size());
    return kSweepInterrupted;
  }
  if (failures > 0) {
    std::fprintf(out_, "sweep FAILED: %llu of %zu runs %s (replay lines above)\n",
                 static_cast<unsigned long long>(failures), runs.size(),
                 options_.leaks ? "crashed, hung, racy or leaked" : "crashed, hung or racy");
    return kSweepFailed;
  }
  uint64_t leaked = counts[static_cast<int>(RunClass::kLeaked)];
  std::string verdict = "none crashed or hung (leaks not checked: --leaks)";
  if (options_.leaks) {
    verdict = "none crashed, hung or leaked";
  } else if (leaked > 0) {
    verdict = absl::StrCat("none crashed or hung (", leaked,
                           " leaked, as the program's own LeakSanitizer reported; --leaks makes "
                           "that a failure)");
  }
  if (uint64_t kept = counts[static_cast<int>(RunClass::kKept)]; kept > 0) {
    absl::StrAppend(&verdict, "; in ", kept, " the NIC kept what a failed destroy call left, "
                    "as a real provider does");
  }
  std::fprintf(out_, "sweep passed: %zu runs%s, %s\n", runs.size(),
               options_.shard.has_value()
                   ? absl::StrCat(" (shard ", ShardName(*options_.shard), " of ", plan_runs, ")")
                         .c_str()
                   : "",
               verdict.c_str());
  return report_ok ? kSweepPassed : kSweepFailed;
}

}  // namespace

absl::Status PrepareKeepTracesDir(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", dir, "\" is not a directory",
                                                   error ? absl::StrCat(" (", error.message(), ")")
                                                         : ""));
  }
  if (!std::filesystem::is_empty(dir, error) || error) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", dir, "\" is not empty: give each sweep a directory of its own"));
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("\"", dir, "\" is not writable"));
  }
  return absl::OkStatus();
}

int RunSweep(const SweepOptions& options, std::FILE* out) {
  Sweeper sweeper(options, out);
  return sweeper.Run();
}

}  // namespace softrpma::rpma_sim
