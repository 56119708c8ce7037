#include "tools/rpma_sim/process.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace softrpma::rpma_sim {
namespace {

// How long RunChildren sleeps at most between checks of deadlines (a SIGCHLD wakes it earlier).
constexpr absl::Duration kMaxWait = absl::Milliseconds(100);

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// argv / envp as the NULL-terminated arrays execve wants; they point into `strings`.
std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Everything a child needs, prepared before fork (the child only calls async-signal-safe
// functions).
struct Prepared {
  std::string path;  // resolved program, or argv[0] when not found (execve then fails)
  std::vector<std::string> argv_strings;
  std::vector<std::string> env_strings;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string exec_error;  // written to the output when execve fails
  bool no_aslr = false;
};

void Prepare(const ChildCommand& command, Prepared* p) {
  const char* path_env = std::getenv("PATH");
  absl::StatusOr<std::string> found =
      FindProgram(command.argv[0], path_env != nullptr ? path_env : "/usr/bin:/bin");
  p->path = found.ok() ? *found : command.argv[0];
  p->argv_strings = command.argv;
  p->env_strings = ChildEnvironment(environ, command);
  p->argv = CStrings(p->argv_strings);
  p->envp = CStrings(p->env_strings);
  p->exec_error = absl::StrCat("rpma-sim: cannot run ", command.argv[0], ": ");
  p->no_aslr = command.no_aslr;
}

void DisableAslr() {
  int current = personality(0xffffffff);
  if (current != -1) personality(static_cast<unsigned long>(current) | ADDR_NO_RANDOMIZE);
}

// In the child, after fork: only async-signal-safe calls.
[[noreturn]] void ExecChild(const Prepared& p, int stdin_fd, int output_fd, const sigset_t& mask) {
  setpgid(0, 0);
  if (stdin_fd >= 0) dup2(stdin_fd, STDIN_FILENO);
  if (output_fd >= 0) {
    dup2(output_fd, STDOUT_FILENO);
    dup2(output_fd, STDERR_FILENO);
  }
  pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  signal(SIGPIPE, SIG_DFL);  // rpma-sim ignores it; an ignored signal stays ignored across exec
  if (p.no_aslr) DisableAslr();
  execve(p.path.c_str(), p.argv.data(), p.envp.data());
  const char* reason = strerror(errno);  // not strictly async-signal-safe; glibc's is in practice
  ssize_t ignored = write(STDERR_FILENO, p.exec_error.data(), p.exec_error.size());
  ignored = write(STDERR_FILENO, reason, strlen(reason));
  ignored = write(STDERR_FILENO, "\n", 1);
  (void)ignored;
  _exit(127);
}

struct Running {
  size_t index = 0;
  pid_t pid = 0;
  absl::Time start;
  bool killed = false;  // its deadline passed and its group got SIGKILL
  bool orphaned = false;  // RunWatch::orphaned said so and its group got SIGKILL
  std::string report;     // RunWatch's
  absl::Time orphan_checked = absl::InfinitePast();
};

ChildExit ExitFromStatus(int status) {
  ChildExit exit;
  if (WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
  return exit;
}

}  // namespace

std::vector<std::string> ChildEnvironment(char* const* base, const ChildCommand& command) {
  absl::flat_hash_set<std::string> drop(command.env_unset.begin(), command.env_unset.end());
  for (const auto& [name, value] : command.env_set) drop.insert(name);
  std::vector<std::string> env;
  for (char* const* entry = base; entry != nullptr && *entry != nullptr; ++entry) {
    absl::string_view text(*entry);
    absl::string_view name = text.substr(0, text.find('='));
    if (!drop.contains(name)) env.emplace_back(text);
  }
  for (const auto& [name, value] : command.env_set) env.push_back(absl::StrCat(name, "=", value));
  return env;
}

absl::StatusOr<std::string> FindProgram(absl::string_view program, absl::string_view path) {
  if (program.empty()) return absl::NotFoundError("empty program name");
  if (program.find('/') != absl::string_view::npos) {
    std::string file(program);
    if (IsExecutableFile(file)) return file;
    return absl::NotFoundError(absl::StrCat(program, " is not an executable file"));
  }
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    std::string file = absl::StrCat(dir.empty() ? "." : dir, "/", program);
    if (IsExecutableFile(file)) return file;
  }
  return absl::NotFoundError(absl::StrCat(program, " is not in PATH"));
}

absl::Status ExecInPlace(const ChildCommand& command) {
  if (command.argv.empty()) return absl::InvalidArgumentError("no program to run");
  const char* path_env = std::getenv("PATH");
  absl::StatusOr<std::string> found =
      FindProgram(command.argv[0], path_env != nullptr ? path_env : "/usr/bin:/bin");
  if (!found.ok()) return found.status();
  Prepared p;
  Prepare(command, &p);
  if (p.no_aslr) DisableAslr();
  execve(p.path.c_str(), p.argv.data(), p.envp.data());
  return absl::InternalError(absl::StrCat("execve ", p.path, ": ", strerror(errno)));
}

absl::StatusOr<std::vector<ChildExit>> RunChildren(
    const std::vector<ChildCommand>& commands, int jobs, absl::Duration timeout,
    const std::function<void(size_t index, const ChildExit& exit)>& on_done,
    const RunWatch& watch) {
  std::vector<ChildExit> results(commands.size());
  jobs = std::max(jobs, 1);

  sigset_t wanted;
  sigset_t old_mask;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGCHLD);
  sigaddset(&wanted, SIGINT);
  sigaddset(&wanted, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &wanted, &old_mask);
  absl::Cleanup restore_mask = [&old_mask] { pthread_sigmask(SIG_SETMASK, &old_mask, nullptr); };

  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  absl::Cleanup close_devnull = [devnull] {
    if (devnull >= 0) close(devnull);
  };

