// qp.h: the data path of the simulator: RC queue pairs (SimQp), shared receive queues (SimSrq)
// and the link (SimLink) that joins the two QPs of a connection; UD QPs and address handles.
//
// THE MODEL
//   * RC (UD: "UD QPs" below). A QP is INIT after creation, RTS once the connection manager
//     established its connection, ERROR after its own rdma_disconnect, an error completion or
//     an overflow of one of its CQs.
//     (A QP of ibv_create_qp is RESET after creation and is moved by ibv_modify_qp instead:
//     "QPs of ibv_create_qp" below.)
//   * Execution is in order per QP and happens inside the "progress step" of a QP
//     (ProgressQpLocked in requester.cc, through the link's carrier: carrier.h): its send
//     queue is executed from its head until it is empty,
//     its head must wait for a receive, or (asynchronous execution, the default; sched.h) its
//     head's time has not come. The step runs at the post points of a connection (any post of
//     a send or receive WR on either QP: a WR executes at the 1st, 2nd or 3rd post point after
//     its own, as its seeded deferral says, never inside its own post) and at its poll points
//     (ibv_poll_cq of a CQ either QP uses, ibv_get_cq_event on its channel before sleeping),
//     which release everything posted before them. Data moves when the WR executes. In eager
//     mode (RPMA_SIM_EXECUTION=eager) a WR executes inside its post. A remote link (another
//     process) is deferred the same way, and sending a request is executing it (the peer's
//     fabric thread serves it); the fabric thread's backstop sends what a program leaves
//     deferred while it calls nothing (host::CallSoon). rdma_disconnect runs the step of its
//     QP before the QP moves to ERROR (DrainBeforeDisconnect).
//   * The seeded scheduler (sched.h) decides when each completion arrives: every completion
//     gets a ready time from its QP's CompletionTimer (seeded jitter, strictly increasing per
//     QP) and CQs keep completions in ready-time order, so completions of different QPs
//     sharing a CQ interleave as the seed says, and one QP's never reorder. Faults of a post
//     (WrFault) may fail its first WR with a given status or hold its completions back.
//   * RDMA WRITE / READ check the local SGEs against the QP's PD (lkey, range, LOCAL_WRITE for
//     the READ target) -> IBV_WC_LOC_PROT_ERR, and the remote range against the responder QP's
//     PD (rkey, range, REMOTE_WRITE / REMOTE_READ) -> IBV_WC_REM_ACCESS_ERR with the remote
//     memory untouched; as IB's class C errors, the responder's QP goes to ERROR as well
//     (its posted receives flush), also across processes. A zero-length operation checks no
//     key (as the IB spec says).
//   * SEND and WRITE_WITH_IMM consume the responder's oldest receive (its own or its SRQ's).
//     With none posted the WR waits at the head of the send queue, with the WRs behind it
//     (receiver-not-ready retried forever, as with rnr_retry = 7). A receive too small gives
//     IBV_WC_LOC_LEN_ERR to the receiver and IBV_WC_REM_INV_REQ_ERR to the sender; a bad
//     receive SGE gives IBV_WC_LOC_PROT_ERR / IBV_WC_REM_OP_ERR; both QPs then go to ERROR.
//   * A responder that is gone (QP destroyed, or its process's connection closed after a DREQ)
//     or in ERROR (it drops what arrives) makes the requester's WR complete with
//     IBV_WC_RETRY_EXC_ERR once its retries ran out: the completion is ready kRetryTimeoutNs of
//     simulated time after the WR executed; the QP then goes to ERROR, flushing the rest. The
//     connection manager never moves the peer's QP for a disconnect (cm.h): after the other
//     side's rdma_disconnect a QP stays RTS, its receives posted, until its own rdma_disconnect
//     or a send of its own times out this way.
//   * Any error completion moves the QP to ERROR; entering ERROR flushes every outstanding send
//     and receive WR with IBV_WC_WR_FLUSH_ERR (receives on the recv CQ; SRQ receives stay in the
//     SRQ). WRs posted in ERROR complete at once with IBV_WC_WR_FLUSH_ERR.
//   * Unsignaled WRs (no IBV_SEND_SIGNALED, sq_sig_all = 0) produce no success completion but
//     do produce error completions.
//   * Send-queue occupancy follows the device (DeviceProfile::slots_freed_at_poll). mlx5: a
//     send WR holds its slot from ibv_post_send until the user POLLS the completion that
//     retires it; a completion retires its own WR and every unsignaled WR before it. So a QP
//     posting only unsignaled WRs fills up (ENOMEM), exactly as on a ConnectX. A receive WR (of
//     a QP or an SRQ) holds its slot until its completion is polled too. rxe and siw: a WR's
//     slot is free as it completes, signaled or not, and a receive's as it is consumed.
//   * Completions: wr_id, status, opcode, byte_len (bytes read, or received), qp_num, src_qp
//     (the sender, on receives), imm_data + IBV_WC_WITH_IMM (also on the sender's completion
//     of a *_WITH_IMM WR, as mlx5 sets it), vendor_err 0. What verbs leaves undefined the
//     program reads as poison (cq.h, PoisonUndefinedFields): every field but wr_id, status,
//     qp_num and vendor_err of an error completion, byte_len of a sent WRITE / SEND.
//   * An RDMA READ executes only after every earlier WR of its QP (in-order execution): when
//     its completion is there, every earlier RDMA WRITE of that QP is in the responder's
//     memory. rpma_flush(3) relies on this (IBV_WR_FLUSH is not defined by the installed
//     verbs.h, so it is not modelled).
//   * 8-byte atomic write (IBV_WR_ATOMIC_WRITE) is posted only through the extended post API,
//     as on mlx5: ibv_wr_atomic_write on a QP created by rdma_create_qp_ex with
//     IBV_QP_EX_WITH_ATOMIC_WRITE in send_ops_flags, which only a device reporting the
//     capability accepts (SetAtomicWriteSupported, device.h); ibv_post_send rejects the opcode
//     (EINVAL). Its 8 bytes are copied when the WR is built; they are stored at an 8-byte
//     aligned remote address (REMOTE_WRITE access) with one atomic 8-byte store, so a
//     concurrent reader of that word sees the old or the new value, never a mix. A misaligned
//     remote address gives IBV_WC_REM_INV_REQ_ERR. Completion opcode IBV_WC_ATOMIC_WRITE,
//     byte_len 8.
//   * 64-bit atomics (IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD; operands and key
//     in wr.atomic) where the profile's atomic_cap is not IBV_ATOMIC_NONE (else EINVAL): the
//     word at an 8-byte aligned remote address (REMOTE_ATOMIC access; misaligned:
//     IBV_WC_REM_INV_REQ_ERR) is changed by one atomic read-modify-write of the CPU, in the
//     process that owns it, and its former value goes to the first 8 bytes of the SGEs (which
//     must hold 8; never inline: EINVAL). Completion IBV_WC_COMP_SWAP / IBV_WC_FETCH_ADD,
//     byte_len 8.
//   * The extended post API has the builders of the ops modelled: ibv_wr_rdma_write(_imm),
//     ibv_wr_send(_imm), ibv_wr_rdma_read, ibv_wr_atomic_write, ibv_wr_atomic_cmp_swp and
//     ibv_wr_atomic_fetch_add, with ibv_wr_set_sge(_list) and ibv_wr_set_inline_data(_list)
//     (copied at the call). A batch is posted by ibv_wr_complete as the same WRs through
//     ibv_post_send would be, and fails as a whole on the first bad builder (one not in the
//     QP's send_ops_flags, a setter with no WR to set, more WRs than the send queue holds).
//     send_ops_flags naming other ops (memory windows, invalidate, TSO; the 64-bit atomics on
//     a device without them), or the *_WITH_IMM ones on a device without immediate data, are
//     EOPNOTSUPP at creation; their builders, which a provider leaves NULL, fail the batch
//     (EINVAL) instead of crashing. A UD QP takes IBV_QP_EX_WITH_SEND(_WITH_IMM) only, and
//     ibv_wr_set_ud_addr gives each WR its destination (mlx5's and rxe's UD builders).
//   * An RDMA WRITE of exactly 8 bytes to an 8-byte aligned address is one atomic store too, as
//     one PCIe write of a real NIC is: that is the atomic write librpma emulates (IBV_SEND_INLINE
//     | IBV_SEND_FENCE) where the device has no native one. IBV_SEND_FENCE needs no action:
//     execution is in order and a READ is complete before anything behind it executes.
//
// LOCKING: one mutex per link guards both QPs of a connection (state, queues); the PD tables are
// read-locked while copying; SRQ, CQ and channel mutexes follow (order in cq.h). Posting and
// polling make no syscall except the eventfd write of an armed CQ's event. An overflow of a CQ
// moves the QP that caused it to ERROR at once and the other QPs on that CQ the next time they
// are posted to or executed (they cannot be locked from inside the overflowing push).

