// connected_pair.h: a client and a server connected through the public librpma API, in one
// process, on the selected backend (the simulated NIC by default). For tests only.
//
// ConnectedPair::Create() does what every librpma program does first: device lookup, peer,
// listening endpoint, a connection request on each side, both ends ESTABLISHED, and one
// registered memory region per side whose descriptor the server sent to the client.

#ifndef SOFTRPMA_TESTS_TESTING_CONNECTED_PAIR_H_
#define SOFTRPMA_TESTS_TESTING_CONNECTED_PAIR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "librpma.h"
#include "tests/testing/test_env.h"

namespace softrpma::testing {

struct PairOptions {
  bool shared_channel = false;  // rpma_conn_cfg_set_compl_channel
  uint32_t rcq_size = 0;        // rpma_conn_cfg_set_rcq_size (0: no receive CQ)
  uint32_t cq_size = 10;
  size_t buffer_size = 4096;
  // The server's side takes its receives from a shared receive queue made on the pair's peer
  // with these sizes (rpma_srq_new, rpma_conn_cfg_set_srq); the client's does not.
  bool server_uses_srq = false;
  uint32_t srq_rq_size = 16;
  uint32_t srq_rcq_size = 16;
};

class ConnectedPair {
 public:
  // A connected pair; the error names the librpma call that failed and its code.
  static absl::StatusOr<std::unique_ptr<ConnectedPair>> Create(const PairOptions& options = {});

  ConnectedPair(const ConnectedPair&) = delete;
  ConnectedPair& operator=(const ConnectedPair&) = delete;
  // Disconnects (if still connected) and releases everything.
  ~ConnectedPair();

  rpma_peer* peer() const { return peer_; }
  rpma_conn* client() const { return client_; }
  rpma_conn* server() const { return server_; }
  rpma_mr_local* client_mr() const { return client_mr_; }
  rpma_mr_local* server_mr() const { return server_mr_; }
  rpma_mr_remote* server_mr_remote() const { return server_mr_remote_; }
  // The server's shared receive queue (PairOptions::server_uses_srq), else NULL.
  rpma_srq* server_srq() const { return server_srq_; }
  char* client_buf() { return client_buf_.data(); }
  char* server_buf() { return server_buf_.data(); }

  // Deletes the client's connection now (e.g. to check that deleting after an error works).
  int DeleteClient();

 private:
  ConnectedPair() = default;
  absl::Status Connect(const PairOptions& options);

  std::vector<char> client_buf_;
  std::vector<char> server_buf_;
  rpma_peer* peer_ = nullptr;
  rpma_conn_cfg* cfg_ = nullptr;
  rpma_conn_cfg* server_cfg_ = nullptr;  // cfg_ plus the SRQ, when the server uses one
  rpma_srq_cfg* srq_cfg_ = nullptr;
  rpma_srq* server_srq_ = nullptr;
  rpma_ep* ep_ = nullptr;
  rpma_conn* client_ = nullptr;
  rpma_conn* server_ = nullptr;
  rpma_mr_local* client_mr_ = nullptr;
  rpma_mr_local* server_mr_ = nullptr;
  rpma_mr_remote* server_mr_remote_ = nullptr;
};

}  // namespace softrpma::testing

#endif  // SOFTRPMA_TESTS_TESTING_CONNECTED_PAIR_H_
