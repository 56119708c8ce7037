#include "tests/testing/test_env.h"

#include <cstdlib>
#include <cstring>

#include "librpma.h"

namespace softrpma::testing {

const char* TestAddress() {
  const char* addr = std::getenv("SOFTRPMA_TEST_ADDR");
  return addr != nullptr && *addr != '\0' ? addr : "127.0.0.1";
}

bool SimulatedNicSelected() {
  const char* backend = std::getenv("RPMA_BACKEND");
  return backend == nullptr || *backend == '\0' || std::strcmp(backend, "sim") == 0;
}

std::string RpmaErrorName(int code) {
  switch (code) {
    case 0: return "0";
    case RPMA_E_UNKNOWN: return "RPMA_E_UNKNOWN";
    case RPMA_E_NOSUPP: return "RPMA_E_NOSUPP";
    case RPMA_E_PROVIDER: return "RPMA_E_PROVIDER";
    case RPMA_E_NOMEM: return "RPMA_E_NOMEM";
    case RPMA_E_INVAL: return "RPMA_E_INVAL";
    case RPMA_E_NO_COMPLETION: return "RPMA_E_NO_COMPLETION";
    case RPMA_E_NO_EVENT: return "RPMA_E_NO_EVENT";
    case RPMA_E_AGAIN: return "RPMA_E_AGAIN";
    case RPMA_E_SHARED_CHANNEL: return "RPMA_E_SHARED_CHANNEL";
    case RPMA_E_NOT_SHARED_CHNL: return "RPMA_E_NOT_SHARED_CHNL";
    default: return std::to_string(code);
  }
}

}  // namespace softrpma::testing
