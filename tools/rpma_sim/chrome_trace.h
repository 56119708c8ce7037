// chrome_trace.h: a parsed simulator trace (trace.h) as Chrome Trace Event JSON, for
// https://ui.perfetto.dev and chrome://tracing.
//
// The view has one process (named as the trace names it, RPMA_SIM_ROLE or the executable's name;
// "softrpma-sim" for a version 1 trace) with one track (tid) per thread that called librpma
// ("librpma (thread 1)"), per QP and per CQ, plus an "rdma_cm" track for connection-manager
// events and a "faults" track for injected faults not tied to a QP. Each librpma call is a slice
// on its thread's track from its api_call to its api_return (named with its error code when it
// failed; to the trace's end when it never returned), around the verbs events it caused on the
// other tracks. Each work request is a complete slice ("ph":"X") on its QP's track from its post
// to its completion (the `ready` time of its CQE); each completion is also a slice on its CQ's
// track from ready to the poll that took it. CM events and faults are instant events ("ph":"i").
// Slices on one track must nest (a viewer drops slices that overlap partially), so a slice that
// would overlap another partially goes to an extra lane of the same QP or CQ, a track of its
// own named "QP 17 (2)"; a run whose WRs complete in order needs none.
//
// Thread-safety: thread-safe (keeps no state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_CHROME_TRACE_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_CHROME_TRACE_H_

#include <string>
#include <vector>

#include "tools/rpma_sim/trace.h"

namespace softrpma::rpma_sim {

// The trace as Chrome Trace Event JSON (see the file comment): {"traceEvents":[...],
// "displayTimeUnit":"ns","otherData":{...}}; ts and dur in microseconds, as the format wants.
std::string ChromeTraceJson(const Trace& trace);

// The traces of the processes of one run (one file each: RPMA_SIM_TRACE=run.%p.trace) as one
// timeline: a process per trace, named `name`, in the given order, each with the tracks above.
// Each process's times are its own simulated clock, which starts at 0 when its NIC starts:
// the processes' timelines are side by side, not on one clock.
struct NamedTrace {
  std::string name;  // its process's name (TraceProcessNames)
  const Trace* trace;
};
std::string ChromeTraceJson(const std::vector<NamedTrace>& traces);

// The names of the processes of `traces` (read from `files`) in one timeline: each trace's process
// (its role), or its file's name for a version 1 trace; a role that two traces share (two
// clients) is followed by the file's name: "client (run.client.42.trace)".
std::vector<std::string> TraceProcessNames(const std::vector<Trace>& traces,
                                           const std::vector<std::string>& files);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_CHROME_TRACE_H_
