#include "simverbs/sim/trace/trace.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "simverbs/api_calls.h"
#include "simverbs/mutex.h"
#include "simverbs/sim/sched/sched.h"

namespace softrpma::sim {
namespace trace_internal {
std::atomic<bool> g_trace_on{false};
}  // namespace trace_internal

namespace {

constexpr size_t kMaxLine = 1024;

struct Tracer {
  softrpma::Mutex mu;
  std::FILE* file ABSL_GUARDED_BY(mu) = nullptr;
  std::string path ABSL_GUARDED_BY(mu);
  bool write_failed ABSL_GUARDED_BY(mu) = false;  // said once on stderr
  uint64_t events ABSL_GUARDED_BY(mu) = 0;
  uint64_t fingerprint ABSL_GUARDED_BY(mu) = kFnvOffsetBasis;
  bool atexit_registered ABSL_GUARDED_BY(mu) = false;
};

Tracer& GetTracer() {
  static Tracer* tracer = new Tracer();  // Never destroyed: written to at exit.
  return *tracer;
}

void FinishTraceAtExit() { FinishTrace(); }

// After a write to the trace file: says once, on stderr, when the file could not be written (a
// full disk, /dev/full), since a program that exits normally would otherwise leave a trace cut
// short with nothing to tell why. `ok` is what the write returned.
void CheckWrite(Tracer& tracer, bool ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tracer.mu) {
  const int err = errno;
  if (tracer.write_failed || (ok && std::ferror(tracer.file) == 0)) return;
  tracer.write_failed = true;
  std::fprintf(stderr,
               "softrpma-sim: %s: cannot write \"%s\": %s; the trace is incomplete from event "
               "%llu on\n",
               kTraceEnvVar, tracer.path.c_str(), std::strerror(err != 0 ? err : EIO),
               static_cast<unsigned long long>(tracer.events));
}

struct NamedValue {
  int value;
  const char* name;
};

const char* Find(const NamedValue* table, size_t size, int value) {
  for (size_t i = 0; i < size; ++i) {
    if (table[i].value == value) return table[i].name;
  }
  return nullptr;
}

#define SOFTRPMA_NAMED(x) \
  { x, #x }

constexpr NamedValue kWcStatus[] = {
    SOFTRPMA_NAMED(IBV_WC_SUCCESS),
    SOFTRPMA_NAMED(IBV_WC_LOC_LEN_ERR),
    SOFTRPMA_NAMED(IBV_WC_LOC_QP_OP_ERR),
    SOFTRPMA_NAMED(IBV_WC_LOC_EEC_OP_ERR),
    SOFTRPMA_NAMED(IBV_WC_LOC_PROT_ERR),
    SOFTRPMA_NAMED(IBV_WC_WR_FLUSH_ERR),
    SOFTRPMA_NAMED(IBV_WC_MW_BIND_ERR),
    SOFTRPMA_NAMED(IBV_WC_BAD_RESP_ERR),
    SOFTRPMA_NAMED(IBV_WC_LOC_ACCESS_ERR),
    SOFTRPMA_NAMED(IBV_WC_REM_INV_REQ_ERR),
    SOFTRPMA_NAMED(IBV_WC_REM_ACCESS_ERR),
    SOFTRPMA_NAMED(IBV_WC_REM_OP_ERR),
    SOFTRPMA_NAMED(IBV_WC_RETRY_EXC_ERR),
    SOFTRPMA_NAMED(IBV_WC_RNR_RETRY_EXC_ERR),
    SOFTRPMA_NAMED(IBV_WC_LOC_RDD_VIOL_ERR),
    SOFTRPMA_NAMED(IBV_WC_REM_INV_RD_REQ_ERR),
    SOFTRPMA_NAMED(IBV_WC_REM_ABORT_ERR),
    SOFTRPMA_NAMED(IBV_WC_INV_EECN_ERR),
    SOFTRPMA_NAMED(IBV_WC_INV_EEC_STATE_ERR),
    SOFTRPMA_NAMED(IBV_WC_FATAL_ERR),
    SOFTRPMA_NAMED(IBV_WC_RESP_TIMEOUT_ERR),
    SOFTRPMA_NAMED(IBV_WC_GENERAL_ERR),
    SOFTRPMA_NAMED(IBV_WC_TM_ERR),
    SOFTRPMA_NAMED(IBV_WC_TM_RNDV_INCOMPLETE),
};

constexpr NamedValue kWcOpcode[] = {
    SOFTRPMA_NAMED(IBV_WC_SEND),
    SOFTRPMA_NAMED(IBV_WC_RDMA_WRITE),
    SOFTRPMA_NAMED(IBV_WC_RDMA_READ),
    SOFTRPMA_NAMED(IBV_WC_COMP_SWAP),
    SOFTRPMA_NAMED(IBV_WC_FETCH_ADD),
    SOFTRPMA_NAMED(IBV_WC_BIND_MW),
    SOFTRPMA_NAMED(IBV_WC_LOCAL_INV),
    SOFTRPMA_NAMED(IBV_WC_TSO),
    SOFTRPMA_NAMED(IBV_WC_ATOMIC_WRITE),
    SOFTRPMA_NAMED(IBV_WC_RECV),
    SOFTRPMA_NAMED(IBV_WC_RECV_RDMA_WITH_IMM),
};

constexpr NamedValue kWrOpcode[] = {
    SOFTRPMA_NAMED(IBV_WR_RDMA_WRITE),
    SOFTRPMA_NAMED(IBV_WR_RDMA_WRITE_WITH_IMM),
    SOFTRPMA_NAMED(IBV_WR_SEND),
    SOFTRPMA_NAMED(IBV_WR_SEND_WITH_IMM),
    SOFTRPMA_NAMED(IBV_WR_RDMA_READ),
    SOFTRPMA_NAMED(IBV_WR_ATOMIC_CMP_AND_SWP),
    SOFTRPMA_NAMED(IBV_WR_ATOMIC_FETCH_AND_ADD),
    SOFTRPMA_NAMED(IBV_WR_LOCAL_INV),
    SOFTRPMA_NAMED(IBV_WR_BIND_MW),
    SOFTRPMA_NAMED(IBV_WR_SEND_WITH_INV),
    SOFTRPMA_NAMED(IBV_WR_TSO),
    SOFTRPMA_NAMED(IBV_WR_ATOMIC_WRITE),
};

constexpr NamedValue kQpState[] = {
    SOFTRPMA_NAMED(IBV_QPS_RESET), SOFTRPMA_NAMED(IBV_QPS_INIT), SOFTRPMA_NAMED(IBV_QPS_RTR),
    SOFTRPMA_NAMED(IBV_QPS_RTS),   SOFTRPMA_NAMED(IBV_QPS_SQD),  SOFTRPMA_NAMED(IBV_QPS_SQE),
    SOFTRPMA_NAMED(IBV_QPS_ERR),
};

constexpr NamedValue kCmEvent[] = {
    SOFTRPMA_NAMED(RDMA_CM_EVENT_ADDR_RESOLVED),   SOFTRPMA_NAMED(RDMA_CM_EVENT_ADDR_ERROR),
    SOFTRPMA_NAMED(RDMA_CM_EVENT_ROUTE_RESOLVED),  SOFTRPMA_NAMED(RDMA_CM_EVENT_ROUTE_ERROR),
    SOFTRPMA_NAMED(RDMA_CM_EVENT_CONNECT_REQUEST), SOFTRPMA_NAMED(RDMA_CM_EVENT_CONNECT_RESPONSE),
    SOFTRPMA_NAMED(RDMA_CM_EVENT_CONNECT_ERROR),   SOFTRPMA_NAMED(RDMA_CM_EVENT_UNREACHABLE),
    SOFTRPMA_NAMED(RDMA_CM_EVENT_REJECTED),        SOFTRPMA_NAMED(RDMA_CM_EVENT_ESTABLISHED),
    SOFTRPMA_NAMED(RDMA_CM_EVENT_DISCONNECTED),    SOFTRPMA_NAMED(RDMA_CM_EVENT_DEVICE_REMOVAL),
    SOFTRPMA_NAMED(RDMA_CM_EVENT_MULTICAST_JOIN),  SOFTRPMA_NAMED(RDMA_CM_EVENT_MULTICAST_ERROR),
    SOFTRPMA_NAMED(RDMA_CM_EVENT_ADDR_CHANGE),     SOFTRPMA_NAMED(RDMA_CM_EVENT_TIMEWAIT_EXIT),
};

#undef SOFTRPMA_NAMED

template <size_t N>
const char* FindIn(const NamedValue (&table)[N], int value) {
  return Find(table, N, value);
}


// The librpma API layer's calls (simverbs/api_calls.h) as api_call / api_return events. A thread
// is numbered at its first call (1, 2, ... in the order threads first call librpma), so that a
// single-threaded program's lines are the same in every run.
class ApiTraceSink final : public ApiCallSink {
 public:
  void Enter(const char* fn, const char* args) override {
    TraceEvent("api_call thread=%u fn=%s%s%s", ThreadNumber(), fn, *args != '\0' ? " " : "", args);
  }
  void Return(const char* fn, int ret, const char* ret_name) override {
    if (ret_name != nullptr) {
      TraceEvent("api_return thread=%u fn=%s ret=%s", ThreadNumber(), fn, ret_name);
    } else {
      TraceEvent("api_return thread=%u fn=%s ret=%d", ThreadNumber(), fn, ret);
    }
  }

 private:
  static unsigned ThreadNumber() {
    static std::atomic<unsigned> next{1};
    thread_local unsigned number = next.fetch_add(1, std::memory_order_relaxed);
    return number;
  }
};

ApiTraceSink& GetApiTraceSink() {
  static ApiTraceSink* sink = new ApiTraceSink;  // never destroyed (api_calls.h)
  return *sink;
}
}  // namespace

uint64_t Fnv1a64(absl::string_view bytes, uint64_t hash) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

void TraceEvent(const char* format, ...) {
  char text[kMaxLine];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  if (n < 0) return;
  Tracer& tracer = GetTracer();
  softrpma::MutexLock lock(&tracer.mu);
  if (tracer.file == nullptr) return;
  char line[kMaxLine + 48];
  const int length = std::snprintf(line, sizeof(line), "%llu %llu %s\n",
                                   static_cast<unsigned long long>(tracer.events + 1),
                                   static_cast<unsigned long long>(GlobalClock().now_ns()), text);
  if (length < 0) return;
  const size_t size = std::min(static_cast<size_t>(length), sizeof(line) - 1);
  line[size - 1] = '\n';  // a cut line still ends its line
  ++tracer.events;
  tracer.fingerprint = Fnv1a64(absl::string_view(line, size), tracer.fingerprint);
  errno = 0;
  CheckWrite(tracer, std::fwrite(line, 1, size, tracer.file) == size);
}

absl::Status StartTrace(const std::string& path, uint64_t seed, absl::string_view faults,
                        absl::string_view process) {
  Tracer& tracer = GetTracer();
  softrpma::MutexLock lock(&tracer.mu);
  if (tracer.file != nullptr) return absl::FailedPreconditionError("a trace is open already");
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    const int err = errno;
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open \"", path, "\": ", std::strerror(err)));
  }
  std::setvbuf(file, nullptr, _IOLBF, 1 << 16);
  tracer.file = file;
  tracer.path = path;
  tracer.write_failed = false;
  tracer.events = 0;
  tracer.fingerprint = kFnvOffsetBasis;
  errno = 0;
  CheckWrite(tracer,
             std::fprintf(file, "softrpma-sim-trace %d\nseed 0x%016llx\nfaults %s\nprocess %s\n",
                          kTraceFormatVersion, static_cast<unsigned long long>(seed),
                          faults.empty() ? "-" : std::string(faults).c_str(),
                          FileNamePart(process).c_str()) >= 0);
  if (!tracer.atexit_registered) {
    tracer.atexit_registered = true;
    std::atexit(&FinishTraceAtExit);
  }
  trace_internal::g_trace_on.store(true, std::memory_order_release);
  SetApiCallSink(&GetApiTraceSink());
  return absl::OkStatus();
}

