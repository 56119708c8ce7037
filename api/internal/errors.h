// internal/errors.h: the one place where a Backend failure (a positive errno or kNoErrno, see
// simverbs/backend.h) becomes an RPMA_E_* code. Each librpma function picks the mapping its man
// page documents; none writes its own switch.

#ifndef SOFTRPMA_API_INTERNAL_ERRORS_H_
#define SOFTRPMA_API_INTERNAL_ERRORS_H_

#include <cerrno>

#include "librpma.h"
#include "simverbs/backend.h"

namespace softrpma::api {

// How a failed Backend call maps to an RPMA_E_* code. Every failure is RPMA_E_PROVIDER except:
struct ErrorMapping {
  bool enomem_is_nomem = false;     // ENOMEM -> RPMA_E_NOMEM (where the man page says so)
  bool no_errno_is_unknown = false;  // kNoErrno -> RPMA_E_UNKNOWN (where the man page says so)
  // EOPNOTSUPP (== ENOTSUP on Linux) -> RPMA_E_NOSUPP ("not supported by the system").
  bool eopnotsupp_is_nosupp = false;
  // EFAULT and EINVAL -> RPMA_E_INVAL (the provider rejected the caller's arguments).
  bool efault_einval_is_inval = false;
};

// The RPMA_E_* code for Backend error `err`. REQUIRES: err != 0.
inline int RpmaErrorFromBackend(int err, ErrorMapping mapping = {}) {
  if (err == ENOMEM && mapping.enomem_is_nomem) return RPMA_E_NOMEM;
  if (err == kNoErrno && mapping.no_errno_is_unknown) return RPMA_E_UNKNOWN;
  if (err == EOPNOTSUPP && mapping.eopnotsupp_is_nosupp) return RPMA_E_NOSUPP;
  if ((err == EFAULT || err == EINVAL) && mapping.efault_einval_is_inval) return RPMA_E_INVAL;
  return RPMA_E_PROVIDER;
}

// The name of an RPMA_E_* code, or nullptr for any other value.
inline const char* RpmaErrorName(int ret) {
  switch (ret) {
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
    default: return nullptr;
  }
}

// Keeps the first error of a sequence of releases: `*first` is set to `ret` unless it already
// holds an error.
inline void KeepFirstError(int* first, int ret) {
  if (*first == 0) *first = ret;
}

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_ERRORS_H_