#ifndef SOFTRPMA_SIMVERBS_SIM_NIC_QP_H_
#define SOFTRPMA_SIMVERBS_SIM_NIC_QP_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "simverbs/mutex.h"
#include "simverbs/sim/nic/carrier.h"
#include "simverbs/sim/nic/cq.h"
#include "simverbs/sim/nic/device.h"
#include "simverbs/sim/fabric/bytes.h"
#include "simverbs/sim/fabric/transport.h"
#include "simverbs/sim/fabric/wire.h"
#include "simverbs/sim/sched/sched.h"

namespace softrpma::sim {

// The requester's retry timeout (simulated): (retry_cnt + 1) x the local ACK timeout, which IB
// defines as 4.096 us x 2^timeout. librpma connects with retry_count 7; the rdma_cm gives a RoCE
// QP timeout 19: the kernel's CMA_IBOE_PACKET_LIFETIME 18, + 1 in cm_init_av_by_path
// (drivers/infiniband/core/cma.c, cm.c). So 8 x 2^31 ns, about 17.2 s.
inline constexpr uint64_t kLocalAckTimeoutNs = uint64_t{4096} << 19;
inline constexpr uint64_t kRetryTimeoutNs = 8 * kLocalAckTimeoutNs;

// A fixed-capacity FIFO whose slots are built once (no allocation when used).
template <typename T>
class Ring final {
 public:
  Ring() = default;
  // `make` builds each slot.
  template <typename Make>
  void Init(size_t capacity, Make make) {
    slots_.clear();
    slots_.reserve(capacity);
    for (size_t i = 0; i < capacity; ++i) slots_.push_back(make());
    head_ = size_ = 0;
  }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == slots_.size(); }
  size_t size() const { return size_; }
  T& front() { return slots_[head_]; }
  // The i-th entry from the front. REQUIRES: i < size().
  T& at(size_t i) { return slots_[(head_ + i) % slots_.size()]; }
  // REQUIRES: !full(). The slot keeps its old contents; the caller overwrites it.
  T& push_back() {
    T& slot = slots_[(head_ + size_) % slots_.size()];
    ++size_;
    return slot;
  }
  // REQUIRES: !empty().
  void pop_front() {
    head_ = (head_ + 1) % slots_.size();
    --size_;
  }

