#include "simverbs/sim/waits.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/base/thread_annotations.h"
#include "simverbs/mutex.h"

namespace softrpma::sim::waits {
namespace {

pid_t Tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

struct Wait {
  const char* call;
  std::string object;
};

// One process's board. Heap-allocated and never freed: a fork's child takes a new one rather
// than touch a mutex another thread of the parent may have held at the fork.
struct Board {
  softrpma::Mutex mu;
  std::map<pid_t, Wait> waits ABSL_GUARDED_BY(mu);  // by thread id
  std::map<const ibv_qp*, QpView> qps ABSL_GUARDED_BY(mu);
  std::set<pid_t> sim_threads ABSL_GUARDED_BY(mu);
  std::string dir;   // set by Start before on
  std::string name;  // likewise
};

std::atomic<Board*> g_board{nullptr};
std::atomic<bool> g_on{false};
// The pipe's write end for the handler (-1: none, the handler does nothing), and its owner.
std::atomic<int> g_pipe_write{-1};

Board* GetBoard() {
  Board* board = g_board.load(std::memory_order_acquire);
  if (board != nullptr) return board;
  Board* made = new Board();
  if (g_board.compare_exchange_strong(board, made, std::memory_order_acq_rel)) return made;
  delete made;
  return board;
}

// SIGUSR2: async-signal-safe, one byte to the reporter thread.
void OnReportSignal(int) {
  const int saved = errno;
  const int fd = g_pipe_write.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const char byte = 'r';
    ssize_t ignored = write(fd, &byte, 1);
    (void)ignored;
  }
  errno = saved;
}

const char* QpStateName(int state) {
  switch (state) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERROR";
    default: return "?";
  }
}

void WriteReport(const Board& board) {
  const std::string path = board.dir + "/waits." + std::to_string(getpid()) + ".txt";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << Report();
    if (!out) return;
  }
  rename(tmp.c_str(), path.c_str());
}

struct Reporter {
  int read_fd;
};

void* RunReporter(void* arg) {
  const int read_fd = static_cast<Reporter*>(arg)->read_fd;
  delete static_cast<Reporter*>(arg);
  AddSimThread();
  char byte;
  while (true) {
    const ssize_t n = read(read_fd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    // A fork's child has a new board and no reporter; this one keeps the parent's.
    if (Board* board = g_board.load(std::memory_order_acquire); board != nullptr) {
      WriteReport(*board);
    }
  }
  RemoveSimThread();
  return nullptr;
}

// The reporter takes no signals: the program's handlers run on the program's threads.
bool StartReporter(int read_fd) {
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  Reporter* arg = new Reporter{read_fd};
  const int err = pthread_create(&thread, &attr, &RunReporter, arg);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (err != 0) delete arg;
  return err == 0;
}

}  // namespace

bool On() { return g_on.load(std::memory_order_relaxed); }

void Start(const std::string& name) {
  const char* dir = std::getenv(kRunDirEnvVar);
  if (dir == nullptr || *dir == '\0' || On()) return;
  Board* board = GetBoard();
  board->dir = dir;
  board->name = name;
  // rpma-sim's gdb is its child, not our ancestor: under Yama's ptrace_scope=1 it may attach
  // only when we name rpma-sim as our tracer (its descendants are then allowed too).
  {
    std::ifstream tracer(board->dir + "/../tracer.pid");
    long tracer_pid = 0;
    if (tracer >> tracer_pid && tracer_pid > 0) prctl(PR_SET_PTRACER, tracer_pid, 0, 0, 0);
  }
  bool answers = false;
  struct sigaction current;
  if (sigaction(SIGUSR2, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      (current.sa_flags & SA_SIGINFO) == 0) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) == 0) {
      if (StartReporter(fds[0])) {
        g_pipe_write.store(fds[1], std::memory_order_relaxed);
        struct sigaction action;
        std::memset(&action, 0, sizeof(action));
        action.sa_handler = &OnReportSignal;
        sigemptyset(&action.sa_mask);
        // SA_RESTART: the program's restartable calls go on as if nothing happened.
        action.sa_flags = SA_RESTART;
        answers = sigaction(SIGUSR2, &action, nullptr) == 0;
      } else {
        close(fds[0]);
        close(fds[1]);
      }
    }
  } else if (sigaction(SIGUSR2, nullptr, &current) == 0 && current.sa_handler == &OnReportSignal) {
    // A fork's child that inherited our handler: it needs a reporter of its own.
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) == 0 && StartReporter(fds[0])) {
      g_pipe_write.store(fds[1], std::memory_order_relaxed);
      answers = true;
    }
  }
  g_on.store(true, std::memory_order_relaxed);
  // The marker: this pid runs the simulator (its exit later means a peer is gone), which
  // executable it is (an exec replaces it) and whether SIGUSR2 asks it for a report.
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  exe[n > 0 ? n : 0] = '\0';
  const std::string marker = board->dir + "/sim." + std::to_string(getpid());
  std::ofstream out(marker + ".tmp", std::ios::trunc);
  out << "name " << name << "\nexe " << exe << "\nsigusr2 " << (answers ? 1 : 0) << "\n";
  out.close();
  if (!out || rename((marker + ".tmp").c_str(), marker.c_str()) != 0) {
    std::fprintf(stderr, "softrpma-sim: %s: cannot write %s: %s; no hang report for pid %d\n",
                 kRunDirEnvVar, marker.c_str(), std::strerror(errno), getpid());
  }
}

