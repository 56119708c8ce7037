// internal/log.h: the logging macros every api/*.cc uses (RPMA_LOG_ERROR(...) etc.), on top of
// the public log API of librpma.h (rpma_log_set_threshold, rpma_log_set_function).
//
// A message is built only when its level passes RPMA_LOG_THRESHOLD; it then goes to the logging
// function in force (the user's, or the default one of log.cc) with this file's name, line and
// function, exactly as rpma_log_set_function(3) describes. Nothing in api/ prints directly.
//
// Thread-safe: the threshold and the function are atomics.

#ifndef SOFTRPMA_API_INTERNAL_LOG_H_
#define SOFTRPMA_API_INTERNAL_LOG_H_

#include "librpma.h"

namespace softrpma::api {

// True when a message of `level` passes RPMA_LOG_THRESHOLD (and a level is never DISABLED).
bool LogEnabled(rpma_log_level level);

// The logging function in force: the user's, or the built-in default. Never nullptr.
rpma_log_function* CurrentLogFunction();

// Never called: lets the compiler check the printf format of a RPMA_LOG() call.
inline void LogFormatCheck(const char* /*format*/, ...) __attribute__((format(printf, 1, 2)));
inline void LogFormatCheck(const char* /*format*/, ...) {}

// A readable text for a Backend error value (a positive errno or kNoErrno), e.g.
// "Cannot allocate memory (errno 12)" or "failed without an errno". Fits in kErrnoTextSize.
inline constexpr int kErrnoTextSize = 96;
struct ErrnoText {
  char text[kErrnoTextSize];
};
ErrnoText DescribeBackendError(int err);

}  // namespace softrpma::api

// RPMA_LOG(level, format, ...): logs a printf-style message from the calling function.
#define RPMA_LOG(level, ...)                                                                 \
  do {                                                                                       \
    if (::softrpma::api::LogEnabled(level)) {                                                \
      if (false) ::softrpma::api::LogFormatCheck(__VA_ARGS__);                               \
      ::softrpma::api::CurrentLogFunction()((level), __FILE__, __LINE__, __func__, __VA_ARGS__); \
    }                                                                                        \
  } while (0)

#define RPMA_LOG_FATAL(...) RPMA_LOG(RPMA_LOG_LEVEL_FATAL, __VA_ARGS__)
#define RPMA_LOG_ERROR(...) RPMA_LOG(RPMA_LOG_LEVEL_ERROR, __VA_ARGS__)
#define RPMA_LOG_WARNING(...) RPMA_LOG(RPMA_LOG_LEVEL_WARNING, __VA_ARGS__)
#define RPMA_LOG_NOTICE(...) RPMA_LOG(RPMA_LOG_LEVEL_NOTICE, __VA_ARGS__)
#define RPMA_LOG_INFO(...) RPMA_LOG(RPMA_LOG_LEVEL_INFO, __VA_ARGS__)
#define RPMA_LOG_DEBUG(...) RPMA_LOG(RPMA_LOG_LEVEL_DEBUG, __VA_ARGS__)

// RPMA_LOG_PROVIDER_ERROR(err, "ibv_alloc_pd"): the one ERROR line for a failed Backend call,
// naming the verbs / rdma_cm call and its errno.
#define RPMA_LOG_PROVIDER_ERROR(err, call)                                   \
  RPMA_LOG_ERROR("%s() failed: %s", (call),                                  \
                 ::softrpma::api::DescribeBackendError(err).text)

#endif  // SOFTRPMA_API_INTERNAL_LOG_H_