 private:
  std::vector<T> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

// A posted send WR, copied at post time.
struct SendWqe {
  uint64_t wr_id = 0;
  ibv_wr_opcode opcode = IBV_WR_RDMA_WRITE;
  bool signaled = false;
  bool solicited = false;
  bool is_inline = false;
  uint32_t imm_data = 0;  // network order, as given
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  // A compare-and-swap's compare and swap values, a fetch-and-add's addend (in compare_add).
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint64_t length = 0;  // total bytes of the SGEs (or of the inline data; a fetching atomic: 8)
  int num_sge = 0;
  std::vector<ibv_sge> sges;         // max_send_sge slots
  std::vector<uint8_t> inline_data;  // max(max_inline_data, 8) bytes (8: an inline atomic write)
  // Faults (fault.h): completes with this status instead of executing (when not SUCCESS);
  // its completion is ready delay_ns later.
  ibv_wc_status forced_status = IBV_WC_SUCCESS;
  uint64_t delay_ns = 0;
  uint64_t seq = 0;  // a remote link's request number, once sent (requester.cc)
  // Sent with wire::kFlagCma: the responder copies into our memory itself. Only then may its
  // read response say the data is in place (a peer must not complete a read it never wrote).
  bool sent_cma = false;
  // Asynchronous execution (sched.h): the WR may execute once its link's post_points reach
  // release_at, or once its QP's released_seq reaches post_seq (a poll point). release_at 0:
  // at once (eager mode).
  uint64_t post_seq = 0;
  uint64_t release_at = 0;
  // Counted in its link's `unexecuted` until it executes (a link inside this process) or is
  // sent (a link to another process: sending is executing, as a NIC reads a WR's source when
  // it puts it on the wire), or leaves the queue without either.
  bool unexecuted = false;
  // The race detector: the source bytes as posted, compared when the WR executes (empty: not
  // watched; a watched WR has at least one byte).
  std::vector<uint8_t> posted_bytes;
};

// A WR built by an ibv_wr_* call of the extended post API, waiting for ibv_wr_complete. Its
// local memory is `num_sge` SGEs from SimQp::ex_sge_pool[first_sge] (ibv_wr_set_sge*), or
// `inline_length` bytes copied to SimQp::ex_inline_pool[first_inline] (ibv_wr_set_inline_data*
// and the atomic write's 8 bytes), as the WQE a provider writes at once.
struct ExtendedWr {
  uint64_t wr_id = 0;
  unsigned int wr_flags = 0;
  ibv_wr_opcode opcode = IBV_WR_RDMA_WRITE;
  uint32_t rkey = 0;
  uint64_t remote_addr = 0;
  uint32_t imm_data = 0;  // network order, as the builder takes it
  uint64_t compare_add = 0;  // a compare-and-swap's or fetch-and-add's operands (SendWqe)
  uint64_t swap = 0;
  size_t first_sge = 0;
  int num_sge = 0;
  bool is_inline = false;
  size_t first_inline = 0;
  size_t inline_length = 0;
  // A UD QP's destination (ibv_wr_set_ud_addr).
  ibv_ah* ah = nullptr;
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
};

// A posted receive WR.
struct RecvWqe {
  uint64_t wr_id = 0;
  int num_sge = 0;
  std::vector<ibv_sge> sges;  // max_recv_sge slots
  uint64_t delay_ns = 0;      // a delay fault: its completion is ready that much later
};

struct SimQp;

// The two QPs of a connection and the one mutex that guards them both. Shared (std::shared_ptr)
// by the QPs and weakly by the SRQs a sender waits on, so that it outlives whichever goes first.
// A request of the remote peer waiting for a receive (receiver not ready), with the requests
// that arrived after it.
struct IncomingRequest {
  wire::Header header;
  Bytes body;
  // Its cross-memory-attach copy runs (fabric/cma.h): it is answered when that ends, and
  // everything behind it waits.
  bool in_flight = false;
};

struct SimLink final {
  softrpma::Mutex mu;
  SimQp* side[2] ABSL_GUARDED_BY(mu) = {nullptr, nullptr};
  // How its WRs reach the peer's NIC (carrier.h): LOCAL (both sides here) until AttachRemote
  // makes it HOST, and again after DetachRemoteLocked.
  const LinkCarrier* carrier ABSL_GUARDED_BY(mu) = &LocalCarrier();
  // The HOST carrier's connection to a QP in another process (fabric/host.h): the link then has
  // one local side, which sends its requests over `remote` and answers the peer's
  // (HandleRemoteMessage). nullptr exactly when the carrier is LOCAL.
  std::shared_ptr<Transport> remote ABSL_GUARDED_BY(mu);
  uint32_t remote_qp_num ABSL_GUARDED_BY(mu) = 0;
  // The peer's process, as the kernel names the connection's other end (SO_PEERCRED), never
  // as a message says: the only process a cross-memory-attach copy may reach.
  int32_t remote_pid ABSL_GUARDED_BY(mu) = 0;
  // This side proved at connect time that it may reach the peer's memory (host::CanReach):
  // only then are the peer's kFlagCma requests served.
  bool we_reach_peer ABSL_GUARDED_BY(mu) = false;
  // The peer proved it can reach this process's memory (host::CanReach): large requests carry
  // addresses, and the peer copies (wire::kFlagCma).
  bool peer_reaches_us ABSL_GUARDED_BY(mu) = false;
  // The peer's connection closed after its DREQ (RemotePeerGone): nothing answers any more.
  bool peer_gone ABSL_GUARDED_BY(mu) = false;
  std::deque<IncomingRequest> incoming ABSL_GUARDED_BY(mu);
  uint64_t incoming_bytes ABSL_GUARDED_BY(mu) = 0;  // their bodies' bytes (responder.cc, THE BUDGET)
  // The longest RDMA READ this side has sent the peer: no read response may be longer
  // (ResponseFits).
  uint64_t max_read_sent ABSL_GUARDED_BY(mu) = 0;
  // A QP of ibv_create_qp: the connection the peer's requests arrived on (they are answered
  // there); nullptr: answered on `remote` (a CM connection carries both ways).
  std::shared_ptr<Transport> serve ABSL_GUARDED_BY(mu);
  // Post points seen (sched.h, "Asynchronous execution").
  uint64_t post_points ABSL_GUARDED_BY(mu) = 0;
  // Send WRs of this link's QPs posted and not executed yet (for a link to another process:
  // not sent yet): a poll point looks at the link (and takes its lock) only when there are
  // some. Written under mu.
  std::atomic<uint32_t> unexecuted{0};
  // In the set of links the process's progress point and the backstop look at (progress.cc,
  // DeferredLinks, weakly): listed by a post that deferred a WR, and dropped (cleared under mu)
  // by the progress point that finds nothing deferred on it any more.
  std::atomic<bool> progress_listed{false};
};

struct SimSrq final {
  ibv_srq srq;  // FIRST member
  SimPd* pd;
  uint32_t max_wr;
  uint32_t max_sge;
  std::atomic<int> users{0};  // QPs using it

