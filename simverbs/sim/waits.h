// waits.h: where this process's threads block in the simulator, and what is outstanding on its
// QPs, written to a file of the run's directory when rpma-sim asks (docs/RPMA_SIM.md, "Hung
// runs"). Only under rpma-sim: on when RPMA_SIM_RUN_DIR names a directory at the NIC's start.
//
// The model. Every blocking wait of the simulator (ibv_get_cq_event, rdma_get_cm_event,
// ibv_get_async_event: each one read(2) of a SignalFd) is bracketed by a ScopedWait, which
// records "thread T waits in <call> for <object>" on a small board; QPs are on the board from
// creation to destruction (their send / receive slots in use are read there, lock-free); the
// simulator's own threads (fabric, copy pool, this reporter) are listed, so that rpma-sim can
// tell a process whose every thread of the program is asleep in the simulator.
//
// The report is written by a thread of ours, never in a signal handler: SIGUSR2's handler (only
// installed when the program left SIGUSR2 at SIG_DFL) writes one byte to a pipe; the reporter
// thread reads it and writes `<dir>/waits.<pid>.txt` (through a temporary file and rename, so a
// reader sees a whole report or none). At start, `<dir>/sim.<pid>` says that this process runs
// the simulator and whether it answers SIGUSR2 (rpma-sim sends it only then: the default action
// of SIGUSR2 would kill the process). Also at start, when `<dir>/tracer.pid` holds a pid,
// prctl(PR_SET_PTRACER) lets that process (rpma-sim) and its children (gdb) attach under Yama's
// ptrace_scope=1.
//
// Thread-safety: every function is thread-safe. A fork's child forgets the parent's board,
// pipe and thread (ForgetInChild) and starts its own with its own NIC.

#ifndef SOFTRPMA_SIMVERBS_SIM_WAITS_H_
#define SOFTRPMA_SIMVERBS_SIM_WAITS_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace softrpma::sim::waits {

// The variable rpma-sim sets to the run's directory (one per run of a sweep).
inline constexpr char kRunDirEnvVar[] = "RPMA_SIM_RUN_DIR";

// Whether waits are recorded (Start found RPMA_SIM_RUN_DIR). One relaxed load: callers test it
// before they build a description.
bool On();

// Called when this process's NIC starts: with RPMA_SIM_RUN_DIR set and not empty, turns the
// board on, writes the marker, installs the SIGUSR2 handler (when SIGUSR2 is at SIG_DFL) and
// starts the reporter thread. `name` is the process's name (RPMA_SIM_ROLE, else the
// executable's). Failures only lose the report (said once on stderr).
void Start(const std::string& name);

// In a fork's child: the parent's board, pipe and reporter are not this process's; SIGUSR2 is
// ignored by the inherited handler until Start runs here.
void ForgetInChild();

// Records, from construction to destruction, that the calling thread waits in `call` (a verbs
// or rdma_cm function name, static storage) for `object` ("completion channel 2 (CQ 1)").
class ScopedWait final {
 public:
  ScopedWait(const char* call, std::string object);
  ScopedWait(const ScopedWait&) = delete;
  ScopedWait& operator=(const ScopedWait&) = delete;
  ~ScopedWait();

 private:
  bool on_;
};

// A QP as the board shows it; the pointers must stay valid until RemoveQp.
struct QpView {
  const ibv_qp* qp = nullptr;                         // qp_num, state
  const std::atomic<uint32_t>* sq_in_use = nullptr;   // send WRs posted, not yet polled
  const std::atomic<uint32_t>* rq_in_use = nullptr;   // receives posted, not yet polled
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t send_cq = 0;  // CQ numbers (trace ids)
  uint32_t recv_cq = 0;
};
void AddQp(const QpView& view);
void RemoveQp(const ibv_qp* qp);

// The calling thread is one of the simulator's own (until RemoveSimThread): not the program's.
void AddSimThread();
void RemoveSimThread();

// The report as written to waits.<pid>.txt (for tests): a header line, then one line per
// waiting thread, the simulator's threads, and one line per QP.
std::string Report();

}  // namespace softrpma::sim::waits

#endif  // SOFTRPMA_SIMVERBS_SIM_WAITS_H_
