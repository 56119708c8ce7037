// fork_test: fork() in a process whose fabric thread and cross-memory-attach pool are running
// (host.h, cma.h and the lock order at the top of host.h). Each case runs its scenario in a
// child process of its own, single-threaded when forked, and gives it kLimitMs: a fork that
// deadlocks, or a fork child that hangs, fails the case instead of the whole test binary.

#include <netinet/in.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "simverbs/sim/fabric/cma.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/fabric/hostile_peer.h"
#include "simverbs/sim/fabric/wire.h"

namespace softrpma::sim {
namespace {

using ::softrpma::sim::testing::Loopback;

constexpr int kLimitMs = 20 * 1000;  // a bound against hangs, never a timing assertion

// Exit statuses of a scenario.
constexpr int kScenarioOk = 0;
constexpr int kScenarioSetupFailed = 3;
constexpr int kScenarioHung = 4;  // it saw its own hang (a fork or a copy that never ended)

uint64_t NowMs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000 + static_cast<uint64_t>(now.tv_nsec) / 1000000;
}

// Waits until `done` or `limit_ms` passed; true when done.
bool AwaitFlag(const std::atomic<bool>& done, int limit_ms) {
  const uint64_t deadline = NowMs() + static_cast<uint64_t>(limit_ms);
  while (!done.load()) {
    if (NowMs() > deadline) return false;
    usleep(1000);
  }
  return true;
}

// Runs `scenario` in a child process and returns its exit status: -1 when it did not end
// within kLimitMs (it is killed), 128 + N when signal N ended it.
int RunScenario(const std::function<int()>& scenario) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(scenario());
  if (pid < 0) return -2;
  const uint64_t deadline = NowMs() + kLimitMs;
  int status = 0;
  while (true) {
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (NowMs() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(10 * 1000);
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// Starts a copy from process `pid` (whatever its outcome: only that `done` runs matters here)
// and waits for its `done`; true when it ran within `limit_ms`.
bool CopyAndAwaitDone(pid_t pid, int limit_ms) {
  static uint64_t word = 0;
  auto done_flag = std::make_shared<std::atomic<bool>>(false);
  cma::Copy copy;
  copy.pid = pid;
  copy.to_peer = false;
  copy.remote = {iovec{&word, sizeof(word)}};  // the same address in a forked relative
  copy.local.resize(sizeof(word));
  if (!cma::Start(std::move(copy), [done_flag](bool, Bytes) { done_flag->store(true); },
                  [] {})) {
    return false;
  }
  return AwaitFlag(*done_flag, limit_ms);
}

// On the fabric thread: on its first message, says so, waits for `go`, then starts a copy (as
// a responder serving a kFlagCma request does, nic/responder.cc), all under the fabric's work lock.
class CopyOnMessage final : public host::Conn::Handler {
 public:
  CopyOnMessage(std::atomic<bool>* entered, std::atomic<bool>* go, std::atomic<bool>* started)
      : entered_(entered), go_(go), started_(started) {}
  void OnMessage(const wire::Header& header, const uint8_t* body) override {
    entered_->store(true);
    AwaitFlag(*go_, kLimitMs);
    static uint64_t word = 0;
    cma::Copy copy;
    copy.pid = getppid();
    copy.remote = {iovec{&word, sizeof(word)}};
    copy.local.resize(sizeof(word));
    cma::Start(std::move(copy), [](bool, Bytes) {}, [] {});
    started_->store(true);
  }
  void OnClosed() override {}

 private:
  std::atomic<bool>* const entered_;
  std::atomic<bool>* const go_;
  std::atomic<bool>* const started_;
};

class Silent final : public host::Conn::Handler {
 public:
  void OnMessage(const wire::Header& header, const uint8_t* body) override {}
  void OnClosed() override {}
};

// A fork while the fabric thread serves a message that starts a copy: the fork's prepare
// handlers and the fabric thread take the fabric's work lock and the copy pool's lock. Taken
// in opposite orders (the pool's first at fork, as when each module registered its own
// pthread_atfork handlers and the pool came second), the fork holds the pool's lock and
// waits for the work lock, while the fabric thread holds the work lock and waits for the
// pool's: both hang. In the one order of host.h, the fork waits for the message to be served.
TEST(ForkTest, ForkWhileTheFabricThreadStartsACopy_NeitherHangs) {
  const int status = RunScenario([]() -> int {
    std::atomic<bool> entered{false}, go{false}, started{false};
    const sockaddr_in addr = Loopback(7391);
    std::unique_ptr<host::Listener> listener;
    // The fabric first, then the pool (each registered its fork handlers on first use).
    if (host::Listen(
            reinterpret_cast<const sockaddr*>(&addr),
            [&](const std::shared_ptr<host::Conn>&) -> std::shared_ptr<host::Conn::Handler> {
              return std::make_shared<CopyOnMessage>(&entered, &go, &started);
            },
            &listener) != 0) {
      return kScenarioSetupFailed;
    }
    if (!CopyAndAwaitDone(getppid(), kLimitMs)) return kScenarioSetupFailed;
    std::shared_ptr<host::Conn> conn;
    if (host::Dial(reinterpret_cast<const sockaddr*>(&addr), std::make_shared<Silent>(), &conn) !=
        0) {
      return kScenarioSetupFailed;
    }
    conn->Send(wire::MakeHeader(wire::Type::kAck), nullptr, 0);
    if (!AwaitFlag(entered, kLimitMs)) return kScenarioSetupFailed;
    // Fork while the fabric thread is inside the handler, then let the handler go on.
    std::atomic<bool> forked{false};
    std::thread forker([&forked] {
      const pid_t child = fork();
      if (child == 0) _exit(0);
      if (child > 0) waitpid(child, nullptr, 0);
      forked.store(true);
    });
    usleep(200 * 1000);  // the forker is in its prepare handlers by now
    go.store(true);
    const bool ok = AwaitFlag(forked, kLimitMs / 2) && AwaitFlag(started, kLimitMs / 2);
    if (!ok) {
      std::fprintf(stderr, "fork_test: the fork or the fabric thread hung (forked %d, copy %d)\n",
                   forked.load() ? 1 : 0, started.load() ? 1 : 0);
      _exit(kScenarioHung);  // the hung threads cannot be joined
    }
    forker.join();
    return kScenarioOk;
  });
  EXPECT_EQ(status, kScenarioOk) << "4: the fork or the fabric thread hung (a lock-order "
                                    "inversion at fork); -1: the scenario hung past "
                                 << kLimitMs << " ms";
}

// A process that has made copies forks; the child's first copy must end (its `done` run). The
// parent's fork handlers hold the pool's locks across fork(), write-locking the lock `done`
// runs under; a child cannot unlock a read-write lock its parent's thread write-locked (glibc
// takes the unlock for a reader's, the lock stays taken), so a child that reused it hung in its
// first copy's `done`.
TEST(ForkTest, ChildOfAProcessThatCopied_ItsFirstCopyEnds) {
  const int status = RunScenario([]() -> int {
    if (!CopyAndAwaitDone(getppid(), kLimitMs)) return kScenarioSetupFailed;
    const pid_t child = fork();
    if (child == 0) _exit(CopyAndAwaitDone(getppid(), kLimitMs / 2) ? kScenarioOk : kScenarioHung);
    if (child < 0) return kScenarioSetupFailed;
    int child_status = 0;
    waitpid(child, &child_status, 0);
    if (!WIFEXITED(child_status)) return 128 + WTERMSIG(child_status);
    // And the parent's pool still works after the fork.
    if (!CopyAndAwaitDone(getppid(), kLimitMs / 2)) return kScenarioHung;
    return WEXITSTATUS(child_status);
  });
  EXPECT_EQ(status, kScenarioOk) << "4: the child's copy never ended; -1: the scenario hung";
}

// cma::Pending (which a busy poller asks before it gives its CPU up) is true from Start until
// the copy's `done` returned. (A fork child forgets its parent's pool and its pending copies
// with it; a fork waits for a `done` under way, so that case cannot be held here.)
TEST(ForkTest, CopyIsPendingFromStartUntilItsDoneReturned) {
  constexpr int kNotPendingAfterStart = 10, kNotPendingInDone = 11, kPendingAfterDone = 13;
  const int status = RunScenario([]() -> int {
    if (cma::Pending()) return kPendingAfterDone;
    static uint64_t word = 0;
    auto in_done = std::make_shared<std::atomic<bool>>(false);
    auto release = std::make_shared<std::atomic<bool>>(false);
    auto pending_in_done = std::make_shared<std::atomic<bool>>(false);
    cma::Copy copy;
    copy.pid = getppid();
    copy.remote = {iovec{&word, sizeof(word)}};
    copy.local.resize(sizeof(word));
    if (!cma::Start(
            std::move(copy),
            [=](bool, Bytes) {
              pending_in_done->store(cma::Pending());
              in_done->store(true);
              AwaitFlag(*release, kLimitMs);
            },
            [] {})) {
      return kScenarioSetupFailed;
    }
    if (!cma::Pending()) return kNotPendingAfterStart;
    if (!AwaitFlag(*in_done, kLimitMs / 2)) return kScenarioHung;
    if (!pending_in_done->load()) return kNotPendingInDone;
    release->store(true);
    const uint64_t deadline = NowMs() + kLimitMs / 2;
    while (cma::Pending()) {
      if (NowMs() > deadline) return kPendingAfterDone;
      usleep(1000);
    }
    return kScenarioOk;
  });
  EXPECT_EQ(status, kScenarioOk)
      << "10: not pending after Start; 11: not pending while its done ran; 13: still pending "
         "after done returned; 4: the copy never ended; -1: hung";
}


// A copy started from a `done` (a responder that serves the next request when one ends) is
// taken by the worker that ran that `done` once it returns, even while another worker waits
// idle (a thread's wake-up costs as much as copying tens of KiB); two copies started there
// both end (the second wakes another worker). Only which thread runs each `done` counts here,
// not whether the kernel lets the copy through (ptrace rules may refuse it).
TEST(ForkTest, ACopyStartedInADoneRunsOnThatDonesWorker) {
  constexpr int kOtherWorker = 10;
  const int status = RunScenario([]() -> int {
    static uint64_t word = 0x5eed;
    const auto make_copy = [] {
      cma::Copy copy;
      copy.pid = getppid();
      copy.remote = {iovec{&word, sizeof(word)}};
      copy.local.resize(sizeof(word));
      return copy;
    };
    // Both workers back at the queue, waiting (a bound against hangs, not a timing).
    const auto await_two_idle = [] {
      const uint64_t deadline = NowMs() + kLimitMs / 8;
      while (cma::IdleWorkersForTest() < 2) {
        if (NowMs() > deadline) return false;
        usleep(1000);
      }
      return true;
    };
    // Two workers: the second copy starts while the first's `done` holds its worker.
    auto second_done = std::make_shared<std::atomic<bool>>(false);
    auto first_done = std::make_shared<std::atomic<bool>>(false);
    if (!cma::Start(
            make_copy(),
            [=](bool, Bytes) {
              AwaitFlag(*second_done, kLimitMs / 4);
              first_done->store(true);
            },
            [] {}) ||
        !cma::Start(make_copy(), [=](bool, Bytes) { second_done->store(true); }, [] {})) {
      return kScenarioSetupFailed;
    }
    if (!AwaitFlag(*first_done, kLimitMs / 4)) return kScenarioHung;

    struct Seen {
      std::atomic<pid_t> done_tid{0}, next_tid{0};
      std::atomic<bool> next_done{false}, pair_done[2] = {false, false};
    };
    // Five times; four must hold (a condition variable may wake its idle worker spuriously).
    int same_worker = 0;
    for (int trial = 0; trial < 5; ++trial) {
      if (!await_two_idle()) return kScenarioHung;
      auto seen = std::make_shared<Seen>();
      if (!cma::Start(
              make_copy(),
              [seen, make_copy](bool, Bytes) {
                seen->done_tid.store(gettid());
                cma::Start(
                    make_copy(),
                    [seen](bool, Bytes) {
                      seen->next_tid.store(gettid());
                      seen->next_done.store(true);
                    },
                    [] {});
                usleep(20 * 1000);  // an idle worker woken for it would have taken it by now
              },
              [] {})) {
        return kScenarioSetupFailed;
      }
      if (!AwaitFlag(seen->next_done, kLimitMs / 8)) return kScenarioHung;
      if (seen->next_tid.load() == seen->done_tid.load()) ++same_worker;
    }
    if (same_worker < 4) return kOtherWorker;

    if (!await_two_idle()) return kScenarioHung;
    auto seen = std::make_shared<Seen>();
    if (!cma::Start(
            make_copy(),
            [seen, make_copy](bool, Bytes) {
              for (int i = 0; i < 2; ++i) {
                cma::Start(
                    make_copy(), [seen, i](bool, Bytes) { seen->pair_done[i].store(true); },
                    [] {});
              }
            },
            [] {})) {
      return kScenarioSetupFailed;
    }
    if (!AwaitFlag(seen->pair_done[0], kLimitMs / 4) ||
        !AwaitFlag(seen->pair_done[1], kLimitMs / 4)) {
      return kScenarioHung;
    }
    return kScenarioOk;
  });
  EXPECT_EQ(status, kScenarioOk) << "10: the copy ran on another worker in 2 of 5 trials or "
                                    "more; 4: a copy never ended; -1: hung";
}

}  // namespace
}  // namespace softrpma::sim