  // Receive slots in use: posted and not yet retired (SimQp::rq_in_use says when, by the
  // profile of the QP that consumes the receive).
  std::atomic<uint32_t> in_use{0};

  softrpma::Mutex mu;
  Ring<RecvWqe> rq ABSL_GUARDED_BY(mu);
  // Links with a sender waiting for a receive of this SRQ, resumed by the next post.
  std::vector<std::weak_ptr<SimLink>> waiters ABSL_GUARDED_BY(mu);

  SimSrq(SimPd* pd, const ibv_srq_init_attr& attr);
  SimSrq(const SimSrq&) = delete;
  SimSrq& operator=(const SimSrq&) = delete;
  ~SimSrq();
};

inline SimSrq* to_sim(ibv_srq* srq) { return reinterpret_cast<SimSrq*>(srq); }

struct SimQp final {
  // FIRST member: the verbs QP is qp_ex.qp_base (as in a provider's verbs_qp), so an ibv_qp*
  // and the ibv_qp_ex* of IbvQpToQpEx both point here. qp.state mirrors `state` (written under
  // link->mu).
  ibv_qp_ex qp_ex;
  ibv_qp& qp = qp_ex.qp_base;
  SimDevice* device;
  SimPd* pd;
  SimCq* send_cq;
  SimCq* recv_cq;
  SimSrq* srq;  // may be nullptr
  ibv_qp_cap cap;
  bool sq_sig_all;
  // Never changes after creation, except for a QP of ibv_create_qp at its RTR toward a QP of
  // this process (ModifyVerbsQp), when no other thread may use the QP.
  std::shared_ptr<SimLink> link;
  int side;                       // this QP's index in link->side

  // Send-queue slots in use: posted and not yet retired. Incremented under link->mu by posts,
  // decremented lock-free by IbvPollCq (see CqEntry) where the profile frees a slot when its
  // completion is polled (mlx5), else under link->mu as the WR completes (rxe, siw):
  // DeviceProfile::slots_freed_at_poll, as it was when the QP was created.
  std::atomic<uint32_t> sq_in_use{0};
  // Receive-queue slots in use, the same way: a receive holds its slot until its completion is
  // polled on mlx5, until it is consumed on rxe and siw (the receives of an SRQ count in
  // SimSrq::in_use).
  std::atomic<uint32_t> rq_in_use{0};
  bool slots_freed_at_poll = true;
  // DeviceProfile::cq_cleaned_at_destroy_qp, as it was when the QP was created: destroying it
  // (or moving it to RESET) takes its completions out of its CQs (SimCq::Clean).
  bool cq_cleaned_at_destroy = true;

