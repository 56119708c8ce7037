#include "simverbs/sim/trace/process_end.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace softrpma::sim {
namespace {

// Everything the handlers read is prepared here when watching starts: a handler may only call
// async-signal-safe functions (no malloc, no stdio, no std::string).
char g_dir[3072];
char g_prog[256];
bool g_installed = false;
// The process has AddressSanitizer's runtime (so LeakSanitizer checks it at exit).
bool g_asan = false;

// glibc's abort message: `struct abort_msg_s { unsigned int size; char msg[]; }`, set by
// __libc_message (malloc's checks) and __assert_fail before they abort. GLIBC_PRIVATE, so looked
// up at run time; null when the C library has none (musl): the record then has no message.
struct AbortMsg {
  unsigned int size;
  char msg[1];
};
AbortMsg* const* g_abort_msg = nullptr;

// The headline of an AddressSanitizer report, kept for the signal record that may follow it
// (abort_on_error=1) and written at once (ASan then exits with _exit: no on_exit record).
char g_sanitizer[512];

constexpr int kWatchedSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};

const char* WatchedSignalName(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
  }
  return "signal";
}

// A record being built in a fixed buffer; what does not fit is cut (a line stays a line).
class Record {
 public:
  void Add(const char* text) { Add(text, strlen(text)); }
  // Copies `text` as one line's content: control characters (a message's newline) become blanks.
  void Add(const char* text, size_t size) {
    for (size_t i = 0; i < size && used_ < sizeof(buf_) - 1; ++i) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      buf_[used_++] = c < 0x20 || c == 0x7f ? ' ' : static_cast<char>(c);
    }
  }
  void AddNumber(unsigned long long n) {
    char digits[24];
    int k = 0;
    do {
      digits[k++] = static_cast<char>('0' + n % 10);
      n /= 10;
    } while (n != 0);
    while (k > 0 && used_ < sizeof(buf_) - 1) buf_[used_++] = digits[--k];
  }
  void AddLineEnd() {
    // Trailing blanks (the message's own newline) are dropped; there is always room for '\n'.
    while (used_ > 0 && buf_[used_ - 1] == ' ') --used_;
    buf_[used_++] = '\n';
  }
  const char* data() const { return buf_; }
  size_t size() const { return used_; }

 private:
  char buf_[2048];
  size_t used_ = 0;
};

// `<dir>/end.<pid>.txt` into `path` (sized for g_dir plus the name).
void EndPath(char* path, size_t size) {
  Record r;  // only for its number formatting
  r.AddNumber(static_cast<unsigned long long>(getpid()));
  const size_t dir_len = strlen(g_dir);
  const char prefix[] = "/end.";
  const char suffix[] = ".txt";
  if (dir_len + sizeof(prefix) + r.size() + sizeof(suffix) > size) {
    path[0] = '\0';
    return;
  }
  char* p = path;
  memcpy(p, g_dir, dir_len);
  p += dir_len;
  memcpy(p, prefix, sizeof(prefix) - 1);
  p += sizeof(prefix) - 1;
  memcpy(p, r.data(), r.size());
  p += r.size();
  memcpy(p, suffix, sizeof(suffix));
}

// The record's common head: marker, pid, program, time.
void AddHead(Record* r) {
  r->Add("softrpma-sim-end=1");
  r->AddLineEnd();
  r->Add("pid=");
  r->AddNumber(static_cast<unsigned long long>(getpid()));
  r->AddLineEnd();
  r->Add("prog=");
  r->Add(g_prog);
  r->AddLineEnd();
  if (g_asan) {
    r->Add("asan=1");
    r->AddLineEnd();
  }
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  r->Add("time_ns=");
  r->AddNumber(static_cast<unsigned long long>(now.tv_sec) * 1000000000ull +
               static_cast<unsigned long long>(now.tv_nsec));
  r->AddLineEnd();
}

