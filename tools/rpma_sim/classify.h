// classify.h: what became of one run of the program under test (clean, non-zero exit, crash,
// hang, leak), from how it ended and what it printed; and how leaks are looked for.
//
// Thread-safety: every function is thread-safe (none keeps state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_CLASSIFY_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_CLASSIFY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/rpma_sim/process.h"

namespace softrpma::rpma_sim {

// The class of one run. Exactly one per run, in this order of precedence: a run that timed out
// is hung whatever it printed; a sanitizer's error report (AddressSanitizer, ThreadSanitizer
// (data races too), MemorySanitizer, UBSan's "runtime error:", a memory error valgrind reported)
// or a fatal signal makes it crashed; a leak report (LeakSanitizer, or valgrind's "definitely
// lost") leaked; then racy: the simulated NIC's race detector reported a buffer the program
// changed between posting a work request and its execution (`softrpma-sim: race:`, a bug that
// corrupts data on a real NIC); then kept: the simulated NIC still held objects at exit because an injected
// fault failed the destroy call that would have freed them (what a real provider keeps too;
// the simulator keeps them reachable, so that they are no leak report); then a non-zero exit
// status; else clean.
//
// kOrphaned (after the sanitizer reports, before the signal: rpma-sim's SIGKILL ended it): every
// process of the run had exited but one, which waited in the simulator for a peer that was gone
// (ChildExit::orphaned), and the sweep stopped it. Not a failure: a server waits for clients.
enum class RunClass { kClean, kNonzero, kCrashed, kHung, kLeaked, kKept, kRacy, kOrphaned };
inline constexpr int kNumRunClasses = static_cast<int>(RunClass::kOrphaned) + 1;

// "clean", "nonzero", "crashed", "hung", "leaked", "kept", "racy", "orphaned".
const char* RunClassName(RunClass run_class);

// Whether a run of this class is a failure of the program (crashed, hung, leaked, racy). A non-zero
// exit is not: a program is expected to report an injected fault; nor is kept: the program
// could not have freed what the provider refused to destroy.
bool IsFailure(RunClass run_class);

// The line a LeakSanitizer report opens with (after its "==<pid>==").
inline constexpr absl::string_view kLeakReport = "ERROR: LeakSanitizer";

// How leaks are detected.
enum class LeakChecker {
  kNone,
  kAsan,      // the program is built with AddressSanitizer: its LeakSanitizer reports at exit
  kValgrind,  // the program runs under valgrind --leak-check=full
  // The program is a script (#!): LeakSanitizer checks each process of the run that is built
  // with AddressSanitizer (the simulator's end record says which), whatever the script does with
  // their output (ASAN_OPTIONS log_path into the run's directory).
  kAsanProcesses,
};

// "none", "asan", "valgrind", "asan-processes".
const char* LeakCheckerName(LeakChecker checker);

// The exit status valgrind is told to use when it found an error (--error-exitcode).
inline constexpr int kValgrindErrorExitCode = 97;

// The valgrind command line that `program` is prefixed with under LeakChecker::kValgrind.
std::vector<std::string> ValgrindPrefix();

// The leak checker for the program at `program_path`: kAsanProcesses for a script ("#!"), kAsan
// when the file references ASan's runtime (__asan_init), else kValgrind when `valgrind_path` is non-empty (valgrind is
// installed). Errors: FailedPrecondition saying what to do when neither applies or the program
// is built with ThreadSanitizer (__tsan_init: no leak checker, and valgrind cannot run it);
// NotFound when the file cannot be read or is not a regular file (it is searched in blocks,
// never held whole).
absl::StatusOr<LeakChecker> DetectLeakChecker(const std::string& program_path,
                                              absl::string_view valgrind_path);

// The verdict on one run.
struct RunVerdict {
  RunClass run_class = RunClass::kClean;
  // What happened, in a few words: "exit 1", "SIGSEGV", "AddressSanitizer: heap-use-after-free",
  // "timed out after 10s", "LeakSanitizer: detected memory leaks"...
  std::string detail;
};

// Classifies a run from how it ended and its combined stdout + stderr, `output`. `checker`
// says whether valgrind's exit status (kValgrindErrorExitCode) means an error report.
// `kept_objects`: how many objects the simulated NIC kept after injected failures of destroy
// calls, over all the run's processes (the `# kept` lines of their stats files).
RunVerdict Classify(const ChildExit& exit, absl::string_view output, LeakChecker checker,
                    absl::Duration timeout, uint64_t kept_objects = 0);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_CLASSIFY_H_