  // Made by ibv_create_qp (CreateVerbsQp): starts in RESET and is moved and connected by
  // ModifyVerbsQp; `verbs_attr` holds what ibv_modify_qp set, `verbs_init` how it was made.
  bool verbs = false;
  // Made by rdma_create_qp on an RDMA_PS_UDP id (cm.h, "UD ids"): also `verbs` (rdma-core moves
  // it to RTS with ibv_modify_qp and leaves it the user's to modify), but while its id lives
  // only rdma_destroy_qp destroys it.
  bool cm_ud = false;
  // Made by rdma_create_qp on an id that was then destroyed with the QP still on it: the QP is
  // the caller's, for ibv_destroy_qp (IbvDestroyQp), as on rdma-core. Set under the CM's lock
  // before the id goes; read by IbvDestroyQp, which the caller calls after.
  std::atomic<bool> cm_orphan{false};
  ibv_qp_attr verbs_attr;   // guarded by link->mu
  // The remote access this QP grants as a responder (the IBV_ACCESS_REMOTE_* of the last
  // qp_access_flags of ibv_modify_qp), checked before the MR's (responder.cc). A QP of
  // ibv_create_qp grants none until INIT sets it; a QP of rdma_create_qp what the kernel's CM
  // gives an RC QP of a connection with responder resources (cm.c, cm_init_qp_init_attr:
  // REMOTE_WRITE, and REMOTE_READ | REMOTE_ATOMIC when responder_resources > 0). Guarded by
  // link->mu.
  int remote_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  ibv_qp_init_attr verbs_init;
  // Serializes ModifyVerbsQp and QueryVerbsQp of this QP, as a provider's per-QP mutex does
  // (a transition checks the state, may dial its peer unlocked and may give the QP a link of
  // its own). Lock order: before every other simulator lock.
  softrpma::Mutex modify_mu;

  // Guarded by link->mu.
  ibv_qp_state state = IBV_QPS_INIT;
  Ring<SendWqe> sq;
  Ring<RecvWqe> rq;
  uint32_t unretired = 0;  // executed unsignaled WRs whose slots the next completion retires
  CompletionTimer timer;   // ready times of this QP's completions (sched.h)
  // A remote link: the WRs at the head of sq already sent to the peer (awaiting a response),
  // and the number the next request gets.
  uint32_t sq_sent = 0;
  uint64_t next_seq = 1;
  // Asynchronous execution: the number of the last send WR posted, and of the last one a poll
  // point released (every WR up to it may execute); the seeded deferrals.
  uint64_t posted_seq = 0;
  uint64_t released_seq = 0;
  ExecutionChooser chooser;

  // The extended post API (rdma_create_qp_ex with send_ops_flags; 0: not an extended QP).
  // A batch holds ex_mu from ibv_wr_start to ibv_wr_complete, as mlx5 holds its send-queue
  // lock; ex_batch and ex_error are guarded by it.
  uint64_t send_ops_flags = 0;
  softrpma::Mutex ex_mu;
  std::vector<ExtendedWr> ex_batch;
  std::vector<ibv_sge> ex_sge_pool;       // the SGEs the batch's setters gave
  std::vector<uint8_t> ex_inline_pool;    // the inline bytes the batch's setters copied
  // The batch as the WR list ibv_post_send takes (kept: no allocation after the first batch).
  std::vector<ibv_sge> ex_sges;
  std::vector<ibv_send_wr> ex_wrs;
  int ex_error = 0;  // the first error of the batch's builders, reported by ibv_wr_complete

