// ops_pair.h: OpsPair, a client and a server connected through the public librpma API in one
// process (on the selected backend, the simulated NIC by default), set up for the remote memory
// operations of tests/ops: the server registers a buffer with the usage a test asks for and
// sends, in its private data, that region's descriptor followed by its peer configuration's
// descriptor (direct write to PMem declared or not); the client turns the first into an
// rpma_mr_remote and, when asked, applies the second to its connection
// (rpma_conn_apply_remote_peer_cfg), as librpma's flush-to-persistent example does.
// Plus a bounded completion wait. For tests only; not thread-safe.

#ifndef SOFTRPMA_TESTS_OPS_OPS_PAIR_H_
#define SOFTRPMA_TESTS_OPS_OPS_PAIR_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "librpma.h"

namespace softrpma::ops_testing {

struct OpsPairOptions {
  // The server region's usage (RECV is always added: tests gate the client's queue with a
  // send that waits for the server's receive).
  int server_usage = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST |
                     RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
  // Where the server region starts within the server buffer, and its size.
  size_t server_region_offset = 0;
  size_t server_region_size = 256;
  // The server's peer configuration, and whether the client applies it to its connection.
  bool server_direct_write_to_pmem = false;
  bool client_applies_peer_cfg = true;
};

class OpsPair final {
 public:
  // A connected pair; the error names the librpma call that failed and its code.
  static absl::StatusOr<std::unique_ptr<OpsPair>> Create(const OpsPairOptions& options = {});

  OpsPair(const OpsPair&) = delete;
  OpsPair& operator=(const OpsPair&) = delete;
  // Close(), if it was not called.
  ~OpsPair();

  // Disconnects and releases everything, in librpma's order; the first failure is returned
  // (e.g. rpma_peer_delete failing because a connection left a registration behind).
  absl::Status Close();

  rpma_conn* client() const { return client_; }
  rpma_conn* server() const { return server_; }
  // The client's local region (usage WRITE_SRC | READ_DST | SEND | RECV) over client_buf().
  rpma_mr_local* client_mr() const { return client_mr_; }
  // The server's region as the client sees it, and the memory behind it.
  rpma_mr_remote* server_remote() const { return server_remote_; }
  rpma_mr_local* server_mr() const { return server_mr_; }
  char* client_buf() { return client_buf_.data(); }
  char* server_region() { return server_buf_.data() + server_region_offset_; }
  size_t server_region_size() const { return server_region_size_; }
  // A receive buffer on the server (its own region, usage RECV), for gating sends.
  rpma_mr_local* server_inbox() const { return server_inbox_; }

 private:
  OpsPair() = default;
  absl::Status Connect(const OpsPairOptions& options);

  std::vector<char> client_buf_;
  std::vector<char> server_buf_;
  std::vector<char> server_inbox_buf_;
  size_t server_region_offset_ = 0;
  size_t server_region_size_ = 0;
  rpma_peer* peer_ = nullptr;
  rpma_ep* ep_ = nullptr;
  rpma_conn* client_ = nullptr;
  rpma_conn* server_ = nullptr;
  rpma_mr_local* client_mr_ = nullptr;
  rpma_mr_local* server_mr_ = nullptr;
  rpma_mr_local* server_inbox_ = nullptr;
  rpma_mr_remote* server_remote_ = nullptr;
  bool closed_ = false;
};

// Waits (polling, at most 10 s: a safety net against hangs, never an assertion on speed) for
// the next completion of `cq`. Errors: DeadlineExceeded, or Internal naming a failed call.
absl::StatusOr<ibv_wc> NextCompletion(rpma_cq* cq);

// The completion queue of `conn`. REQUIRES: conn != nullptr.
rpma_cq* CqOf(rpma_conn* conn);

// The address tests use: $SOFTRPMA_TEST_ADDR, or 127.0.0.1 (any address works on the sim).
const char* TestAddress();
// True when the tests run on the simulated NIC (RPMA_BACKEND unset or "sim").
bool SimulatedNicSelected();

}  // namespace softrpma::ops_testing

#endif  // SOFTRPMA_TESTS_OPS_OPS_PAIR_H_
