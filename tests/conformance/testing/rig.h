// rig.h: Rig, a peer, a connection configuration and (on demand) a listening endpoint on the
// simulated NIC, from which a conformance test builds connections one public librpma call at a
// time, so that it can arm a fault around exactly the call under test.
//
// Every object the rig made and the test did not delete is released by the destructor
// (connections are disconnected first); the codes of that clean-up are not checked (a test that
// cares deletes its objects itself and checks the codes). Not thread-safe.

#ifndef SOFTRPMA_TESTS_CONFORMANCE_TESTING_RIG_H_
#define SOFTRPMA_TESTS_CONFORMANCE_TESTING_RIG_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "librpma.h"
#include "tests/conformance/testing/conformance_test.h"

namespace softrpma::conformance {

// Every RPMA_MR_USAGE_* bit.
inline constexpr int kAllMrUsages =
    RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
    RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
    RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV;

class Rig final {
 public:
  // A device context, a peer and a default connection configuration. The error names the
  // failing call and its code.
  static absl::StatusOr<std::unique_ptr<Rig>> Create();

  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;
  ~Rig();

  ibv_context* dev() const { return dev_; }
  rpma_peer* peer() const { return peer_; }
  rpma_conn_cfg* cfg() const { return cfg_; }
  rpma_ep* ep() const { return ep_; }
  const std::string& port() const { return port_; }

  // The objects the steps below made; tests may delete them through these (the destructor
  // skips NULLs).
  rpma_peer** peer_ptr() { return &peer_; }
  rpma_ep** ep_ptr() { return &ep_; }
  rpma_conn_req** client_req_ptr() { return &client_req_; }
  rpma_conn_req** server_req_ptr() { return &server_req_; }
  rpma_conn** client_ptr() { return &client_; }
  rpma_conn** server_ptr() { return &server_; }
  rpma_conn_req* client_req() const { return client_req_; }
  rpma_conn_req* server_req() const { return server_req_; }
  rpma_conn* client() const { return client_; }
  rpma_conn* server() const { return server_; }

  // The steps. Each returns 0 or the RPMA_E_* code of the librpma call that failed.
  // rpma_ep_listen(peer, kAddress, a fresh port).
  int Listen();
  // rpma_conn_req_new(peer, kAddress, port, cfg) into client_req.
  int NewClientRequest();
  // NewClientRequest() unless client_req exists, then rpma_conn_req_connect into client.
  int ConnectClient(const rpma_conn_private_data* pdata = nullptr);
  // Waits (bounded) for the endpoint's fd, then rpma_ep_next_conn_req(ep, cfg) into server_req.
  int NextServerRequest();
  // rpma_conn_req_connect(server_req, pdata) into server.
  int AcceptServer(const rpma_conn_private_data* pdata = nullptr);
  // Waits (bounded) for conn's event fd, then rpma_conn_next_event.
  static int NextEvent(rpma_conn* conn, rpma_conn_event* event);
  // Listen() (unless listening), ConnectClient, NextServerRequest, AcceptServer, then both
  // sides' RPMA_CONN_ESTABLISHED (anything else: RPMA_E_UNKNOWN).
  int Establish();

  // A registered region of `size` zeroed bytes owned by the rig, or nullptr (the test fails).
  rpma_mr_local* RegisterMr(size_t size, int usage);
  // The remote view of `mr` (through its descriptor, as the other side would get it), or
  // nullptr (the test fails). Deleted by the destructor.
  rpma_mr_remote* RemoteOf(const rpma_mr_local* mr);

 private:
  Rig() = default;

  ibv_context* dev_ = nullptr;
  rpma_peer* peer_ = nullptr;
  rpma_conn_cfg* cfg_ = nullptr;
  rpma_ep* ep_ = nullptr;
  std::string port_;
  rpma_conn_req* client_req_ = nullptr;
  rpma_conn_req* server_req_ = nullptr;
  rpma_conn* client_ = nullptr;
  rpma_conn* server_ = nullptr;
  std::vector<std::unique_ptr<char[]>> buffers_;
  std::vector<rpma_mr_local*> mrs_;
  std::vector<rpma_mr_remote*> remote_mrs_;
};

}  // namespace softrpma::conformance

#endif  // SOFTRPMA_TESTS_CONFORMANCE_TESTING_RIG_H_
