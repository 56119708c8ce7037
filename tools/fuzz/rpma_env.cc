#include "tools/fuzz/rpma_env.h"

#include <unistd.h>

#include <cstdlib>

#include "tools/fuzz/check.h"

namespace softrpma::fuzz {

void SilenceRpmaLog() {
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_DISABLED);
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_DISABLED);
}

SimListener ListenOnOwnFabric(const char* fabric_prefix, const char* addr, const char* port) {
  SimListener listener;
  listener.fabric = std::string(fabric_prefix) + "-" + std::to_string(getpid());
  setenv("RPMA_BACKEND", "sim", 1);
  setenv("RPMA_SIM_FABRIC", listener.fabric.c_str(), 1);
  SilenceRpmaLog();
  ibv_context* ctx = nullptr;
  FUZZ_CHECK(rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx) == 0);
  FUZZ_CHECK(rpma_peer_new(ctx, &listener.peer) == 0);
  FUZZ_CHECK(rpma_ep_listen(listener.peer, addr, port, &listener.ep) == 0);
  FUZZ_CHECK(rpma_ep_get_fd(listener.ep, &listener.ep_fd) == 0);
  return listener;
}

}  // namespace softrpma::fuzz
