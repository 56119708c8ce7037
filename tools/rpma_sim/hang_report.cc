#include "tools/rpma_sim/hang_report.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tools/rpma_sim/process.h"

namespace softrpma::rpma_sim {
namespace {

// How long a simulator has to write its report after SIGUSR2 (its reporter thread only takes
// its board's lock; a process stopped by a debugger or wedged in the kernel gets no more).
constexpr absl::Duration kWaitsLimit = absl::Seconds(2);
// The most lines of gdb output kept per process (a program of many threads).
constexpr size_t kMaxGdbLines = 200;

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct ProcStat {
  char state = '?';
  pid_t pgrp = 0;
  std::string comm;
};

// /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may hold blanks and parentheses.
std::optional<ProcStat> ReadStat(pid_t pid) {
  const std::string text = ReadSmallFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  std::vector<absl::string_view> rest =
      absl::StrSplit(absl::string_view(text).substr(close + 1), ' ', absl::SkipEmpty());
  if (rest.size() < 3) return std::nullopt;
  ProcStat stat;
  stat.comm = text.substr(open + 1, close - open - 1);
  stat.state = rest[0].empty() ? '?' : rest[0][0];
  int pgrp = 0;
  if (!absl::SimpleAtoi(rest[2], &pgrp)) return std::nullopt;
  stat.pgrp = pgrp;
  return stat;
}

std::vector<pid_t> NumericEntries(const std::string& dir) {
  std::vector<pid_t> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* entry = readdir(d)) {
    int n = 0;
    if (absl::SimpleAtoi(entry->d_name, &n) && n > 0) out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// What a simulator's marker (`sim.<pid>`, simverbs/sim/waits.h) says.
struct Marker {
  std::string name;
  std::string exe;
  bool answers = false;  // SIGUSR2 asks it for its report
};

std::map<pid_t, Marker> ReadMarkers(const std::string& run_dir) {
  std::map<pid_t, Marker> markers;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, error)) {
    const std::string file = entry.path().filename().string();
    int pid = 0;
    if (!absl::StartsWith(file, "sim.") || !absl::SimpleAtoi(file.substr(4), &pid)) continue;
    Marker marker;
    for (absl::string_view line : absl::StrSplit(ReadSmallFile(entry.path().string()), '\n')) {
      if (absl::ConsumePrefix(&line, "name ")) marker.name = std::string(line);
      if (absl::ConsumePrefix(&line, "exe ")) marker.exe = std::string(line);
      if (absl::ConsumePrefix(&line, "sigusr2 ")) marker.answers = line == "1";
    }
    markers[pid] = marker;
  }
  return markers;
}

// Whether `pid` is still the program that wrote `marker` (an exec replaces the image, and with
// it the handler that makes SIGUSR2 harmless).
bool StillTheSimulator(pid_t pid, const Marker& marker) {
  char exe[4096];
  const ssize_t n = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), exe, sizeof(exe) - 1);
  return n > 0 && std::string(exe, n) == marker.exe;
}

// Asks the simulators among `pids` for their reports; returns them by pid (those that wrote
// one within kWaitsLimit).
std::map<pid_t, std::string> RequestWaits(const std::vector<pid_t>& pids,
                                          const std::map<pid_t, Marker>& markers,
                                          const std::string& run_dir, absl::Duration limit) {
  std::map<pid_t, std::string> paths;
  for (pid_t pid : pids) {
    auto it = markers.find(pid);
    if (it == markers.end() || !it->second.answers || !StillTheSimulator(pid, it->second)) continue;
    const std::string path = absl::StrCat(run_dir, "/waits.", pid, ".txt");
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    if (kill(pid, SIGUSR2) == 0) paths[pid] = path;
  }
  std::map<pid_t, std::string> reports;
  const absl::Time deadline = absl::Now() + limit;
  while (reports.size() < paths.size() && absl::Now() < deadline) {
    for (const auto& [pid, path] : paths) {
      if ((reports.count(pid) != 0) || access(path.c_str(), F_OK) != 0) continue;
      reports[pid] = ReadSmallFile(path);
    }
    if (reports.size() < paths.size()) usleep(10000);
  }
  return reports;
}

std::string Indent(absl::string_view text, absl::string_view prefix) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, prefix, line, "\n");
  }
  return out;
}

