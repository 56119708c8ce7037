// stats.h: the fault points' hit counts written at exit (RPMA_SIM_STATS, docs/TRACE.md).
//
// What it is: the file's lifetime. Once given a file, the process counts every fault point's
// hits (FaultInjector::CountAllHits) and writes them to the file when it exits
// (FaultInjector::WriteStats, fault.h, is the format). What it is not: the counting, the format
// or reading the variable (settings.h opens the file, so that a bad path is an error at start).
//
// Thread-safety: call these from one thread at a time (the NIC's start, a fork child's
// handler); the counts themselves are the injector's, thread-safe.

#ifndef SOFTRPMA_SIMVERBS_SIM_TRACE_STATS_H_
#define SOFTRPMA_SIMVERBS_SIM_TRACE_STATS_H_

#include <cstdio>
#include <string>

namespace softrpma::sim {

// Counts every hit from now on and writes the counts to `file` (opened for writing; owned from
// now on) at exit. `path` is the file's name, for the message that says a write failed (on
// stderr: the exit status is the program's). A file given earlier is closed unwritten.
void WriteStatsAtExit(std::FILE* file, const std::string& path);

// In the child of a fork(): the file is the parent's, written by the parent at its exit. The
// child writes none unless it is given a file of its own.
void AbandonStatsInChild();

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_TRACE_STATS_H_
