// log_capture.h: ScopedLogCapture, which routes librpma's log messages into a list a test can
// read (through rpma_log_set_function) and restores the default function when it goes.
// testonly; one capture at a time.

#ifndef SOFTRPMA_API_TESTING_LOG_CAPTURE_H_
#define SOFTRPMA_API_TESTING_LOG_CAPTURE_H_

#include <string>
#include <vector>

#include "librpma.h"

namespace softrpma::testing {

struct CapturedLog {
  rpma_log_level level;
  std::string file;
  int line;
  std::string function;
  std::string message;
};

class ScopedLogCapture final {
 public:
  ScopedLogCapture();
  ScopedLogCapture(const ScopedLogCapture&) = delete;
  ScopedLogCapture& operator=(const ScopedLogCapture&) = delete;
  ~ScopedLogCapture();

  const std::vector<CapturedLog>& logs() const;
  // True when some message at `level` contains `text`.
  bool Contains(rpma_log_level level, const std::string& text) const;
  // True when some message is at `level` or more severe (FATAL is the most severe).
  bool AnyAtOrAbove(rpma_log_level level) const;
  // All messages, one per line, for failure output.
  std::string Dump() const;
};

}  // namespace softrpma::testing

#endif  // SOFTRPMA_API_TESTING_LOG_CAPTURE_H_
