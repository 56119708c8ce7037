// process_ends.h: how every process of a run ended, from the records the simulator in each of
// them writes into the run's directory (RPMA_SIM_RUN_DIR; the writer and the format:
// simverbs/sim/trace/process_end.h). rpma-sim sees only the command it started; a shell script
// that starts a server and a client turns a child's crash into an exit status, so a run is
// crashed when any of its processes' records says so.
//
// Thread-safety: every function is thread-safe (none keeps state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_PROCESS_ENDS_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_PROCESS_ENDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/rpma_sim/classify.h"

namespace softrpma::rpma_sim {

// How one process ended, as it recorded.
struct ProcessEnd {
  int pid = 0;
  std::string prog;      // RPMA_SIM_ROLE, else the executable's file name
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC when it recorded
  std::optional<int> exit_code;  // it called exit() (or returned from main) with this
  std::string signal;            // "SIGABRT"...: the fatal signal that ended it, else ""
  std::string message;           // glibc's abort message, else ""
  std::string sanitizer;         // the "ERROR: ..." line of an AddressSanitizer report, else ""
  bool asan = false;             // it ran with AddressSanitizer (LeakSanitizer checked it)

  // A fatal signal or a sanitizer report.
  bool Crashed() const { return !signal.empty() || !sanitizer.empty(); }
};

// One record. Errors: InvalidArgument naming the line that is not `key=value`, a missing or
// unknown version marker, a bad number, or a record without a pid or an end (exit, signal or
// sanitizer). Unknown keys are ignored (a newer simulator may say more).
absl::StatusOr<ProcessEnd> ParseProcessEnd(absl::string_view text);

// Reads the records of `dir` (`end.<pid>.txt`), ordered by the time they were written, and
// removes the directory with what is in it. A record that cannot be read or parsed is said in
// `errors` (its file named) and left out.
std::vector<ProcessEnd> TakeProcessEnds(const std::string& dir, std::vector<std::string>* errors);

// `verdict` (Classify's) with what the records say: when a process crashed, the run is crashed
// (even if it then hung: the crash is the finding, and its replay reproduces it) and the detail
// names each crashed process in the order they crashed: "server: SIGABRT: free(): double free
// detected in tcache 2", "client: AddressSanitizer: heap-use-after-free"; the program's name is
// left out for `top_pid`, the command rpma-sim started ("SIGSEGV", as without records). A hang
// is said after the crash. Otherwise `verdict` as it is.
// `output` is the run's output: each LeakSanitizer report in it (kLeakReport) accounts for one
// bare SIGABRT record (no abort message, no sanitizer line), which is LeakSanitizer's own abort
// under ASAN_OPTIONS=abort_on_error=1: a leak (Classify's verdict), not a crash.
RunVerdict WithProcessEnds(const RunVerdict& verdict, const std::vector<ProcessEnd>& ends,
                           int top_pid, absl::string_view output);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_PROCESS_ENDS_H_