void AddSanitizer(Record* r) {
  if (g_sanitizer[0] == '\0') return;
  r->Add("sanitizer=");
  r->Add(g_sanitizer);
  r->AddLineEnd();
}

// Writes `r` as this process's record. `replace`: a crash's record replaces an exit's; an exit's
// never replaces one that exists.
void WriteRecord(const Record& r, bool replace) {
  char path[sizeof(g_dir) + 64];
  EndPath(path, sizeof(path));
  if (path[0] == '\0') return;
  const int saved_errno = errno;  // a handler must leave errno as it found it
  const int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (replace ? O_TRUNC : O_EXCL), 0644);
  if (fd >= 0) {
    ssize_t ignored = write(fd, r.data(), r.size());
    (void)ignored;
    close(fd);
  }
  errno = saved_errno;
}

void OnFatalSignal(int sig) {
  Record r;
  AddHead(&r);
  r.Add("signal=");
  r.Add(WatchedSignalName(sig));
  r.AddLineEnd();
  if (sig == SIGABRT && g_abort_msg != nullptr) {
    const AbortMsg* msg = *g_abort_msg;
    if (msg != nullptr) {
      r.Add("message=");
      r.Add(msg->msg, strnlen(msg->msg, 1024));
      r.AddLineEnd();
    }
  }
  AddSanitizer(&r);
  WriteRecord(r, /*replace=*/true);
  // Die by the signal, as without us: the default action, raised again (pending while this
  // handler runs, delivered when it returns; a faulting instruction would fault again anyway).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

void OnExit(int status, void*) {
  Record r;
  AddHead(&r);
  r.Add("exit=");
  r.AddNumber(static_cast<unsigned long long>(status & 0xff));
  r.AddLineEnd();
  AddSanitizer(&r);
  WriteRecord(r, /*replace=*/false);
}

// ASan's error report callback: the whole report; its "ERROR: " line is the headline.
void OnAsanReport(const char* report) {
  const char* at = strstr(report, "ERROR: ");
  if (at == nullptr) at = report;
  size_t n = 0;
  while (at[n] != '\0' && at[n] != '\n' && n < sizeof(g_sanitizer) - 1) ++n;
  memcpy(g_sanitizer, at, n);
  g_sanitizer[n] = '\0';
  Record r;
  AddHead(&r);
  AddSanitizer(&r);
  WriteRecord(r, /*replace=*/true);
}

}  // namespace

absl::Status WatchProcessEnd(const std::string& dir, const std::string& prog) {
  if (g_installed) return absl::OkStatus();
  struct stat st;
  if (dir.size() >= sizeof(g_dir) || stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kRunDirEnvVar, ": \"", dir, "\" is not a writable directory (rpma-sim sets it per run)"));
  }
  memcpy(g_dir, dir.c_str(), dir.size() + 1);
  const size_t prog_len = std::min(prog.size(), sizeof(g_prog) - 1);
  memcpy(g_prog, prog.data(), prog_len);
  g_prog[prog_len] = '\0';
  g_abort_msg = reinterpret_cast<AbortMsg* const*>(dlsym(RTLD_DEFAULT, "__abort_msg"));
  using SetReportCallback = void (*)(void (*)(const char*));
  if (auto set = reinterpret_cast<SetReportCallback>(
          dlsym(RTLD_DEFAULT, "__asan_set_error_report_callback"))) {
    set(&OnAsanReport);
    g_asan = true;
  }
  for (int sig : kWatchedSignals) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0) continue;
    // The program's own handler (or a sanitizer's, or SIG_IGN) is left alone: replacing it
    // would change what the program does on that signal.
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = &OnFatalSignal;
    sigemptyset(&sa.sa_mask);
    // SA_ONSTACK: on the program's alternate stack when it has one (a stack overflow).
    sa.sa_flags = SA_ONSTACK;
    sigaction(sig, &sa, nullptr);
  }
  on_exit(&OnExit, nullptr);
  g_installed = true;
  return absl::OkStatus();
}

}  // namespace softrpma::sim
