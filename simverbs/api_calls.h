// api_calls.h: where the librpma API layer (api/) reports its calls, so that the simulated NIC's
// trace shows them around the verbs calls they make (docs/TRACE.md: api_call, api_return).
//
// THE MODEL: at most one sink, installed by whoever records (the simulator, while its trace is
// open); none by default, and never with RPMA_BACKEND=ibverbs. The API layer looks it up once
// per call (one acquire load: no cost worth measuring on the data path when it is unset), tells it
// the call's name and arguments on entry and its return code on the way out (api/internal/
// traced_call.h). A sink, once installed, is never destroyed: a call that started while it was
// installed may still report to it after it was uninstalled.
//
// Thread-safety: every function is thread-safe; a sink's methods are called from any thread.

#ifndef SOFTRPMA_SIMVERBS_API_CALLS_H_
#define SOFTRPMA_SIMVERBS_API_CALLS_H_

#include <atomic>

namespace softrpma {

class ApiCallSink {
 public:
  // The calling thread entered `fn` (e.g. "rpma_write") with `args`: "key=value ..." without
  // blanks in a value, or "".
  virtual void Enter(const char* fn, const char* args) = 0;
  // The calling thread returns `ret` from `fn`; `ret_name` is its librpma name ("RPMA_E_INVAL"),
  // or nullptr for a value without one (0, a count).
  virtual void Return(const char* fn, int ret, const char* ret_name) = 0;

 protected:
  ~ApiCallSink() = default;  // never destroyed through this interface (see above)
};

namespace api_calls_internal {
extern std::atomic<ApiCallSink*> g_sink;
}  // namespace api_calls_internal

// Installs `sink` (nullptr: none).
inline void SetApiCallSink(ApiCallSink* sink) {
  api_calls_internal::g_sink.store(sink, std::memory_order_release);
}

// The sink, or nullptr.
inline ApiCallSink* CurrentApiCallSink() {
  return api_calls_internal::g_sink.load(std::memory_order_acquire);
}

}  // namespace softrpma

#endif  // SOFTRPMA_SIMVERBS_API_CALLS_H_
