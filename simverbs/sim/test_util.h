// test_util.h: test helpers for the simulator, written only against the Backend interface:
// a TestConnection that connects two rdma_cm ids the way librpma does, and non-blocking event
// getters (every event of the simulator is queued before the call that causes it returns, so
// a test never needs to wait: "no event now" is a failure, never a hang).

#ifndef SOFTRPMA_SIMVERBS_SIM_TEST_UTIL_H_
#define SOFTRPMA_SIMVERBS_SIM_TEST_UTIL_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "simverbs/backend.h"

namespace softrpma::sim::testing {

// The access of a test buffer that the peer writes and reads, and the local side too.
inline constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// The simulated backend. REQUIRES: it starts (RPMA_SIM_FAULTS unset or valid).
Backend* SimBackend();

// The device context, as librpma's rpma_utils_get_ibv_context finds it (getaddrinfo,
// create_id, resolve_addr, id->verbs, destroy_id).
ibv_context* SimContext();

// A port no other test of this process used.
uint16_t NextTestPort();

// True when `fd` is readable right now (poll with timeout 0).
bool FdReadable(int fd);

// Whether the thread *tid (once it has stored it there) is asleep in poll(2) or read(2), waited
// for within a bound for a hang (Linux: /proc's view of the system call a thread is in). Not a
// channel's SignalFd::waiters(): ThreadSanitizer loses the lock of a thread cancelled inside
// poll(2), and reports the count's update on its way out as a race with the reader (seen in
// AsyncTest.CancelledSleeper_ItsConnectionIsServedAgain).
bool ThreadAsleep(const std::atomic<pid_t>* tid);

// The next CM event of `channel` if one is pending now, else FailedPrecondition (on the host
// transport, pending within 10 s: test_util.cc says why).
absl::StatusOr<rdma_cm_event*> GetCmEventNow(Backend* backend, rdma_event_channel* channel);
// Gets the next event, checks its type (and status when `status` is not nullptr), acks it.
absl::Status ExpectCmEvent(Backend* backend, rdma_event_channel* channel, rdma_cm_event_type type,
                           int* status = nullptr);

// One side of a connection.
struct Endpoint {
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* comp_channel = nullptr;  // nullptr with ConnectionOptions::comp_channel off
  ibv_cq* send_cq = nullptr;
  ibv_cq* recv_cq = nullptr;  // == send_cq unless ConnectionOptions::separate_recv_cq
  ibv_srq* srq = nullptr;
  rdma_event_channel* channel = nullptr;
  bool owns_cqs =
      true;  // false: send_cq / recv_cq belong to the test (ConnectionOptions::active_cq)
  ibv_qp* qp() const { return id != nullptr ? id->qp : nullptr; }
};

// The rdma_conn_param of ConnectionOptions by default: zero but rnr_retry_count 7.
inline rdma_conn_param TestConnParam() {
  rdma_conn_param param{};
  param.rnr_retry_count = 7;
  return param;
}

struct ConnectionOptions {
  std::string address = "127.0.0.1";
  int cqe = 64;
  uint32_t max_send_wr = 16;
  uint32_t max_recv_wr = 16;
  uint32_t max_sge = 4;
  uint32_t max_inline_data = 64;
  int sq_sig_all = 0;
  // Non-zero: an extended QP (IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) with these send_ops_flags.
  uint64_t send_ops_flags = 0;
  bool separate_recv_cq = false;
  bool comp_channel = true;
  bool passive_srq = false;  // the passive QP takes its receives from an SRQ
  std::vector<uint8_t> connect_private_data;
  std::vector<uint8_t> accept_private_data;
  // What rdma_connect and rdma_accept pass besides the private data above (which replaces
  // theirs): no flow control, retry_count 0, rnr_retry_count 7.
  rdma_conn_param connect_param = TestConnParam();
  rdma_conn_param accept_param = TestConnParam();
  // When set, the active side's QP uses this CQ (the test's: not destroyed) as its send and
  // receive CQ, so that several connections can share one CQ.
  ibv_cq* active_cq = nullptr;
};

// Two connected ids in one process, built step by step as librpma builds them; the destructor
// tears everything down (disconnecting first when still connected).
class TestConnection final {
 public:
  explicit TestConnection(Backend* backend) : backend_(backend) {}
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;
  ~TestConnection();