// The threads' stacks of `pid` by gdb in batch mode, or "gdb: <why not>".
std::string GdbStacks(const std::string& gdb, pid_t pid, const std::string& scratch,
                      absl::Duration limit) {
  const std::string output = absl::StrCat(scratch, "/gdb.", pid, ".txt");
  const std::string pid_text = absl::StrCat(pid);
  std::vector<std::string> args = {gdb,  "-nx",  "-batch", "-p", pid_text,
                                   "-ex", "set pagination off", "-ex", "thread apply all bt"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int fd = open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return "gdb: cannot create its output file";
  const pid_t child = fork();
  if (child == 0) {
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);  // RunChildren blocks SIGCHLD, SIGINT, ...
    setpgid(0, 0);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, STDIN_FILENO);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execv(gdb.c_str(), argv.data());
    _exit(127);
  }
  close(fd);
  if (child < 0) return "gdb: fork failed";
  const absl::Time deadline = absl::Now() + limit;
  int status = 0;
  bool done = false;
  while (!done && absl::Now() < deadline) {
    done = waitpid(child, &status, WNOHANG) == child;
    if (!done) usleep(20000);
  }
  if (!done) {
    // Killed, gdb leaves the process: the kernel detaches a dead tracer's tracees.
    killpg(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  std::string text = ReadSmallFile(output);
  std::error_code ignored;
  std::filesystem::remove(output, ignored);
  std::string stacks;
  size_t lines = 0;
  std::string last;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "Thread ") || absl::StartsWith(line, "#")) {
      if (++lines <= kMaxGdbLines) absl::StrAppend(&stacks, line, "\n");
    } else {
      last = std::string(line);
    }
  }
  if (lines > kMaxGdbLines) absl::StrAppend(&stacks, "... ", lines - kMaxGdbLines, " more lines\n");
  if (!done) {
    return absl::StrCat("gdb: no stack within ", absl::FormatDuration(limit), "\n", stacks);
  }
  if (stacks.empty()) {
    // E.g. "ptrace: Operation not permitted." (Yama, a container without CAP_SYS_PTRACE).
    return absl::StrCat("gdb: no stack", last.empty() ? "" : absl::StrCat(" (", last, ")"), "\n");
  }
  return stacks;
}

// The current system call of `tid` of `pid` (/proc/.../syscall's first field), -1 when
// running or unknown.
long CurrentSyscall(pid_t pid, pid_t tid) {
  const std::string text = ReadSmallFile(absl::StrCat("/proc/", pid, "/task/", tid, "/syscall"));
  long number = -1;
  std::vector<absl::string_view> fields = absl::StrSplit(text, ' ');
  if (fields.empty() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[0]), &number)) {
    return -1;
  }
  return number;
}

// Whether every thread of `pid` sleeps in wait4 / waitid: a shell or harness that only waits
// for its children.
bool OnlyWaitsForChildren(pid_t pid) {
  const std::vector<pid_t> tids = NumericEntries(absl::StrCat("/proc/", pid, "/task"));
  if (tids.empty()) return false;
  return std::all_of(tids.begin(), tids.end(), [pid](pid_t tid) {
    const long call = CurrentSyscall(pid, tid);
    return call == SYS_wait4 || call == SYS_waitid;
  });
}

// From a simulator's report: the threads that wait in it ("thread T waits in CALL for ...")
// and its own threads ("simulator threads: T T").
void ParseWaits(absl::string_view report, std::map<pid_t, std::string>* waiting,
                std::set<pid_t>* sim_threads) {
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "thread ")) {
      const size_t space = rest.find(' ');
      int tid = 0;
      if (space != absl::string_view::npos && absl::SimpleAtoi(rest.substr(0, space), &tid)) {
        absl::string_view what = rest.substr(space + 1);
        absl::ConsumePrefix(&what, "waits in ");
        (*waiting)[tid] = std::string(what);
      }
    } else if (absl::ConsumePrefix(&rest, "simulator threads:")) {
      for (absl::string_view t : absl::StrSplit(rest, ' ', absl::SkipEmpty())) {
        int tid = 0;
        if (absl::SimpleAtoi(t, &tid)) sim_threads->insert(tid);
      }
    }
  }
}

std::string ProcessName(pid_t pid, const std::map<pid_t, Marker>& markers) {
  auto it = markers.find(pid);
  if (it != markers.end() && !it->second.name.empty()) return it->second.name;
  std::optional<ProcStat> stat = ReadStat(pid);
  return stat.has_value() ? stat->comm : "?";
}

}  // namespace

bool WriteTracerPid(const std::string& dir) {
  std::ofstream out(absl::StrCat(dir, "/", kTracerPidFile), std::ios::trunc);
  out << getpid() << "\n";
  return static_cast<bool>(out);
}

