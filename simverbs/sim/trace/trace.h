// trace.h: the simulator's event trace (RPMA_SIM_TRACE) and the names it prints for verbs and
// rdma_cm enums. The format is specified in docs/TRACE.md; a tool (rpma-sim) parses it.
//
// Every event site is written
//   if (TraceOn()) TraceEvent("post_send qp=%u wr_id=0x%llx ...", ...);
// so that with tracing off an event costs one relaxed load and one predictable branch. With
// tracing on, each event is one line "<seq> <time_ns> <text>\n" written under one mutex (the
// innermost lock of the simulator: TraceEvent takes no other lock and allocates nothing through
// simverbs/alloc.h), so lines never mix and seq follows file order. The file is line-buffered;
// at exit (or FinishTrace) an end line with the event count and a fingerprint (64-bit FNV-1a
// of the event lines) closes it.
//
// Thread-safety: every function is thread-safe.

#ifndef SOFTRPMA_SIMVERBS_SIM_TRACE_TRACE_H_
#define SOFTRPMA_SIMVERBS_SIM_TRACE_TRACE_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace softrpma::sim {

inline constexpr char kTraceEnvVar[] = "RPMA_SIM_TRACE";
inline constexpr int kTraceFormatVersion = 2;

namespace trace_internal {
extern std::atomic<bool> g_trace_on;
}  // namespace trace_internal

// True while a trace is being written.
inline bool TraceOn() {
  return ABSL_PREDICT_FALSE(trace_internal::g_trace_on.load(std::memory_order_relaxed));
}

// Appends one event line; `format` (printf) gives "<type> <key>=<value> ...". A line longer
// than 1 KiB is cut. Does nothing when no trace is open.
void TraceEvent(const char* format, ...) ABSL_PRINTF_ATTRIBUTE(1, 2);

// Opens `path` (created or truncated), writes the header (docs/TRACE.md) with `seed`, `faults`
// (the plan's canonical text, "" for no plan) and `process` (the process's name, RPMA_SIM_ROLE
// else the executable's: FileNamePart makes it one word) and starts tracing; the end line is
// written by FinishTrace, which runs at exit.
// Errors: FailedPrecondition (a trace is open already), InvalidArgument naming the path and the
// reason when it cannot be opened.
// A write that fails later (a full disk, /dev/full) does not stop the program: it is said once
// on stderr, "softrpma-sim: RPMA_SIM_TRACE: cannot write ...", with the first event lost.
absl::Status StartTrace(const std::string& path, uint64_t seed, absl::string_view faults,
                        absl::string_view process);

// Writes the end line and closes the trace. Does nothing when none is open.
void FinishTrace();

// In the child of a fork(): the open trace is the parent's. Stops tracing in this process
// without writing to it (the parent goes on writing its own).
void AbandonTraceInChild();

// The trace (or stats) file of this process for RPMA_SIM_TRACE=`path`: every "%p" replaced by
// the pid, every "%r" by the process's `role` (FileNamePart of it); in a child of fork()
// (`forked_child`) a path without "%p" gets ".<pid>" appended, so that parent and child (one
// role) never write one file.
std::string TracePathForProcess(const std::string& path, bool forked_child,
                                absl::string_view role);

// `name` as one word that is safe in a file name and a trace header: every byte but
// [A-Za-z0-9._-] becomes '_'; "" becomes "_".
std::string FileNamePart(absl::string_view name);

// The number of event lines and the fingerprint so far of the open (or last closed) trace.
uint64_t TraceEventCount();
uint64_t TraceFingerprint();

// The 64-bit FNV-1a hash of `bytes`, continuing from `hash` (start with kFnvOffsetBasis).
inline constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
uint64_t Fnv1a64(absl::string_view bytes, uint64_t hash = kFnvOffsetBasis);

// ---- Names, spelled as in the verbs / rdma_cm headers ------------------------------------
// nullptr for a value without a name (the trace then prints the number).

const char* WcStatusName(int status);
const char* WcOpcodeName(int opcode);
const char* WrOpcodeName(int opcode);
const char* QpStateName(int state);
const char* CmEventName(int event);
// The IBV_WC_* status called `name`, or nullopt.
std::optional<ibv_wc_status> WcStatusByName(absl::string_view name);

// A name or the number, for one printf argument: NameOr(WcStatusName(s), s).c_str().
std::string NameOr(const char* name, int value);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_TRACE_TRACE_H_
