// `rpma-sim trace`: a trace as readable lines, or one or several traces as Chrome Trace Event
// JSON.

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tools/rpma_sim/chrome_trace.h"
#include "tools/rpma_sim/command_line.h"
#include "tools/rpma_sim/commands/command.h"
#include "tools/rpma_sim/commands/common.h"
#include "tools/rpma_sim/trace.h"

ABSL_FLAG(std::string, chrome, "",
          "write Chrome Trace Event JSON to this file ('-': stdout) instead of printing the "
          "trace; open it in https://ui.perfetto.dev or chrome://tracing");

ABSL_FLAG(bool, fingerprint, false,
          "print the run's fingerprint over every FILE (the processes of one run), normalized "
          "so that two runs compare wherever they ran: `fingerprint 0x<16 hex digits>`, last");

namespace softrpma::rpma_sim {
namespace {

int RunTrace(const CommandLine& line, const char* argv0) {
  std::string chrome = absl::GetFlag(FLAGS_chrome);
  const bool fingerprint = absl::GetFlag(FLAGS_fingerprint);
  if (fingerprint && !chrome.empty()) {
    return Usage("--fingerprint and --chrome are two views: give one");
  }
  if (line.args.size() > 1 && chrome.empty() && !fingerprint) {
    return Usage(
        "several trace files are merged into one Chrome timeline or one fingerprint: give "
        "--chrome=OUT.json or --fingerprint");
  }
  std::vector<Trace> traces;
  for (const std::string& path : line.args) {
    absl::StatusOr<std::string> text = ReadTraceFile(path);
    if (!text.ok()) {
      std::fprintf(stderr, "rpma-sim: %s\n", std::string(text.status().message()).c_str());
      return 1;
    }
    absl::StatusOr<Trace> trace = ParseTrace(*text);
    if (!trace.ok()) {
      std::fprintf(stderr, "rpma-sim: %s: %s\n", path.c_str(),
                   std::string(trace.status().message()).c_str());
      return 1;
    }
    for (const std::string& warning : trace->warnings) {
      std::fprintf(stderr, "rpma-sim: %s: warning: %s\n", path.c_str(), warning.c_str());
    }
    traces.push_back(*std::move(trace));
  }
  if (fingerprint) {
    const std::vector<std::string> names = TraceProcessNames(traces, line.args);
    for (size_t i = 0; i < traces.size(); ++i) {
      std::printf("%s: process %s, %zu events%s\n", line.args[i].c_str(), names[i].c_str(),
                  traces[i].events.size(), traces[i].has_end ? "" : " (no end line: cut short)");
    }
    std::printf("fingerprint %s\n", RunFingerprint(traces).c_str());
    return 0;
  }
  if (chrome.empty()) {
    std::fputs(FormatTrace(traces[0]).c_str(), stdout);
    return 0;
  }
  std::string json;
  size_t events = 0;
  for (const Trace& trace : traces) events += trace.events.size();
  if (traces.size() == 1) {
    json = ChromeTraceJson(traces[0]);
  } else {
    const std::vector<std::string> names = TraceProcessNames(traces, line.args);
    std::vector<NamedTrace> named;
    for (size_t i = 0; i < traces.size(); ++i) named.push_back(NamedTrace{names[i], &traces[i]});
    json = ChromeTraceJson(named);
  }
  if (chrome == "-") {
    std::fputs(json.c_str(), stdout);
    std::fputs("\n", stdout);
    return 0;
  }
  std::ofstream out(chrome, std::ios::trunc);
  out << json << "\n";
  out.close();
  if (!out) {
    std::fprintf(stderr, "rpma-sim: cannot write %s\n", chrome.c_str());
    return 1;
  }
  std::printf("wrote %s (%zu events%s): open it in https://ui.perfetto.dev or chrome://tracing\n",
              chrome.c_str(), events,
              traces.size() > 1 ? absl::StrCat(", ", traces.size(), " processes").c_str() : "");
  return 0;
}

}  // namespace

const Command& TraceCommand() {
  static const Command command{
      {"trace", {"chrome", "fingerprint"}, false, 1, 64},
      "rpma-sim trace FILE [--chrome=OUT.json]  |  rpma-sim trace FILE... --chrome=OUT.json\n"
      "       rpma-sim trace --fingerprint FILE...",
      "Reads a trace that `rpma-sim run --trace=FILE` (RPMA_SIM_TRACE) wrote. Without\n"
      "--chrome: one readable line per event (simulated time, what happened), then a summary\n"
      "and whether the end line's fingerprint matches the events. With --chrome: Chrome Trace\n"
      "Event JSON for https://ui.perfetto.dev or chrome://tracing: one track per QP and per\n"
      "CQ, a slice per work request from its post to its completion, instant events for\n"
      "connection-manager events and injected faults. Several FILEs (the processes of one\n"
      "run, RPMA_SIM_TRACE=run.%p.trace) merge into one timeline with a process each, each\n"
      "on its own simulated clock (--chrome or --fingerprint is then required). With\n"
      "--fingerprint: one line per FILE, then `fingerprint 0x<16 hex digits>` over them all,\n"
      "with what follows the command line and the machine normalized (file names, pids,\n"
      "ports, the program's pointers): two runs that did the same have the same one.",
      "  rpma-sim trace run.trace\n"
      "  rpma-sim trace run.trace --chrome=run.json\n"
      "  rpma-sim trace run.*.trace --chrome=run.json\n"
      "  rpma-sim trace --fingerprint run.*.trace\n",
      &RunTrace,
  };
  return command;
}

}  // namespace softrpma::rpma_sim
