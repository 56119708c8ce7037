// err.cc: rpma_err_2str(3).

#include "librpma.h"

extern "C" const char* rpma_err_2str(int ret) {
  switch (ret) {
    case 0:
      return "Success";
    case RPMA_E_UNKNOWN:
      return "Unknown error (see the log for its cause)";
    case RPMA_E_NOSUPP:
      return "Not supported";
    case RPMA_E_PROVIDER:
      return "Provider error: an RDMA verbs or connection manager call failed (see the log)";
    case RPMA_E_NOMEM:
      return "Out of memory";
    case RPMA_E_INVAL:
      return "Invalid argument";
    case RPMA_E_NO_COMPLETION:
      return "No completion available";
    case RPMA_E_NO_EVENT:
      return "No next event available";
    case RPMA_E_AGAIN:
      return "Temporary error, try again";
    case RPMA_E_SHARED_CHANNEL:
      return "The completion channel is shared between CQs: wait on the connection";
    case RPMA_E_NOT_SHARED_CHNL:
      return "The completion channel is not shared: wait on the CQ";
    default:
      return "Unknown error";
  }
}