  SimQp(SimPd* pd, const ibv_qp_init_attr& attr, std::shared_ptr<SimLink> link, int side);
  SimQp(const SimQp&) = delete;
  SimQp& operator=(const SimQp&) = delete;
  ~SimQp();
};

inline SimQp* to_sim(ibv_qp* qp) { return reinterpret_cast<SimQp*>(qp); }
inline SimQp* to_sim(ibv_qp_ex* qpx) { return reinterpret_cast<SimQp*>(qpx); }

// ---- UD QPs (ud.cc) -------------------------------------------------------------------------
// THE MODEL (docs/DEVICES.md, "UD QPs"): a QP of ibv_create_qp with IBV_QPT_UD (mlx5 and rxe;
// siw has none: EOPNOTSUPP) on the same SimQp, in a link of its own that never gets a peer.
// ModifyVerbsQp follows the table's UD column: RESET->INIT needs STATE|PKEY_INDEX|PORT|QKEY,
// INIT->RTR STATE alone, RTR->RTS STATE|SQ_PSN; the Q_Key may change in INIT, RTR->RTS and RTS.
//   * A send (IBV_WR_SEND, _WITH_IMM) names an address handle (its GID), a QP number and a
//     Q_Key (the QP's own when the WR's has its high-order bit set). It LEAVES INSIDE THE POST,
//     with its completion (UD is unacknowledged: the completion says it left, never that it
//     arrived). Above the port's active MTU: IBV_WC_LOC_LEN_ERR, the QP to ERROR; a bad lkey:
//     IBV_WC_LOC_PROT_ERR. The extended post API is not offered on UD QPs (EOPNOTSUPP).
//   * It lands, with the sender's lock let go, in the destination QP's oldest receive (or its
//     SRQ's): the 40 bytes of a RoCE v2 GRH over IPv4 first (an IPv4 header with its checksum
//     in the last 20), then the message; byte_len counts both; src_qp, IBV_WC_GRH, the
//     immediate data, and wc.sl as the profile's NIC reports it (mlx5: 0xa, the packet type).
//     A receive too small: IBV_WC_LOC_LEN_ERR there, that QP to ERROR.
//   * It is DROPPED, the send still successful, when nothing takes it: no QP of that number at
//     that GID (or nobody at that GID), a QP not in RTR / RTS, another Q_Key, no receive posted
//     (a UD responder has no receiver-not-ready), a receiving process whose connection is over
//     its backlog. Loss otherwise only as a fault.
//   * In this process it is delivered directly; toward another process's GID over one
//     connection per destination process (verbs_qp.cc, wire::kUdSend), the receiving fabric
//     thread delivering it the same way.

// An address handle (ibv_create_ah): where a UD send goes (ud.cc).
struct SimAh final {
  ibv_ah ah;  // FIRST member
  ibv_ah_attr attr;
};

inline SimAh* to_sim(ibv_ah* ah) { return reinterpret_cast<SimAh*>(ah); }

// ibv_create_ah(pd, attr). Errors: EINVAL (no GRH: a RoCE AH names its destination by GID; a
// port other than 1; an sgid_index other than 0, the table's one populated entry), ENOMEM.
int CreateAh(SimPd* pd, const ibv_ah_attr* attr, ibv_ah** ah);
// ibv_destroy_ah(ah). A UD WR posted with it has already left (ud.cc).
int DestroyAh(SimAh* ah);

// ---- Creation and teardown (called by the connection manager) ---------------------------

// Validates `attr` against the device limits and creates an RC QP on attr->pd in INIT (an
// extended one with send_ops_flags). `join`: the link of the peer QP (the active side of a
// connection request) when there is one with a free side, else nullptr for a new link. Writes
// the granted capabilities back into attr->cap.
// Errors: EINVAL (no PD, not RC, missing CQ, caps above limits, SRQ on another PD, an unknown
// comp_mask bit), EOPNOTSUPP (send_ops_flags other than an atomic write the device supports),
// ENOMEM.
int CreateQp(ibv_qp_init_attr_ex* attr, const std::shared_ptr<SimLink>& join, SimQp** qp);
// Detaches `qp` from its link (its outstanding WRs vanish without completions, as on
// ibv_destroy_qp), takes its completions out of its CQs where the profile does (mlx5,
// SimQp::cq_cleaned_at_destroy) or forgets their slots, and frees it.
void DestroyQp(SimQp* qp);
// Moves `qp` (one side of a connection inside this process) to RTS from INIT, and resumes the
// peer's WRs that waited for it (a remote QP goes to RTS by EstablishRemote). While one side is INIT,
// the other side's WRs toward it wait at the head of its send queue, as a real requester's
// retries would.
void EnterRts(SimQp* qp);
// Moves `qp` to ERROR (flushing), if it is not there already.
void SetQpError(SimQp* qp);
// rdma_disconnect's progress point, before it moves `qp` to ERROR: what qp posted gets its
// chance to execute (to be sent, to another process), as a NIC would have put it on the wire
// by now. A WR that still cannot (its receive is not posted) is flushed by the caller's own
// disconnect without having executed: with asynchronous execution and the race detector on,
// a race line names it (`flushed by rdma_disconnect`), never a silent loss. (WRs behind one
// that fails by a fault or a protection error flush as after any error: no line.)
void DrainBeforeDisconnect(SimQp* qp);

// ---- QPs of ibv_create_qp, connected by ibv_modify_qp (no CM) ---------------------------
// THE MODEL (docs/DEVICES.md, "QPs without the CM"): as an RC QP of mlx5 or rxe on a RoCE
// port. RC only. Created in RESET; ModifyVerbsQp checks each transition's attribute mask
// against the kernel's table (ib_modify_qp_is_ok, RC column): RESET->INIT needs
// STATE|PKEY_INDEX|PORT|ACCESS_FLAGS, INIT->RTR STATE|AV|PATH_MTU|DEST_QPN|RQ_PSN|
// MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER, RTR->RTS STATE|SQ_PSN|TIMEOUT|RETRY_CNT|RNR_RETRY|
// MAX_QP_RD_ATOMIC; INIT->INIT and RTS->RTS take their optional attributes; any state goes to
// ERR or RESET with STATE alone (RESET empties its queues and, on mlx5, takes its completions
// out of its CQs); anything else is EINVAL. The AV must carry a GRH (is_global,
// sgid_index 0): the port is Ethernet. Receives may be posted from INIT, sends from RTS.
// At RTR the QP is bound to (dgid, dest_qp_num). dgid our own (ProcessGid): the QP joins the
// link of QP dest_qp_num if that one is RTR/RTS and bound back to it (else it waits alone,
// and its sends find no responder: IBV_WC_RETRY_EXC_ERR), an in-process link as the CM's, with
// asynchronous execution and the race detector; a QP bound to itself goes the cross-process
// way. A GID of this simulator names a process: every process that creates such a QP listens
// on the fabric endpoint named after its GID; RTR toward another process dials it, sends
// a kQpBind naming dest_qp_num, and the QP's link becomes a remote link over that connection
// (the remote data path below): requests go out on it and their responses come back on it,
// while the peer's requests arrive on the connection the peer dialed and are answered there.
// A request for a QP number that does not exist there, or is not bound back to the sender, or
// is not RTR/RTS yet, is dropped by a real responder: it is answered IBV_WC_RETRY_EXC_ERR,
// which the requester reports after the retry timeout. A dgid nobody listens at: the WRs
// complete IBV_WC_RETRY_EXC_ERR the same way.

// ibv_create_qp_ex(context, attr) (ibv_create_qp: comp_mask IBV_QP_INIT_ATTR_PD alone).
// Errors: EOPNOTSUPP (a QP type the simulator has not: UC, raw packet, XRC, UD on siw;
// send_ops_flags it does not model), EINVAL (unknown type, no CQ, caps above the limits, other comp_mask
// bits), ENOMEM, and the errors of listening on the process's endpoint.
int CreateVerbsQp(ibv_qp_init_attr_ex* attr, SimQp** qp);
// ibv_create_qp(pd, attr): the above with the PD alone; the granted caps into attr->cap.
int CreateVerbsQp(SimPd* pd, ibv_qp_init_attr* attr, SimQp** qp);
// ibv_modify_qp(qp, attr, attr_mask). Errors: EINVAL (a transition or mask the table above
// refuses, a bad attribute value, a QP of rdma_create_qp moved anywhere but ERR or given
// anything but RTS -> RTS's optional attributes in RTS, which it accepts and ignores).
int ModifyVerbsQp(SimQp* qp, const ibv_qp_attr* attr, int attr_mask);
// ibv_query_qp(qp, attr, attr_mask, init_attr): what was set, the current state, the caps.
int QueryVerbsQp(SimQp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr);
// ibv_destroy_qp of a QP of CreateVerbsQp, or of a CM QP whose id is gone (cm_orphan).
void DestroyVerbsQp(SimQp* qp);

// ---- Connections to another process (fabric/host.h) -------------------------------------
// THE REMOTE DATA PATH. When a QP's peer is in another process the progress step sends each
// WR, in order, as a request (wire.h) and keeps it at the head of the send queue until its
// response arrives; responses come in order and complete the WRs. The peer's requests are
// executed by this process's fabric thread against this process's memory, with every check
// the in-process path makes (rkey, range, access, receive capacity), and answered; a SEND
// (or WRITE_WITH_IMM) finding no receive waits, with every request behind it, until one is
// posted (receiver not ready, retried forever). Nothing in a message is trusted: a response
// to no outstanding WR is dropped, a status out of range becomes IBV_WC_GENERAL_ERR, a read
// response of the wrong length IBV_WC_BAD_RESP_ERR.

// Makes qp's link a link to a peer in another process, reached through `conn`.
void AttachRemote(SimQp* qp, std::shared_ptr<Transport> conn);
// Moves the local QP of a remote link to RTS (from INIT) and records the peer's QP number and
// process (`remote_pid`: the kernel's word for the connection's other end, SO_PEERCRED), and
// whether this side proved it may reach that process's memory (host::CanReach): only then are
// the peer's cross-memory-attach requests served.
void EstablishRemote(SimQp* qp, uint32_t remote_qp_num, int32_t remote_pid, bool we_reach_peer);
// The peer of qp's remote link can reach this process's memory (wire::kFlagCma).
void SetPeerReachesUs(SimQp* qp);
// The peer of qp's remote link is gone (its connection closed after a DREQ) while qp may still
// be RTS: the WR at the head of its send queue, sent or not, and any posted later, completes
// IBV_WC_RETRY_EXC_ERR after the retry timeout, as toward a destroyed responder.
void RemotePeerGone(SimQp* qp);
// Whether a response header of the peer of remote `link` may be read at all, before its body
// is: a read response no longer than the longest read this side sent (a peer must not make
// this process buffer what it only announces). REQUIRES: link->mu not held.
bool ResponseFits(const std::shared_ptr<SimLink>& link, const wire::Header& header);
// The peer of remote `link` has read its backlog (host::Conn::Handler::OnDrained): the reads
// that waited for it are served now, in order.
void ResumeRemoteLink(const std::shared_ptr<SimLink>& link);
// A data-path message (request or response) from the peer of remote `link`; runs on the
// fabric thread.
void HandleRemoteMessage(const std::shared_ptr<SimLink>& link, const wire::Header& header,
                         const uint8_t* body);

// ---- Shared receive queues --------------------------------------------------------------
// Errors: EINVAL (max_wr / max_sge zero or above the limits), ENOMEM.
int CreateSrq(SimPd* pd, ibv_srq_init_attr* attr, ibv_srq** srq);
// Errors: EBUSY (a QP uses it).
int DestroySrq(SimSrq* srq);

// ---- Asynchronous execution (sched.h) ------------------------------------------------------
// The poll points: IbvPollCq runs RunPollPoint with its CQ's links, IbvGetCqEvent with its
// channel's before each sleep. Post points are the posts themselves (PostSend, PostRecv).

// Adds `link` to `set` once (CreateQp: its CQs' sets and their channels').
void AddLink(LinkSet* set, const std::shared_ptr<SimLink>& link) ABSL_LOCKS_EXCLUDED(set->mu);
// A poll point: releases every send WR posted on the set's links and runs their progress step.
// REQUIRES: no simulator lock held.
void RunPollPoint(LinkSet* set) ABSL_LOCKS_EXCLUDED(set->mu);
// The carriers of the set's links to other processes, at most `max` of them, into `out`;
// returns how many. What a sleeper in GetCqEvent watches (cq.h).
int WaitCarriersOf(LinkSet* set, std::shared_ptr<Transport>* out, int max)
    ABSL_LOCKS_EXCLUDED(set->mu);
// A message of the peer on a connection whose QP here was destroyed (its id lives on): a
// request is answered IBV_WC_RETRY_EXC_ERR (no responder: the peer's retries run out, as on a
// NIC); anything else is dropped.
void AnswerForNoQp(Transport* conn, const wire::Header& message);
// THE PROCESS'S PROGRESS POINT: every call of the process except a post (sim_backend.cc,
// Check) releases what every link of the process holds deferred: a WR posted before a call
// has had its chance to execute (inside the process) or is on the wire (to another one), as
// on a NIC. Between two posts with no other call, the seeded post points still decide.
void RunProcessProgressPoint();

// For tests: how many links the process's progress point looks at (the links that held deferred
// WRs at their last look).
size_t ProcessProgressLinkCount();
// Whether a link of the set has send WRs that have not executed and, executed now, would
// complete on `cq` (`solicited`: one would be a solicited receive completion). The kicks'
// dry run (progress.cc, WouldCompleteLocked): a WR waiting for a receive completes nothing.
bool WouldCompleteOn(LinkSet* set, const SimCq* cq, bool* solicited) ABSL_LOCKS_EXCLUDED(set->mu);

// ---- The data path (contracts in backend.h) ---------------------------------------------

// A fault injected into the WRs of one post (fault.h): the first WR completes with `status`
// (when not IBV_WC_SUCCESS; a send when it reaches the head of the send queue, a receive at
// once) and its QP goes to ERROR; every WR's completion is ready `delay_ns` later.
struct WrFault {
  ibv_wc_status status = IBV_WC_SUCCESS;
  uint64_t delay_ns = 0;
  // A UD QP's `lost`: the first WR's datagram leaves (its send completes successfully) and
  // arrives nowhere, the one way UD loses a message (ud.cc).
  bool lose_first = false;
};

int PostSend(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault = WrFault());
int PostRecv(SimQp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr, const WrFault& fault = WrFault());
int PostSrqRecv(SimSrq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);

// The extended post API of an extended QP (contracts in backend.h). The WRs of a batch are
// posted by WrComplete as ibv_post_send posts a list, with `fault` applied to its first WR;
// a builder's error (an op not in send_ops_flags, more WRs than the send queue holds) fails
// the whole batch with EINVAL / ENOMEM.
// REQUIRES: WrStart before the builders and WrComplete, from the thread that started it.
void WrStart(SimQp* qp) ABSL_EXCLUSIVE_LOCK_FUNCTION(qp->ex_mu);
// Adds a WR of `opcode` (the fields its builder takes; the rest 0).
void WrBuild(SimQp* qp, ibv_wr_opcode opcode, uint32_t rkey, uint64_t remote_addr,
             uint32_t imm_data = 0) ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->ex_mu);
