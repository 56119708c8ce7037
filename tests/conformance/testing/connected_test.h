// connected_test.h: ConnectedTest, the fixture of the conformance tests that need a connection:
// a client and a server connected through the RigTest's rig (with the configuration Configure()
// sets), a region on each side (every usage) and the server's region as the client sees it.

#ifndef SOFTRPMA_TESTS_CONFORMANCE_TESTING_CONNECTED_TEST_H_
#define SOFTRPMA_TESTS_CONFORMANCE_TESTING_CONNECTED_TEST_H_

#include <infiniband/verbs.h>

#include <cstddef>

#include "librpma.h"
#include "tests/conformance/testing/rig.h"
#include "tests/conformance/testing/rig_test.h"

namespace softrpma::conformance {

class ConnectedTest : public RigTest {
 protected:
  static constexpr size_t kMrSize = 4096;

  void SetUp() override;

  // Sets the connection configuration of both sides before they connect (default: none).
  virtual void Configure(rpma_conn_cfg* cfg) {}

  // A completion on the client's CQ: a signaled 8-byte RDMA write.
  void CompleteOnCq();
  // A completion on the client's receive queue's CQ: the server sends into a receive the
  // client posted.
  void CompleteOnRcq();
  // Waits (bounded) for an event on cq's channel (not a shared one) and takes it.
  void WaitCq(rpma_cq* cq);
  // Takes exactly one successful completion of `opcode` from cq.
  void ExpectOneCompletion(rpma_cq* cq, ibv_wc_opcode opcode);
  // WaitCq + ExpectOneCompletion on the client's CQ.
  void ExpectClientCompletion(ibv_wc_opcode opcode);

  rpma_cq* client_cq() const;

  rpma_mr_local* client_mr_ = nullptr;
  rpma_mr_local* server_mr_ = nullptr;
  rpma_mr_remote* server_remote_ = nullptr;
};

}  // namespace softrpma::conformance

#endif  // SOFTRPMA_TESTS_CONFORMANCE_TESTING_CONNECTED_TEST_H_
