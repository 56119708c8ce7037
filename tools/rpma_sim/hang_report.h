// hang_report.h: where the processes of a run that does not end are (docs/RPMA_SIM.md, "Hung
// and orphaned runs"): before a hung run is killed, a stack of every thread of each of its
// processes (gdb in batch mode, when installed and allowed to attach) and the simulator's own
// view (each process's waits.<pid>.txt, simverbs/sim/waits.h: which thread waits in which call
// for what, what is outstanding on each QP); and whether a run is orphaned: all its processes
// that ran the simulator exited but one, which sleeps in the simulator with no peer left to wake
// it (the others, a shell waiting for its children, only wait).
//
// A run's processes are the members of its process group (process.h); the simulators of a
// run write into its directory, RPMA_SIM_RUN_DIR (`sim.<pid>` markers at start, the reports on
// SIGUSR2, which is sent only to a process whose marker says it answers it).
//
// Thread-safety: HangReport and OrphanCheck start processes (gdb) and wait for them by pid;
// call them from RunChildren's thread (process.h, RunWatch).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_HANG_REPORT_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_HANG_REPORT_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace softrpma::rpma_sim {

// The file, in the directory given to every run's directory as its parent, that holds
// rpma-sim's pid: each simulator names it its ptracer (prctl PR_SET_PTRACER), so that gdb,
// rpma-sim's child, may attach under Yama's ptrace_scope=1.
inline constexpr char kTracerPidFile[] = "tracer.pid";

// Writes `<dir>/tracer.pid`. False when it cannot.
bool WriteTracerPid(const std::string& dir);

// The live members of process group `group`, ascending (zombies excluded: they have exited).
std::vector<pid_t> GroupProcesses(pid_t group);

// The report of a run in process group `group` that is to be killed, its simulators writing
// into `run_dir`. For each live process: a header "process PID (NAME): ..." then the gdb
// stacks of its threads (bounded by `gdb_limit` a process; "gdb: ..." says why there is none)
// and the simulator's waits (each line indented). Bounded in time: about gdb_limit per process
// plus 2 s for the simulators' reports.
std::string HangReport(pid_t group, const std::string& run_dir, absl::Duration gdb_limit);

// Watches the runs of one RunChildren for orphans.
class OrphanCheck final {
 public:
  // `grace`: how long a run must look orphaned before it is called so (a peer that exited may
  // still have its last messages in flight).
  explicit OrphanCheck(absl::Duration grace) : grace_(grace) {}

  // Whether run `index` (process group `group`, directory `run_dir`) is orphaned: every
  // process of it that started a simulator has exited but one (at least one has exited); that
  // one's threads all wait in the simulator (or are the simulator's); every other live process
  // waits for its children (wait4 / waitid); and so since `grace`. Then returns the report
  // (its first line a summary: "server (pid 12) waits in rdma_get_cm_event; ...").
  std::optional<std::string> Check(size_t index, pid_t group, const std::string& run_dir);

 private:
  absl::Duration grace_;
  std::map<size_t, absl::Time> since_;  // runs that looked orphaned, since when
};

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_HANG_REPORT_H_