  // Listener (its own channel) -> active side (sync id, resolve, QP, migrate, connect) ->
  // CONNECT_REQUEST -> passive QP, accept, ack, migrate -> ESTABLISHED on both sides.
  // `established_private_data` receives the private data of the active side's ESTABLISHED.
  absl::Status Connect(const ConnectionOptions& options,
                       std::vector<uint8_t>* established_private_data = nullptr);
  // The passive half of Connect after Listen and StartActive: takes the request, makes the
  // passive QP, accepts, acknowledges and migrates the id to its own channel. Neither side's
  // ESTABLISHED is got. `request_param` receives the CONNECT_REQUEST's param.conn (its
  // private_data nullptr: it went with the event).
  absl::Status AcceptPassive(const ConnectionOptions& options,
                             rdma_conn_param* request_param = nullptr);

  // Steps of Connect, for tests that stop half-way.
  absl::Status Listen(const std::string& address, uint16_t port);
  absl::Status StartActive(const ConnectionOptions& options, uint16_t port);

  // The disconnect of a correct program: rdma_disconnect on the active side (the DREQ), the
  // passive side's DISCONNECTED, its rdma_disconnect (the DREP), the active side's DISCONNECTED
  // (status 0). Both sides' TIMEWAIT_EXIT stay queued.
  absl::Status Disconnect();

  Backend* backend() const { return backend_; }
  Endpoint active;
  Endpoint passive;
  rdma_cm_id* listener = nullptr;
  rdma_event_channel* listen_channel = nullptr;
  uint16_t port = 0;

 private:
  // Creates PD, comp channel, CQs (and SRQ) for `endpoint` on `ctx`, then its QP on its id.
  absl::Status SetUpQp(Endpoint* endpoint, ibv_context* ctx, const ConnectionOptions& options,
                       bool with_srq, ibv_cq* shared_cq = nullptr);
  void TearDown(Endpoint* endpoint);

  Backend* backend_;
  bool connected_ = false;
};

// A buffer registered on a PD; deregistered by the destructor.
class TestBuffer final {
 public:
  TestBuffer(Backend* backend, ibv_pd* pd, size_t size, int access);
  TestBuffer(const TestBuffer&) = delete;
  TestBuffer& operator=(const TestBuffer&) = delete;
  ~TestBuffer();

  uint8_t* data() { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }
  ibv_mr* mr() const { return mr_; }
  uint64_t addr(size_t offset = 0) { return reinterpret_cast<uintptr_t>(data() + offset); }
  // An SGE over [offset, offset + length).
  ibv_sge Sge(size_t offset, uint32_t length);

 private:
  Backend* backend_;
  std::vector<uint8_t> bytes_;
  ibv_mr* mr_ = nullptr;
};

// Posting shorthands. Return the backend's errno.
int PostWrite(Backend* backend, ibv_qp* qp, uint64_t wr_id, ibv_sge* sges, int num_sge,
              uint64_t remote_addr, uint32_t rkey, unsigned int flags = IBV_SEND_SIGNALED);
int PostRead(Backend* backend, ibv_qp* qp, uint64_t wr_id, ibv_sge* sges, int num_sge,
             uint64_t remote_addr, uint32_t rkey, unsigned int flags = IBV_SEND_SIGNALED);
int PostSendMsg(Backend* backend, ibv_qp* qp, uint64_t wr_id, ibv_sge* sges, int num_sge,
                unsigned int flags = IBV_SEND_SIGNALED);
int PostRecvBuf(Backend* backend, ibv_qp* qp, uint64_t wr_id, ibv_sge* sges, int num_sge);

// Polls everything the CQ holds now.
std::vector<ibv_wc> PollAll(Backend* backend, ibv_cq* cq);

// Lets the simulated NIC execute what was posted on the QPs using `cq`: a poll of no entries,
// which is a poll point of asynchronous execution (sched.h) and takes no completion.
void ExecutePosted(Backend* backend, ibv_cq* cq);

}  // namespace softrpma::sim::testing

#endif  // SOFTRPMA_SIMVERBS_SIM_TEST_UTIL_H_
