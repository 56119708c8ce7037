// `rpma-sim report merge`: the JSON reports of the shards of one sweep, joined into one table,
// one report and one JUnit XML.

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "simverbs/sim/read_file.h"
#include "tools/rpma_sim/command_line.h"
#include "tools/rpma_sim/commands/command.h"
#include "tools/rpma_sim/commands/common.h"
#include "tools/rpma_sim/junit.h"
#include "tools/rpma_sim/report.h"

namespace softrpma::rpma_sim {
namespace {

int RunReport(const CommandLine& line, const char* argv0) {
  if (line.args[0] != "merge") {
    return Usage(absl::StrCat("unknown report command \"", line.args[0],
                              "\"; rpma-sim report merge SHARD.json..."));
  }
  std::vector<std::string> names(line.args.begin() + 1, line.args.end());
  std::vector<SweepReport> reports;
  for (const std::string& name : names) {
    absl::StatusOr<std::string> text =
        softrpma::sim::ReadFileUpTo(name, kMaxReportBytes, "sweep report");
    if (!text.ok()) {
      std::fprintf(stderr, "rpma-sim: %s\n", std::string(text.status().message()).c_str());
      return kExitUsage;
    }
    absl::StatusOr<SweepReport> report = ParseReport(*text);
    if (!report.ok()) {
      std::fprintf(stderr, "rpma-sim: %s is not a sweep report: %s\n", name.c_str(),
                   std::string(report.status().message()).c_str());
      return kExitUsage;
    }
    reports.push_back(*std::move(report));
  }
  std::vector<std::string> warnings;
  absl::StatusOr<SweepReport> merged = MergeReports(reports, names, &warnings);
  if (!merged.ok()) {
    std::fprintf(stderr, "rpma-sim: %s\n", std::string(merged.status().message()).c_str());
    return kExitUsage;
  }
  for (const std::string& warning : warnings) {
    std::fprintf(stderr, "rpma-sim: warning: %s\n", warning.c_str());
  }
  std::printf("rpma-sim report merge: %s\n", ShellJoin(merged->program).c_str());
  if (merged->merged_shards == 0) {
    std::printf("device %s, the report of a whole sweep (no shards), %zu runs\n",
                merged->device.c_str(), merged->runs.size());
  } else {
    std::printf(
        "device %s, %llu shard reports of %llu, %zu runs of the plan's %llu\n",
        merged->device.c_str(), static_cast<unsigned long long>(merged->merged_shards),
        static_cast<unsigned long long>(merged->merged_shards + merged->missing_shards.size()),
        merged->runs.size(), static_cast<unsigned long long>(merged->plan_runs));
  }
  std::fputs(FormatTable(*merged).c_str(), stdout);
  const std::string report_path = absl::GetFlag(FLAGS_report);
  const std::string junit_path = absl::GetFlag(FLAGS_junit);
  bool written = true;
  if (!report_path.empty()) {
    written = WriteTextFile(report_path, ReportJson(*merged) + "\n", "report") && written;
    if (written) std::printf("report: %s\n", report_path.c_str());
  }
  if (!junit_path.empty()) {
    written = WriteTextFile(junit_path,
                            JunitXml(absl::StrCat("rpma-sim sweep ", ShellJoin(merged->program)),
                                     {ReportJunit(*merged)}),
                            "junit file") &&
              written;
    if (written) std::printf("junit: %s\n", junit_path.c_str());
  }
  size_t failed = 0;
  for (const ReportRun& r : merged->runs) failed += r.fails_sweep ? 1 : 0;
  if (!merged->missing_shards.empty()) {
    std::printf(
        "merge INCOMPLETE: no report of shard%s %s of %llu\n",
        merged->missing_shards.size() > 1 ? "s" : "",
        absl::StrJoin(merged->missing_shards, ", ").c_str(),
        static_cast<unsigned long long>(merged->merged_shards + merged->missing_shards.size()));
  }
  if (merged->clean_run.fails_sweep) {
    std::printf("sweep FAILED: a clean run failed (%s) without any fault\n  replay: %s\n",
                merged->clean_run.detail.c_str(), merged->clean_run.replay.c_str());
  } else if (failed > 0) {
    std::printf("sweep FAILED: %zu of %zu runs failed the sweep:\n", failed, merged->runs.size());
    for (const ReportRun& r : merged->runs) {
      if (!r.fails_sweep) continue;
      std::printf("%s (%s): %s\n  replay: %s\n", r.class_name.c_str(), r.detail.c_str(),
                  r.spec.c_str(), r.replay.c_str());
    }
  } else if (merged->interrupted) {
    std::printf("sweep INTERRUPTED: a shard was interrupted\n");
  } else if (merged->missing_shards.empty()) {
    std::printf("sweep passed: %zu runs, none failed the sweep\n", merged->runs.size());
  }
  if (!written) return 1;
  return ReportFailed(*merged) ? 1 : 0;
}

}  // namespace

const Command& ReportCommand() {
  static const Command command{
      {"report", {"report", "junit"}, false, 2, 100000},
      "rpma-sim report merge [--report=OUT.json] [--junit=OUT.xml] SHARD.json...",
      "Joins the JSON reports (sweep --report) of the shards of one sweep (sweep\n"
      "--shard=K/N, K = 1..N) into one table per point, as the whole sweep prints it, and\n"
      "with --report one JSON report and with --junit one JUnit XML of every run. Reports of\n"
      "different sweeps (program, device, seed, --max-runs, leak checker) or overlapping\n"
      "shards (the same shard twice, a whole sweep's report among shards) are an error\n"
      "(exit 2). A missing shard is said, and fails the merge (exit 1), as does any run that\n"
      "crashed or hung (or leaked, with --leaks).",
      "  rpma-sim report merge s1.json s2.json s3.json\n"
      "  rpma-sim report merge --report=sweep.json --junit=sweep.xml shard-*.json\n",
      &RunReport,
  };
  return command;
}

}  // namespace softrpma::rpma_sim
