// process.h: how rpma-sim starts the program under test: with a chosen environment, in a process
// group of its own (so that a timeout kills everything it started), its output in a file; one
// at a time in place of rpma-sim (`run`), or several at once with a deadline each (`sweep`).
//
// Thread-safety: RunChildren blocks SIGCHLD, SIGINT and SIGTERM in the calling thread while it
// runs; call it from the main thread of a process that has no other threads starting children.

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_PROCESS_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_PROCESS_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace softrpma::rpma_sim {

// One program to start.
struct ChildCommand {
  std::vector<std::string> argv;  // argv[0] without a '/' is looked up in PATH
  // Variables to set (replacing any inherited value) and to remove from the inherited
  // environment, applied in that order: a name in both is set.
  std::vector<std::pair<std::string, std::string>> env_set;
  std::vector<std::string> env_unset;
  // Where stdout and stderr go (created or truncated); "" keeps ours. Only for RunChildren.
  std::string output_path;
  // Run without address-space randomization (personality(ADDR_NO_RANDOMIZE)), so that pointers a
  // program uses as wr_id are the same in every run and traces compare byte for byte
  // (docs/TRACE.md, "Determinism"). Best effort: ignored where the kernel refuses.
  bool no_aslr = true;
};

// How a child ended.
struct ChildExit {
  bool timed_out = false;  // still running at its deadline: its process group was killed
  int exit_code = -1;      // its exit status when it exited, else -1
  int signal = 0;          // the signal that ended it, else 0 (SIGKILL after a timeout)
  int pid = 0;             // its process id (its processes' records name it: the top one)
  absl::Duration duration;
  // Stopped by RunWatch::orphaned (its group killed with SIGKILL) before its deadline.
  bool orphaned = false;
  // Timed out or orphaned: what RunWatch said about where its processes wait ("" without one).
  std::string report;
};

// What RunChildren asks, while a child runs, about its process group (the group's id is the
// child's pid). Both are optional; each runs on RunChildren's thread and delays the others'
// deadlines by as long as it takes, so each must bound its own time.
struct RunWatch {
  // At the deadline, before the group is killed: where its processes are (ChildExit::report).
  std::function<std::string(size_t index, int group)> before_kill;
  // About every `orphan_interval` while the child runs: a report when the group is to be
  // stopped now as orphaned (ChildExit::orphaned), else nullopt.
  std::function<std::optional<std::string>(size_t index, int group)> orphaned;
  absl::Duration orphan_interval = absl::Milliseconds(200);
};

// The environment `command` runs in: `base` (a NULL-terminated "NAME=value" array, as environ)
// without the names of env_unset and env_set, followed by env_set.
std::vector<std::string> ChildEnvironment(char* const* base, const ChildCommand& command);

// The file `program` names: itself when it contains a '/', else the first executable regular
// file of that name in a directory of `path` (a PATH value). Errors: NotFound.
absl::StatusOr<std::string> FindProgram(absl::string_view program, absl::string_view path);

// Replaces this process with `command` (output_path is ignored). Returns only on failure:
// NotFound (no such program) or Internal (execve failed, with its errno).
absl::Status ExecInPlace(const ChildCommand& command);

// Runs every command, at most `jobs` at once (jobs >= 1), each in a process group of its own with
// stdin from /dev/null. A child still running `timeout` after it started has its whole group
// killed (SIGKILL) and counts as timed out; once a child has ended, what is left of its group is
// killed too. `on_done(index, exit)` is called on this thread as each command finishes, in the
// order they finish. `watch` may explain a timeout and stop an orphaned child early (above).
// Returns one ChildExit per command, in command order.
// Errors: Cancelled when SIGINT or SIGTERM arrived (every running group is killed first; commands
// not finished have a default ChildExit); Internal when fork or a pipe fails.
absl::StatusOr<std::vector<ChildExit>> RunChildren(
    const std::vector<ChildCommand>& commands, int jobs, absl::Duration timeout,
    const std::function<void(size_t index, const ChildExit& exit)>& on_done,
    const RunWatch& watch = RunWatch());

// "SIGSEGV" for SIGSEGV..., "signal N" for one without a name.
std::string SignalName(int signal);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_PROCESS_H_
