// internal/traced_call.h: one librpma call as the simulator's trace shows it (api_call on entry
// with its arguments, api_return with its return code; simverbs/api_calls.h, docs/TRACE.md).
// Every exported function that reaches the NIC (a Backend call) opens with one:
//
//   int rpma_write(struct rpma_conn* conn, ...) {
//     TracedCall call("rpma_write", "qp=%u len=%zu flags=0x%x", QpNumber(conn), len, flags);
//     return call.Return(Write(conn, ...));
//   }
//
// The arguments are formatted only while a sink is installed; objects are named by what the
// verbs events call them (a connection by its QP number, a CQ by its handle), so that the lines
// are the same in every run of a deterministic program (no pointers but the program's own
// op_context, as wr_id already is). Getters, configuration objects and descriptors do not reach
// the NIC and are not traced.

#ifndef SOFTRPMA_API_INTERNAL_TRACED_CALL_H_
#define SOFTRPMA_API_INTERNAL_TRACED_CALL_H_

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "api/internal/errors.h"
#include "librpma.h"
#include "simverbs/api_calls.h"

namespace softrpma::api {

// A string argument as one trace word: at most 63 bytes, every blank or control byte as '_';
// "(null)" for NULL. A temporary: TracedCall(..., TraceWord(addr).c_str()).
class TraceWord {
 public:
  explicit TraceWord(const char* text) {
    if (text == nullptr) text = "(null)";
    size_t n = 0;
    for (; text[n] != '\0' && n + 1 < sizeof(word_); ++n) {
      const unsigned char c = static_cast<unsigned char>(text[n]);
      word_[n] = c <= ' ' || c == 0x7f ? '_' : static_cast<char>(c);
    }
    word_[n] = '\0';
  }
  const char* c_str() const { return word_; }

 private:
  char word_[64];
};

class TracedCall {
 public:
  // Enters `fn` (a string literal) without arguments worth showing.
  explicit TracedCall(const char* fn) : fn_(fn), sink_(CurrentApiCallSink()) {
    if (sink_ != nullptr) sink_->Enter(fn_, "");
  }
  // Enters `fn` (a string literal) with the arguments `format` (printf) makes.
  __attribute__((format(printf, 3, 4))) TracedCall(const char* fn, const char* format, ...)
      : fn_(fn), sink_(CurrentApiCallSink()) {
    if (sink_ == nullptr) return;
    char args[256];
    va_list list;
    va_start(list, format);
    const int n = std::vsnprintf(args, sizeof(args), format, list);
    va_end(list);
    sink_->Enter(fn_, n < 0 ? "" : args);
  }
  TracedCall(const TracedCall&) = delete;
  TracedCall& operator=(const TracedCall&) = delete;

  // Leaves with `ret`, and returns it.
  int Return(int ret) {
    if (sink_ != nullptr) sink_->Return(fn_, ret, RpmaErrorName(ret));
    return ret;
  }

 private:
  const char* fn_;
  ApiCallSink* sink_;
};

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_TRACED_CALL_H_