void FinishTrace() {
  Tracer& tracer = GetTracer();
  softrpma::MutexLock lock(&tracer.mu);
  if (tracer.file == nullptr) return;
  trace_internal::g_trace_on.store(false, std::memory_order_release);
  SetApiCallSink(nullptr);
  errno = 0;
  CheckWrite(tracer, std::fprintf(tracer.file, "end events=%llu fingerprint=0x%016llx\n",
                                  static_cast<unsigned long long>(tracer.events),
                                  static_cast<unsigned long long>(tracer.fingerprint)) >= 0 &&
                         std::fflush(tracer.file) == 0);
  std::fclose(tracer.file);
  tracer.file = nullptr;
}

void AbandonTraceInChild() {
  trace_internal::g_trace_on.store(false, std::memory_order_release);
  SetApiCallSink(nullptr);
  Tracer& tracer = GetTracer();
  // No lock: this runs in the child right after fork(), with one thread, and the parent's
  // FILE must not be written or flushed from here.
  if (tracer.file != nullptr) close(fileno(tracer.file));
  tracer.file = nullptr;
}

std::string TracePathForProcess(const std::string& path, bool forked_child,
                                absl::string_view role) {
  const std::string pid = std::to_string(static_cast<long>(getpid()));
  std::string out;
  bool has_pid = false;
  for (size_t i = 0; i < path.size(); ++i) {
    const char next = i + 1 < path.size() ? path[i + 1] : '\0';
    if (path[i] == '%' && next == 'p') {
      out += pid;
      has_pid = true;
      ++i;
    } else if (path[i] == '%' && next == 'r') {
      out += FileNamePart(role);
      ++i;
    } else {
      out += path[i];
    }
  }
  if (forked_child && !has_pid) out += "." + pid;
  return out;
}

