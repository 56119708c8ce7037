// waits.h: bounded waits and connection set-up through the public librpma API, for the
// multi-threaded tests of tests/threads. For tests only.
//
// Every wait polls the object's file descriptor for at most kWaitLimit before the blocking
// librpma call, so a lost completion or event fails the test with a message instead of hanging
// it. The limit is a hang guard, never a timing assertion: nothing is expected to come close.
//
// Thread-safety: every function may be called from any thread; the objects passed in follow
// librpma's rules (librpma(7), THREAD SAFETY): one thread at a time per connection for the
// connection calls used here, except where a test says otherwise.

#ifndef SOFTRPMA_TESTS_THREADS_WAITS_H_
#define SOFTRPMA_TESTS_THREADS_WAITS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "librpma.h"
#include "tests/testing/test_env.h"

namespace softrpma::threads_testing {

using ::softrpma::testing::TestAddress;  // tests/testing/test_env.h

// How long any single wait may block before the test gives up on it.
inline constexpr absl::Duration kWaitLimit = absl::Seconds(30);

// An error naming the call, its code and rpma_err_2str(code); OkStatus for 0.
absl::Status RpmaStatus(int ret, const char* call);

// Returns the first error when expr (a librpma call) does not return 0.
#define THREADS_RETURN_IF_RPMA_ERROR(expr)                                              \
  do {                                                                                  \
    absl::Status rpma_status_ = ::softrpma::threads_testing::RpmaStatus((expr), #expr); \
    if (!rpma_status_.ok()) return rpma_status_;                                        \
  } while (0)

// Waits until fd is readable. DeadlineExceeded after kWaitLimit (what names the fd).
absl::Status AwaitReadable(int fd, const char* what);

// The next completion of cq, which has its own completion channel: polls cq first; when it is
// empty, waits (bounded) for the channel's event with rpma_cq_wait() (which re-arms cq) and
// polls again.
absl::StatusOr<ibv_wc> NextCompletion(rpma_cq* cq);

// The next connection event of conn (bounded wait on its event fd).
absl::StatusOr<rpma_conn_event> NextEvent(rpma_conn* conn);

// The next connection request of ep (bounded wait on its fd), built with cfg.
absl::StatusOr<rpma_conn_req*> NextConnReq(rpma_ep* ep, rpma_conn_cfg* cfg);

// Private data as text: its bytes up to the first NUL (empty for {NULL, 0}). IB / RoCE report
// the whole private data field of the CM message, zero-padded past what was sent.
std::string PrivateDataString(const rpma_conn_private_data& pdata);

// A client and a server connected over one listening endpoint, with one registered region per
// side; the server's region is known to the client (its descriptor was the accept's private
// data). Everything is made on a peer the caller owns and may share with other threads.
struct Pair {
  rpma_conn_cfg* cfg = nullptr;
  rpma_ep* ep = nullptr;
  rpma_conn* client = nullptr;
  rpma_conn* server = nullptr;
  std::vector<char> client_buf;
  std::vector<char> server_buf;
  rpma_mr_local* client_mr = nullptr;
  rpma_mr_local* server_mr = nullptr;
  rpma_mr_remote* server_mr_remote = nullptr;
};

struct PairOptions {
  std::string port;             // where the pair's endpoint listens (on TestAddress())
  bool shared_channel = false;  // rpma_conn_cfg_set_compl_channel
  uint32_t cq_size = 16;        // rpma_conn_cfg_set_cq_size
  uint32_t rcq_size = 16;       // rpma_conn_cfg_set_rcq_size
  uint32_t sq_size = 16;        // rpma_conn_cfg_set_sq_size
  uint32_t rq_size = 16;        // rpma_conn_cfg_set_rq_size
  size_t buffer_size = 4096;
};

// Connects a Pair on peer; both sides ESTABLISHED. On error *pair holds what was made, for
// ReleasePair.
absl::Status ConnectPair(rpma_peer* peer, const PairOptions& options, Pair* pair);

// Disconnects (client side), waits for both CLOSED events, releases everything; the first error.
// Safe on a partly made Pair.
absl::Status ReleasePair(Pair* pair);

}  // namespace softrpma::threads_testing

#endif  // SOFTRPMA_TESTS_THREADS_WAITS_H_
