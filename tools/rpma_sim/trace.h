// trace.h: reading the simulator's trace (RPMA_SIM_TRACE, format: docs/TRACE.md) and showing it
// as readable lines. The Chrome Trace Event view of a parsed trace is chrome_trace.h's.
//
// Thread-safety: every function is thread-safe (none keeps state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_TRACE_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace softrpma::rpma_sim {

// The trace format versions this reader knows: 1, and 2 (a `process <name>` header line and
// the librpma API calls' events).
inline constexpr int kTraceVersion = 2;
inline constexpr int kOldestTraceVersion = 1;

// One event line: `<seq> <time_ns> <type> <key>=<value> ...`.
struct TraceEvent {
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  std::string type;
  std::vector<std::pair<std::string, std::string>> fields;  // in line order
  int line = 0;                                             // 1-based line number in the file

  // The value of `key`, or nullopt.
  std::optional<std::string> Get(absl::string_view key) const;
  // The value of `key`, or "?" when absent (for messages that must never fail).
  std::string Field(absl::string_view key) const;
  // The value of `key` as a number (decimal, or 0x-hex), or nullopt when absent or not a number.
  std::optional<uint64_t> GetNumber(absl::string_view key) const;
};

// A whole trace file.
struct Trace {
  int version = 0;
  std::string seed;    // "0x736f667472706d61"
  std::string faults;  // the plan at start, "-" for none
  std::string process;  // the process's name (RPMA_SIM_ROLE, else the executable's); "" in v1
  std::vector<TraceEvent> events;
  bool has_end = false;               // the end line was there (the run exited normally)
  uint64_t end_events = 0;            // its events=
  std::string end_fingerprint;        // its fingerprint= ("0x" + 16 hex digits)
  std::string fingerprint;            // recomputed from the event lines, same form
  std::vector<std::string> warnings;  // things a reader should know (a cut last line...)
};

// The largest trace file rpma-sim reads: 256 MiB, about 2.5 million events (a line is about
// 100 bytes; parsed, a trace takes several times its size in memory).
inline constexpr uint64_t kMaxTraceBytes = uint64_t{256} << 20;

// The contents of the trace file at `path`, at most `max_bytes` of it (ReadFileUpTo,
// simverbs/sim/read_file.h). Reads regular files, pipes and character devices alike (a FIFO or
// /dev/stdin), never more than max_bytes + 1.
// Errors: InvalidArgument when `path` is a directory or the file is larger than max_bytes;
// NotFound / PermissionDenied / Unknown when it cannot be opened or read; each message
// "<path>: cannot read trace file: <reason>".
absl::StatusOr<std::string> ReadTraceFile(const std::string& path,
                                          uint64_t max_bytes = kMaxTraceBytes);

// Parses a trace. Lenient where the format allows it (unknown event types and fields are kept;
// a last line without '\n' is dropped with a warning), strict elsewhere.
// Errors: InvalidArgument "line N: ..." for a missing or unknown header, a version other than
// kTraceVersion, an event line that is not `<seq> <time_ns> <type> [key=value...]`, a line after
// the end line.
absl::StatusOr<Trace> ParseTrace(absl::string_view text);

// The trace as readable text: a header (seed, plan, whether it ended and its fingerprint
// checks), one line per event with its simulated time in microseconds and what it means, then a
// summary (work requests, completions with an error, faults).
std::string FormatTrace(const Trace& trace);

// THE RUN'S FINGERPRINT: "0x" + 16 hex digits over the events of one or several traces (the
// processes of one run), so that two runs can be compared wherever they ran. What differs
// between two runs of the same program that made the same choices is normalized away:
//   * the files' names and order, and so the processes' pids: each trace is hashed by itself
//     (its `process` name, then each event's time, type and fields), and the run's hash is
//     over those hashes sorted;
//   * ports (`port=`) and the program's pointers (`wr_id=`, `op_context=`), which follow the
//     command line and the address-space layout: each trace's values become #1, #2, ... in
//     the order they first appear in it;
//   * the sequence numbers and the end line (the events are hashed, not their count).
// Every other byte of an event counts: simulated times, QP and CQ numbers, statuses, lengths.
std::string RunFingerprint(const std::vector<Trace>& traces);

// "RDMA_WRITE" for IBV_WR_RDMA_WRITE and IBV_WC_RDMA_WRITE: the short name of an opcode.
std::string ShortOpcode(absl::string_view opcode);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_TRACE_H_
