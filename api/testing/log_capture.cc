#include "api/testing/log_capture.h"

#include <cstdarg>
#include <cstdio>

namespace softrpma::testing {
namespace {

std::vector<CapturedLog>& Captured() {
  static auto* logs = new std::vector<CapturedLog>();
  return *logs;
}

void CaptureFunction(rpma_log_level level, const char* file_name, const int line_no,
                     const char* function_name, const char* message_format, ...) {
  char message[1024];
  va_list args;
  va_start(args, message_format);
  std::vsnprintf(message, sizeof(message), message_format, args);
  va_end(args);
  Captured().push_back(CapturedLog{level, file_name != nullptr ? file_name : "", line_no,
                                   function_name != nullptr ? function_name : "", message});
}

}  // namespace

ScopedLogCapture::ScopedLogCapture() {
  Captured().clear();
  rpma_log_set_function(&CaptureFunction);
}

ScopedLogCapture::~ScopedLogCapture() {
  rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION);
  Captured().clear();
}

const std::vector<CapturedLog>& ScopedLogCapture::logs() const { return Captured(); }

bool ScopedLogCapture::Contains(rpma_log_level level, const std::string& text) const {
  for (const CapturedLog& log : Captured()) {
    if (log.level == level && log.message.find(text) != std::string::npos) return true;
  }
  return false;
}

bool ScopedLogCapture::AnyAtOrAbove(rpma_log_level level) const {
  for (const CapturedLog& log : Captured()) {
    if (log.level <= level) return true;
  }
  return false;
}

std::string ScopedLogCapture::Dump() const {
  std::string out;
  for (const CapturedLog& log : Captured()) {
    out += log.file + ":" + std::to_string(log.line) + " " + log.function + "(): " +
           log.message + "\n";
  }
  return out;
}

}  // namespace softrpma::testing