void ForgetInChild() {
  // The write end is the parent's pipe: a signal here must not make the parent report.
  const int fd = g_pipe_write.exchange(-1, std::memory_order_relaxed);
  if (fd >= 0) close(fd);
  g_board.store(nullptr, std::memory_order_release);  // leaked: its mutex may be held
  g_on.store(false, std::memory_order_relaxed);
}

ScopedWait::ScopedWait(const char* call, std::string object) : on_(On()) {
  if (!on_) return;
  Board* board = GetBoard();
  softrpma::MutexLock lock(&board->mu);
  board->waits[Tid()] = Wait{call, std::move(object)};
}

ScopedWait::~ScopedWait() {
  if (!on_) return;
  Board* board = GetBoard();
  softrpma::MutexLock lock(&board->mu);
  board->waits.erase(Tid());
}

void AddQp(const QpView& view) {
  if (!On()) return;
  Board* board = GetBoard();
  softrpma::MutexLock lock(&board->mu);
  board->qps[view.qp] = view;
}

void RemoveQp(const ibv_qp* qp) {
  Board* board = g_board.load(std::memory_order_acquire);
  if (board == nullptr) return;
  softrpma::MutexLock lock(&board->mu);
  board->qps.erase(qp);
}

void AddSimThread() {
  Board* board = GetBoard();
  softrpma::MutexLock lock(&board->mu);
  board->sim_threads.insert(Tid());
}

void RemoveSimThread() {
  Board* board = g_board.load(std::memory_order_acquire);
  if (board == nullptr) return;
  softrpma::MutexLock lock(&board->mu);
  board->sim_threads.erase(Tid());
}

std::string Report() {
  Board* board = GetBoard();
  std::ostringstream out;
  softrpma::MutexLock lock(&board->mu);
  out << "softrpma-sim waits: pid " << getpid() << " (" << board->name << ")\n";
  if (board->waits.empty()) out << "no thread waits in the simulator\n";
  for (const auto& [tid, wait] : board->waits) {
    out << "thread " << tid << " waits in " << wait.call << " for " << wait.object << "\n";
  }
  out << "simulator threads:";
  for (pid_t tid : board->sim_threads) out << " " << tid;
  out << "\n";
  if (board->qps.empty()) out << "no QP\n";
  for (const auto& [qp, view] : board->qps) {
    const int state = __atomic_load_n(reinterpret_cast<const int*>(&view.qp->state),
                                      __ATOMIC_RELAXED);
    out << "QP " << view.qp->qp_num << ": " << QpStateName(state) << ", "
        << view.sq_in_use->load(std::memory_order_relaxed) << " of " << view.max_send_wr
        << " send WRs outstanding, " << view.rq_in_use->load(std::memory_order_relaxed) << " of "
        << view.max_recv_wr << " receives posted (not yet polled); send CQ " << view.send_cq
        << ", receive CQ " << view.recv_cq << "\n";
  }
  return out.str();
}

}  // namespace softrpma::sim::waits