void WrAtomicWrite(SimQp* qp, uint32_t rkey, uint64_t remote_addr, const void* atomic_wr)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->ex_mu);
// ibv_wr_atomic_cmp_swp (IBV_WR_ATOMIC_CMP_AND_SWP: compare_add, swap) and
// ibv_wr_atomic_fetch_add (IBV_WR_ATOMIC_FETCH_AND_ADD: the addend in compare_add).
void WrFetchingAtomic(SimQp* qp, ibv_wr_opcode opcode, uint32_t rkey, uint64_t remote_addr,
                      uint64_t compare_add, uint64_t swap) ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->ex_mu);
// The local memory of the last WR built: SGEs, or inline data copied now.
void WrSetSgeList(SimQp* qp, size_t num_sge, const ibv_sge* sg_list)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->ex_mu);
void WrSetInlineDataList(SimQp* qp, size_t num_buf, const ibv_data_buf* buf_list)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->ex_mu);
// ibv_wr_set_ud_addr: the destination of the last WR built on a UD QP (on another QP the batch
// fails, EINVAL; mlx5 has no such setter there).
void WrSetUdAddr(SimQp* qp, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->ex_mu);
// A builder or setter the simulator does not model: the batch fails (EINVAL).
void WrUnsupported(SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->ex_mu);
int WrComplete(SimQp* qp, const WrFault& fault = WrFault()) ABSL_UNLOCK_FUNCTION(qp->ex_mu);
// Ends the batch without posting it (ibv_wr_abort).
void WrAbort(SimQp* qp) ABSL_UNLOCK_FUNCTION(qp->ex_mu);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_NIC_QP_H_
