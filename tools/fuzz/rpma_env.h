// rpma_env.h: what the fuzz targets of librpma set up once: a quiet log, and a listening
// endpoint on the simulated NIC that no other process can reach.

#ifndef SOFTRPMA_TOOLS_FUZZ_RPMA_ENV_H_
#define SOFTRPMA_TOOLS_FUZZ_RPMA_ENV_H_

#include <string>

#include "librpma.h"

namespace softrpma::fuzz {

// Turns librpma's log off (a fuzzer would print lines per input).
void SilenceRpmaLog();

struct SimListener {
  rpma_peer* peer = nullptr;
  rpma_ep* ep = nullptr;
  int ep_fd = -1;      // rpma_ep_get_fd's
  std::string fabric;  // "<prefix>-<pid>"
};

// Selects the simulated NIC (RPMA_BACKEND=sim) on a fabric of this process's own
// (RPMA_SIM_FABRIC=<fabric_prefix>-<pid>: fuzzers side by side never meet, docs/FABRIC.md),
// silences the log and listens at addr:port. Aborts when any step fails.
// REQUIRES: called once, before any other librpma call of the process.
SimListener ListenOnOwnFabric(const char* fabric_prefix, const char* addr, const char* port);

}  // namespace softrpma::fuzz

#endif  // SOFTRPMA_TOOLS_FUZZ_RPMA_ENV_H_
