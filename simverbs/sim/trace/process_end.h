// process_end.h: how this process ended, written into the run's directory (RPMA_SIM_RUN_DIR) for
// rpma-sim, which watches only the command it started: a shell script that starts a server and
// a client turns a child's crash into an exit status, and the crash would go unseen.
//
// What it is: once watching, the process writes `<dir>/end.<pid>.txt` when it ends:
//   - by a fatal signal (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL): a handler, installed only
//     for the signals whose disposition is still SIG_DFL (never in place of the program's own,
//     nor of a sanitizer's), writes the record with async-signal-safe calls only, then restores
//     SIG_DFL and re-raises, so that the process still dies by the signal (its parent sees the
//     same status). For SIGABRT, glibc's abort message (`free(): double free detected in
//     tcache 2`, a failed assert) is read from glibc's __abort_msg when the C library has it;
//   - by exit() or a return from main: on_exit() records the status;
//   - by an AddressSanitizer report: ASan's error report callback, when the program is built
//     with ASan, records the report's headline (the process then dies by ASan's exit code or
//     abort; a later signal record keeps the headline).
// _exit(), SIGKILL and other signals leave no record. The format, one `key=value` a line:
//   softrpma-sim-end=1
//   pid=<decimal>
//   prog=<RPMA_SIM_ROLE, else the executable's file name>
//   asan=1                                              (when it has AddressSanitizer's runtime)
//   time_ns=<CLOCK_MONOTONIC>
//   exit=<status> | signal=<SIGABRT...>
//   message=<glibc's abort message, one line>          (optional)
//   sanitizer=<the first "ERROR:" line of the report>   (optional)
// A file written by a signal replaces one written by exit() (a crash in a later exit handler or
// a static destructor is the end that matters); an exit record never replaces a file that
// exists (a second copy of the simulator in the process, the shim's, writes nothing twice).
// What it is not: reading the records (tools/rpma_sim/process_ends.h), nor the variable's
// absence: without RPMA_SIM_RUN_DIR nothing is installed.
//
// Thread-safety: WatchProcessEnd: call from one thread at a time (the NIC's start, under its
// lock). The handlers are async-signal-safe and may run on any thread.

#ifndef SOFTRPMA_SIMVERBS_SIM_TRACE_PROCESS_END_H_
#define SOFTRPMA_SIMVERBS_SIM_TRACE_PROCESS_END_H_

#include <string>

#include "absl/status/status.h"

namespace softrpma::sim {

// The run's directory, set by rpma-sim for each run (docs/RPMA_SIM.md).
inline constexpr char kRunDirEnvVar[] = "RPMA_SIM_RUN_DIR";

// Starts recording how this process ends into `dir` as `prog`. Once per process image: a later
// call (the child of a fork, whose inherited handlers already record with its own pid) does
// nothing. Errors: InvalidArgument when `dir` is not a writable directory or is too long.
absl::Status WatchProcessEnd(const std::string& dir, const std::string& prog);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_TRACE_PROCESS_END_H_