std::vector<pid_t> GroupProcesses(pid_t group) {
  std::vector<pid_t> members;
  for (pid_t pid : NumericEntries("/proc")) {
    std::optional<ProcStat> stat = ReadStat(pid);
    if (stat.has_value() && stat->pgrp == group && stat->state != 'Z' && stat->state != 'X') {
      members.push_back(pid);
    }
  }
  return members;
}

std::string HangReport(pid_t group, const std::string& run_dir, absl::Duration gdb_limit) {
  const std::vector<pid_t> pids = GroupProcesses(group);
  const std::map<pid_t, Marker> markers = ReadMarkers(run_dir);
  // The simulators first: gdb stops a process while it reads it, its reporter thread too.
  const std::map<pid_t, std::string> waits = RequestWaits(pids, markers, run_dir, kWaitsLimit);
  const char* path_env = std::getenv("PATH");
  absl::StatusOr<std::string> gdb =
      FindProgram("gdb", path_env != nullptr ? path_env : "/usr/bin:/bin");
  std::string out;
  for (pid_t pid : pids) {
    const bool sim = (markers.count(pid) != 0);
    absl::StrAppend(&out, "process ", pid, " (", ProcessName(pid, markers), ")",
                    sim ? "" : ", no simulator", ":\n");
    if (gdb.ok()) {
      absl::StrAppend(&out, Indent(GdbStacks(*gdb, pid, run_dir, gdb_limit), "    "));
    } else {
      absl::StrAppend(&out, "    gdb: not installed (the simulator's record of each wait below)\n");
    }
    if (auto it = waits.find(pid); it != waits.end()) {
      absl::StrAppend(&out, Indent(it->second, "    "));
    } else if (sim) {
      absl::StrAppend(&out, "    the simulator wrote no report (",
                      markers.at(pid).answers ? "it did not answer SIGUSR2 in time"
                                              : "the program handles SIGUSR2 itself",
                      ")\n");
    }
  }
  if (pids.empty()) out = "no process of the run is left\n";
  return out;
}

std::optional<std::string> OrphanCheck::Check(size_t index, pid_t group,
                                              const std::string& run_dir) {
  auto not_now = [&]() -> std::optional<std::string> {
    since_.erase(index);
    return std::nullopt;
  };
  // The cheap conditions first, from /proc and the markers: a simulator exited, one is left,
  // every other process only waits for its children.
  const std::map<pid_t, Marker> markers = ReadMarkers(run_dir);
  if (markers.size() < 2) return not_now();
  const std::vector<pid_t> pids = GroupProcesses(group);
  std::vector<pid_t> sims;
  for (pid_t pid : pids) {
    if ((markers.count(pid) != 0)) {
      sims.push_back(pid);
    } else if (!OnlyWaitsForChildren(pid)) {
      return not_now();  // a harness still at work may start a peer yet
    }
  }
  if (sims.size() != 1 || markers.size() - sims.size() < 1) return not_now();
  const pid_t survivor = sims[0];
  // Then its own word: every thread of the program waits in the simulator.
  const std::map<pid_t, std::string> reports =
      RequestWaits({survivor}, markers, run_dir, absl::Milliseconds(500));
  auto report = reports.find(survivor);
  if (report == reports.end()) return not_now();
  std::map<pid_t, std::string> waiting;
  std::set<pid_t> sim_threads;
  ParseWaits(report->second, &waiting, &sim_threads);
  if (waiting.empty()) return not_now();
  for (pid_t tid : NumericEntries(absl::StrCat("/proc/", survivor, "/task"))) {
    if (!(waiting.count(tid) != 0) && !(sim_threads.count(tid) != 0)) return not_now();
  }
  const absl::Time now = absl::Now();
  auto it = since_.emplace(index, now).first;
  if (now - it->second < grace_) return std::nullopt;
  since_.erase(index);
  std::string exited;
  for (const auto& [pid, marker] : markers) {
    if (pid == survivor) continue;
    absl::StrAppend(&exited, exited.empty() ? "" : ", ", marker.name, " (pid ", pid, ")");
  }
  return absl::StrCat(ProcessName(survivor, markers), " (pid ", survivor, ") waits in ",
                      waiting.begin()->second.substr(0, waiting.begin()->second.find(" for ")),
                      " after its peers exited\n", "process ", survivor, " (",
                      ProcessName(survivor, markers), "), its peers gone: ", exited, "\n",
                      Indent(report->second, "    "));
}

}  // namespace softrpma::rpma_sim
