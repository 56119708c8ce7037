// verbs_errors.h: the error conventions of libibverbs and librdmacm, each converted into the
// Backend's one convention (simverbs/backend.h: 0, a positive errno value, or kNoErrno) by
// exactly one function. Internal to the ibverbs backend.
//
// The conventions, by the kind of call:
//   * create-style (ibv_alloc_pd, ibv_create_cq, rdma_create_event_channel, ...): the new object,
//     or NULL with errno set                                               -> ConvertNullErrno;
//   * post / notify / destroy (ibv_post_send, ibv_req_notify_cq, ibv_dealloc_pd, ...): 0, or the
//     errno value itself                                                   -> ConvertReturnedErrno;
//   * ibv_get_cq_event and every int-returning rdma_* call: 0, or -1 with errno set
//                                                                          -> ConvertMinusOneErrno;
//   * rdma_getaddrinfo: 0, or -1 with errno set to an errno value or, when getaddrinfo(3)
//     failed, to its (negative) EAI_* code                                 -> ConvertGetaddrinfo;
//   * ibv_poll_cq: a count, or a negative number (no errno)                -> ConvertNegativeCount.
//
// The errno-reading helpers take the call itself (a callable), clear errno before it and read
// errno right after it, so a stale errno is never reported and nothing runs in between.
//
// Thread-safety: errno is per thread; every function here is safe to call from any thread.

#ifndef SOFTRPMA_SIMVERBS_IBVERBS_VERBS_ERRORS_H_
#define SOFTRPMA_SIMVERBS_IBVERBS_VERBS_ERRORS_H_

#include <cerrno>

#include "simverbs/backend.h"

namespace softrpma::ibverbs::internal {

// `err` as the Backend reports a failure: itself when it is a positive errno value, else
// kNoErrno. (errno 0, and negative values such as the EAI_* code that rdma_getaddrinfo leaves in
// errno when name resolution fails, are no errno value.)
inline int AsBackendErrno(int err) { return err > 0 ? err : kNoErrno; }

// Runs `call`, a create-style call returning T* (NULL + errno on failure). On success writes the
// object to *out and returns 0; on failure leaves *out alone and returns the errno or kNoErrno.
template <typename Call, typename T>
int ConvertNullErrno(Call&& call, T** out) {
  errno = 0;
  T* const result = call();
  const int err = errno;
  if (result == nullptr) return AsBackendErrno(err);
  *out = result;
  return 0;
}

// `ret`, the result of a call that returns 0 or an errno value, in the Backend's convention. A
// negative `ret` is outside that call's contract and so has no errno value: kNoErrno.
inline int ConvertReturnedErrno(int ret) { return ret == 0 ? 0 : AsBackendErrno(ret); }

// Runs `call`, which returns 0 on success and -1 (any nonzero value) with errno set on failure;
// returns 0, or the errno or kNoErrno.
template <typename Call>
int ConvertMinusOneErrno(Call&& call) {
  errno = 0;
  const int ret = call();
  const int err = errno;
  return ret == 0 ? 0 : AsBackendErrno(err);
}

// Runs `call` (rdma_getaddrinfo) as ConvertMinusOneErrno does, except that a negative errno is
// getaddrinfo's EAI_* code: GaiError(code) (backend.h), so that its text (gai_strerror) is kept.
template <typename Call>
int ConvertGetaddrinfo(Call&& call) {
  errno = 0;
  const int ret = call();
  const int err = errno;
  if (ret == 0) return 0;
  if (err < 0 && IsGaiError(GaiError(err))) return GaiError(err);
  return AsBackendErrno(err);
}

// `ret`, the result of ibv_poll_cq (a count of completions, or negative on failure without an
// errno value). On success writes the count to *count and returns 0; on failure leaves *count
// alone and returns kNoErrno.
inline int ConvertNegativeCount(int ret, int* count) {
  if (ret < 0) return kNoErrno;
  *count = ret;
  return 0;
}

}  // namespace softrpma::ibverbs::internal

#endif  // SOFTRPMA_SIMVERBS_IBVERBS_VERBS_ERRORS_H_
