// log.cc: the librpma logging API (rpma_log_set_threshold(3), rpma_log_get_threshold(3),
// rpma_log_set_function(3)) and the default logging function.
//
// State is three atomics, so every call is thread-safe and none can fail with RPMA_E_AGAIN.

#include <netdb.h>
#include <syslog.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "api/internal/log.h"
#include "librpma.h"
#include "simverbs/backend.h"

namespace softrpma::api {
namespace {

// Defaults of rpma_log_set_threshold(3): WARNING for the main threshold, DISABLED for the
// auxiliary one.
std::atomic<int> g_thresholds[RPMA_LOG_THRESHOLD_MAX] = {
    {RPMA_LOG_LEVEL_WARNING},
    {RPMA_LOG_DISABLED},
};
std::atomic<rpma_log_function*> g_log_function{nullptr};  // nullptr: the default function

int SyslogPriority(rpma_log_level level) {
  switch (level) {
    case RPMA_LOG_LEVEL_FATAL: return LOG_CRIT;
    case RPMA_LOG_LEVEL_ERROR: return LOG_ERR;
    case RPMA_LOG_LEVEL_WARNING: return LOG_WARNING;
    case RPMA_LOG_LEVEL_NOTICE: return LOG_NOTICE;
    case RPMA_LOG_LEVEL_INFO: return LOG_INFO;
    default: return LOG_DEBUG;
  }
}

bool ValidThreshold(rpma_log_threshold threshold) {
  return threshold == RPMA_LOG_THRESHOLD || threshold == RPMA_LOG_THRESHOLD_AUX;
}

bool ValidLevel(rpma_log_level level) {
  return level >= RPMA_LOG_DISABLED && level <= RPMA_LOG_LEVEL_DEBUG;
}

// The built-in logging function: syslog(3) gets every message that reaches it (the main
// threshold was applied by the caller); stderr gets those at or below the auxiliary threshold,
// as one line "file:line function(): message".
void DefaultLogFunction(rpma_log_level level, const char* file_name, const int line_no,
                        const char* function_name, const char* message_format, ...)
    __attribute__((format(printf, 5, 6)));
void DefaultLogFunction(rpma_log_level level, const char* file_name, const int line_no,
                        const char* function_name, const char* message_format, ...) {
  if (level == RPMA_LOG_DISABLED || message_format == nullptr) return;
  char message[1024];
  va_list args;
  va_start(args, message_format);
  std::vsnprintf(message, sizeof(message), message_format, args);
  va_end(args);

  char line[1280];
  if (file_name != nullptr) {
    std::snprintf(line, sizeof(line), "%s:%d %s(): %s", file_name, line_no,
                  function_name != nullptr ? function_name : "?", message);
  } else {
    std::snprintf(line, sizeof(line), "%s", message);
  }
  syslog(SyslogPriority(level), "%s", line);
  if (level <= g_thresholds[RPMA_LOG_THRESHOLD_AUX].load(std::memory_order_relaxed)) {
    std::fprintf(stderr, "%s\n", line);
  }
}

// As librpma's default logging: the library opens its syslog connection when it is loaded, with
// ident "rpma", the PID in each line and facility LOCAL7, and closes it when it is unloaded.
__attribute__((constructor)) void OpenSyslog() { openlog("rpma", LOG_PID, LOG_LOCAL7); }
__attribute__((destructor)) void CloseSyslog() { closelog(); }

}  // namespace

bool LogEnabled(rpma_log_level level) {
  return level != RPMA_LOG_DISABLED &&
         level <= g_thresholds[RPMA_LOG_THRESHOLD].load(std::memory_order_relaxed);
}

rpma_log_function* CurrentLogFunction() {
  rpma_log_function* function = g_log_function.load(std::memory_order_acquire);
  return function != nullptr ? function : &DefaultLogFunction;
}

ErrnoText DescribeBackendError(int err) {
  ErrnoText result;
  if (err == kNoErrno) {
    std::snprintf(result.text, sizeof(result.text), "failed without an errno");
    return result;
  }
  if (IsGaiError(err)) {  // as librpma logs rdma_getaddrinfo failures: gai_strerror(3)
    std::snprintf(result.text, sizeof(result.text), "%s (getaddrinfo error %d)",
                  gai_strerror(GaiCode(err)), GaiCode(err));
    return result;
  }
  char buffer[64];
  // The GNU strerror_r returns the text (not always in buffer).
  const char* text = strerror_r(err, buffer, sizeof(buffer));
  std::snprintf(result.text, sizeof(result.text), "%s (errno %d)", text, err);
  return result;
}

}  // namespace softrpma::api

extern "C" {

int rpma_log_set_threshold(enum rpma_log_threshold threshold, enum rpma_log_level level) {
  if (!softrpma::api::ValidThreshold(threshold) || !softrpma::api::ValidLevel(level)) {
    return RPMA_E_INVAL;
  }
  softrpma::api::g_thresholds[threshold].store(level, std::memory_order_relaxed);
  return 0;
}

int rpma_log_get_threshold(enum rpma_log_threshold threshold, enum rpma_log_level* level) {
  if (!softrpma::api::ValidThreshold(threshold) || level == nullptr) return RPMA_E_INVAL;
  *level = static_cast<rpma_log_level>(
      softrpma::api::g_thresholds[threshold].load(std::memory_order_relaxed));
  return 0;
}

int rpma_log_set_function(rpma_log_function* log_function) {
  softrpma::api::g_log_function.store(log_function, std::memory_order_release);
  return 0;
}

}  // extern "C"