  std::vector<Running> running;
  // Kills every running group and reaps the leaders (on cancellation or an internal error).
  auto kill_all = [&running] {
    for (const Running& r : running) killpg(r.pid, SIGKILL);
    for (const Running& r : running) waitpid(r.pid, nullptr, 0);
    running.clear();
  };

  size_t next = 0;
  size_t finished = 0;
  while (finished < commands.size()) {
    // Start children up to the limit.
    while (static_cast<int>(running.size()) < jobs && next < commands.size()) {
      const ChildCommand& command = commands[next];
      Prepared p;
      Prepare(command, &p);
      int output_fd = -1;
      if (!command.output_path.empty()) {
        output_fd =
            open(command.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (output_fd < 0) {
          int err = errno;
          kill_all();
          return absl::InternalError(
              absl::StrCat("cannot create ", command.output_path, ": ", strerror(err)));
        }
      }
      pid_t pid = fork();
      if (pid == 0) ExecChild(p, devnull, output_fd, old_mask);
      int fork_errno = errno;
      if (output_fd >= 0) close(output_fd);
      if (pid < 0) {
        kill_all();
        return absl::InternalError(absl::StrCat("fork: ", strerror(fork_errno)));
      }
      setpgid(pid, pid);  // also in the child: whichever runs first; EACCES after exec is fine
      Running started;
      started.index = next;
      started.pid = pid;
      started.start = absl::Now();
      running.push_back(std::move(started));
      ++next;
    }

    // Collect the children that ended. waitid(WNOWAIT) first, so that the leader stays a zombie
    // (its pid, hence its group id, cannot be reused) while the rest of its group is killed.
    for (size_t i = 0; i < running.size();) {
      Running& r = running[i];
      siginfo_t info;
      info.si_pid = 0;
      if (waitid(P_PID, r.pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) {
        ++i;
        continue;
      }
      killpg(r.pid, SIGKILL);
      int status = 0;
      waitpid(r.pid, &status, 0);
      ChildExit exit = ExitFromStatus(status);
      exit.timed_out = r.killed;
      exit.pid = r.pid;
      exit.orphaned = r.orphaned;
      exit.report = std::move(r.report);
      exit.duration = absl::Now() - r.start;
      results[r.index] = exit;
      size_t index = r.index;
      running.erase(running.begin() + i);
      ++finished;
      if (on_done) on_done(index, results[index]);
    }
    if (finished == commands.size()) break;

    // Kill the groups whose deadline passed; sleep until the nearest deadline or a signal.
    absl::Time now = absl::Now();
    absl::Duration wait = kMaxWait;
    for (Running& r : running) {
      absl::Duration left = r.start + timeout - now;
      if (left <= absl::ZeroDuration()) {
        if (!r.killed && !r.orphaned) {
          if (watch.before_kill) r.report = watch.before_kill(r.index, r.pid);
          killpg(r.pid, SIGKILL);
          r.killed = true;
        }
      } else {
        if (watch.orphaned && !r.killed && !r.orphaned &&
            now - r.orphan_checked >= watch.orphan_interval) {
          r.orphan_checked = now;
          if (std::optional<std::string> report = watch.orphaned(r.index, r.pid)) {
            r.report = std::move(*report);
            r.orphaned = true;
            killpg(r.pid, SIGKILL);
            continue;
          }
        }
        wait = std::min(wait, left);
        if (watch.orphaned) wait = std::min(wait, watch.orphan_interval);
      }
    }
    if (static_cast<int>(running.size()) >= jobs || next >= commands.size()) {
      timespec ts = absl::ToTimespec(std::max(wait, absl::Milliseconds(1)));
      int sig = sigtimedwait(&wanted, nullptr, &ts);
      if (sig == SIGINT || sig == SIGTERM) {
        kill_all();
        return absl::CancelledError(sig == SIGINT ? "interrupted (SIGINT)"
                                                  : "terminated (SIGTERM)");
      }
    }
  }
  return results;
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("signal ", signal);
  return absl::StrCat("SIG", abbrev);
}

}  // namespace softrpma::rpma_sim
