#include "simverbs/api_calls.h"

namespace softrpma::api_calls_internal {

std::atomic<ApiCallSink*> g_sink{nullptr};

}  // namespace softrpma::api_calls_internal