std::string FileNamePart(absl::string_view name) {
  if (name.empty()) return "_";
  std::string out(name);
  for (char& c : out) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!safe) c = '_';
  }
  return out;
}

uint64_t TraceEventCount() {
  Tracer& tracer = GetTracer();
  softrpma::MutexLock lock(&tracer.mu);
  return tracer.events;
}

uint64_t TraceFingerprint() {
  Tracer& tracer = GetTracer();
  softrpma::MutexLock lock(&tracer.mu);
  return tracer.fingerprint;
}

const char* WcStatusName(int status) { return FindIn(kWcStatus, status); }
const char* WcOpcodeName(int opcode) { return FindIn(kWcOpcode, opcode); }
const char* WrOpcodeName(int opcode) { return FindIn(kWrOpcode, opcode); }
const char* QpStateName(int state) { return FindIn(kQpState, state); }
const char* CmEventName(int event) { return FindIn(kCmEvent, event); }

std::optional<ibv_wc_status> WcStatusByName(absl::string_view name) {
  for (const NamedValue& entry : kWcStatus) {
    if (name == entry.name) return static_cast<ibv_wc_status>(entry.value);
  }
  return std::nullopt;
}

std::string NameOr(const char* name, int value) {
  return name != nullptr ? std::string(name) : absl::StrCat(value);
}

}  // namespace softrpma::sim
