// nic_internal.h: what the files of the simulated NIC (simverbs/sim/nic/) share and nothing
// outside them may use. qp.h is the NIC's face; this header is how its jobs reach each other,
// one file per job, as the kernel's soft-RoCE splits rxe_req.c, rxe_resp.c and rxe_comp.c:
//
//   segments.cc   the memory of one side of a WR, and the copy between two sides
//   requester.cc  THE PROGRESS STEP: a send queue's WRs, in order, each handed to the link's
//                 carrier (carrier.h) when its time has come
//   carrier_local.cc  THE LOCAL CARRIER: a WR executed against the peer QP of this process (the
//                 requester hands it to the responder under the link's lock)
//   carrier_host.cc   THE HOST CARRIER: a WR sent as a request over the link's Transport to
//                 the peer's NIC in another process
//   responder.cc  THE RESPONDER: what the target's NIC does with a request, whichever carrier
//                 brought it; the peer's waiting requests and THE BUDGET of them
//   completer.cc  send and receive completions, the retirement of a send queue's head, and a
//                 response of another process's responder
//   races.cc      the race detector's hooks (sched.h): source bytes kept at post, checked at
//                 execution; read destinations and receives poisoned
//   progress.cc   where WRs get their chance to execute: post and poll points, the process's
//                 progress point, the backstop for links to other processes, and kicks
//   post.cc       ibv_post_send / ibv_post_recv: validation and queueing
//   extended_post.cc  the extended post API (ibv_wr_*): a batch built, then posted by post.cc
//   srq.cc        shared receive queues
//   qp.cc         QP creation, destruction and state (the CM's transitions, ERROR and its
//                 flushes), and the entry points of the HOST carrier's connection
//   verbs_qp.cc   QPs of ibv_create_qp / ibv_modify_qp (no CM) and how they find their peer
//
// Each function's contract is at its definition. Locks as in qp.h (link, then SRQ, then PD).

#ifndef SOFTRPMA_SIMVERBS_SIM_NIC_NIC_INTERNAL_H_
#define SOFTRPMA_SIMVERBS_SIM_NIC_NIC_INTERNAL_H_

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "simverbs/sim/fabric/transport.h"
#include "simverbs/sim/fabric/wire.h"
#include "simverbs/sim/nic/opcodes.h"
#include "simverbs/sim/nic/qp.h"

namespace softrpma::sim::nic_internal {

// ---- segments.cc -----------------------------------------------------------------------------

// A contiguous piece of memory on one side of a copy.
struct Segment {
  uint8_t* ptr;
  uint64_t length;
};

// The memory of one side of a WR: at most kMaxSge pieces.
struct Segments {
  std::array<Segment, kMaxSge> pieces;
  int count = 0;
  uint64_t total = 0;

  void Add(uint8_t* ptr, uint64_t length) {
    pieces[count++] = Segment{ptr, length};
    total += length;
  }
};

inline uint8_t* AsPtr(uint64_t addr) {
  return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(addr));
}

void Copy(const Segments& src, const Segments& dst);

// Where the bytes of a message are. Always in this process: a cross-memory-attach request's
// data is fetched into a buffer of this process before it is served (ServeRequestLocked).
struct MessageSource {
  const Segments* local = nullptr;
  uint64_t total = 0;

  // Copies the message into the front of `dst` (REQUIRES: dst.total >= total). True.
  bool CopyTo(const Segments& dst) const {
    Copy(*local, dst);
    return true;
  }
};

MessageSource LocalSource(const Segments& segments);
bool GatherSges(SimQp* qp, const SendWqe& wqe, int need_access, Segments* out);
bool GatherLocal(SimQp* qp, SendWqe& wqe, int need_access, Segments* out);
int ToIovecs(const Segments& segments, iovec* iov);

// The row of a posted WR's opcode (ValidateSend lets only modelled ones in).
inline const Opcode& RowOf(ibv_wr_opcode opcode) { return *FindOpcode(opcode); }

// ---- requester.cc, carrier_local.cc -------------------------------------------------------

// The result of executing the head of a send queue in this process (the LOCAL carrier).
struct Outcome {
  bool wait;  // receiver not ready: the WR stays at the head
  ibv_wc_status status;
  uint64_t byte_len;
  uint64_t delay_ns;  // the completion is ready that much later (the retry timeout)
};

constexpr Outcome kWait{true, IBV_WC_SUCCESS, 0, 0};
inline Outcome Done(ibv_wc_status status, uint64_t byte_len = 0) {
  return Outcome{false, status, byte_len, 0};
}
// The responder is gone or in ERROR: the requester's retries run out (qp.h).
constexpr Outcome kRetryExceeded{false, IBV_WC_RETRY_EXC_ERR, 0, kRetryTimeoutNs};

void ProgressQpLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void ProgressLinkLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);

// The local QP of a remote link (its one side), or nullptr once it was destroyed.
inline SimQp* LocalSideLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  return link->side[0] != nullptr ? link->side[0] : link->side[1];
}

// ---- responder.cc ----------------------------------------------------------------------------

enum class Readiness {
  kReady,
  kNotYet,  // the responder drops what arrives and the requester retries: the request waits
  kGone,    // no responder, or one in ERROR / RESET: the requester's retries run out
};

// What a receive learns of the message that consumed it, and who waits when none is posted.
struct Delivery {
  const std::shared_ptr<SimLink>* waiter;  // resumed by the SRQ's next post
  uint32_t src_qp;
  bool solicited;
  bool with_imm;
  uint32_t imm_data;  // network order
  bool grh;            // a UD receive: its buffer starts with the 40 bytes of a GRH
};

Readiness ReadinessOf(const SimQp* responder);
ibv_wc_status CheckTargetLocked(SimQp* responder, const Opcode& op, uint32_t rkey, uint64_t addr,
                                uint64_t length, Segments* remote);
Outcome ApplyLocked(SimQp* responder, const Opcode& op, const Delivery& delivery,
                    const MessageSource& src, const Segments& remote);
Outcome DeliverToReceive(SimQp* peer, const Delivery& delivery, const MessageSource& src,
                         const Segments* remote);
uint64_t ExecuteFetchingAtomic(const Opcode& op, const Segments& remote, uint64_t compare_add,
                               uint64_t swap);
bool IsRequest(uint16_t type);
void Respond(Transport* out, const wire::Header& request, ibv_wc_status status,
             const Segments* data);
std::shared_ptr<Transport> ServingConnLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void RespondLocked(SimLink* link, const wire::Header& request, ibv_wc_status status,
                   const Segments* data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void ClearIncomingLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void PeerGoneLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void DrainIncomingLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void ServeOrQueueLocked(SimLink* link, SimQp* qp, const wire::Header& header,
                        const uint8_t* body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);

// ---- carrier_host.cc -------------------------------------------------------------------------

// THE REQUESTER PUSH's grant (carrier_host.cc, PushLocked): publishes to the peer of qp's link
// in another process whether qp takes its writes now (ready, and remote write in its access)
// and in which domain (its PD); a grant withdrawn waits for a push in flight. Called wherever
// qp's state or remote access changes. REQUIRES: qp->link->mu held.
void PublishGrantLocked(SimQp* qp);
// Withdraws the grant of the link's QP and waits for a push in flight (the link's carrier ends,
// or its QP goes). REQUIRES: link->mu held.
void WithdrawGrantLocked(SimLink* link);

// ---- completer.cc ----------------------------------------------------------------------------

void CompleteSend(SimQp* qp, uint64_t wr_id, ibv_wr_opcode opcode, bool signaled,
                  ibv_wc_status status, uint64_t byte_len, uint64_t delay_ns = 0);
void CompleteRecv(SimQp* qp, uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode,
                  uint64_t byte_len, const Delivery* delivery, uint64_t delay_ns = 0);
// The process's unexecuted WRs, all links together: the process's progress point
// (RunProcessProgressPoint) looks no further while there are none.
extern std::atomic<uint64_t> g_unexecuted;
void MarkExecutedLocked(SimLink* link, SendWqe& wqe);
void PopSendLocked(SimQp* qp);
void PopAndCompleteSendLocked(SimQp* qp, ibv_wc_status status, uint64_t byte_len,
                              bool force_signaled, uint64_t extra_delay_ns);
// A WR that leaves its send queue (PopSendLocked, PopAndCompleteSendLocked, a destroyed QP): a
// copy its peer made of it by cross-memory attach (SendWqe::sent_cma) no longer counts for
// cma::Pending.
void ForgetPeerCopy(SendWqe& wqe);
void RetireHeadLocked(SimQp* qp, ibv_wc_status status, uint64_t byte_len,
                      uint64_t extra_delay_ns = 0);
void HandleResponseLocked(SimLink* link, SimQp* qp, const wire::Header& response,
                          const uint8_t* body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);

// ---- races.cc --------------------------------------------------------------------------------

void WatchAtPost(SimQp* qp, SendWqe& wqe);
void CheckRace(const SimQp* qp, const SendWqe& wqe, const Segments& local);
// `max_bytes`: the most of it poisoned (races.cc): a UD receive's GRH and MTU, or
// kPoisonedReceiveBytes.
void PoisonReceive(SimPd* pd, const ibv_recv_wr* wr, uint32_t max_sge, uint64_t max_bytes);


// ---- progress.cc -----------------------------------------------------------------------------

// Where the unexecuted WRs of `qp` would complete if its link executed them now: on its send
// CQ (a signaled WR, or an error), on its peer's receive CQ (a WR consuming a receive that is
// there; `recv_solicited` when such a WR is IBV_SEND_SOLICITED).
struct WouldComplete {
  bool send = false;
  bool recv = false;
  bool recv_solicited = false;
};

WouldComplete WouldCompleteLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
bool SelfOnHostTransportLocked(const SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void KickForLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void KickLinkLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void ScheduleDeferredSends(const std::shared_ptr<SimLink>& link, bool backstop);
// A link of this process got a carrier to another process (AttachRemote): from then on a
// sleeper in GetCqEvent looks for carriers to watch (WaitCarriersOf); until then it does not
// walk its channel's links (a process of in-process links only pays nothing).
void NoteRemoteLink();

// ---- post.cc ---------------------------------------------------------------------------------

int PostSendWrs(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault,
                bool extended);
int ValidateRecv(const ibv_recv_wr* wr, uint32_t max_sge);
void InitReceiveQueue(Ring<RecvWqe>* rq, uint32_t max_wr, uint32_t max_sge);
void FillRecv(const ibv_recv_wr* wr, RecvWqe* wqe);
uint64_t RecvCapacity(const ibv_recv_wr* wr);

// ---- qp.cc -----------------------------------------------------------------------------------

void SetStateLocked(SimQp* qp, ibv_qp_state state);
std::shared_ptr<Transport> DetachRemoteLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu);
void EnterErrorLocked(SimQp* qp);
void CheckOverflowLocked(SimQp* qp);
uint64_t ModelledSendOps();
// Takes the completions of `qp` out of its CQs (SimCq::Clean): its destruction, or its move to
// RESET, where its profile does (SimQp::cq_cleaned_at_destroy).
void CleanCqs(SimQp* qp);

// The fields ibv_qp_init_attr and ibv_qp_init_attr_ex share, from one to the other.
template <typename To, typename From>
void CopyCommonInitAttr(const From& from, To* to) {
  to->qp_context = from.qp_context;
  to->send_cq = from.send_cq;
  to->recv_cq = from.recv_cq;
  to->srq = from.srq;
  to->cap = from.cap;
  to->qp_type = from.qp_type;
  to->sq_sig_all = from.sq_sig_all;
}

// ---- ud.cc, verbs_qp.cc: UD QPs (qp.h, "UD QPs") ------------------------------------------

// The bytes a UD receive gets before the message (ibv_grh).
inline constexpr uint32_t kGrhBytes = 40;

// One UD message, as it leaves its QP: everything the destination's NIC learns of it.
struct UdDatagram {
  uint32_t src_qp;
  uint32_t dst_qp;
  uint32_t qkey;
  uint32_t imm_data;  // network order
  uint32_t length;    // the payload's bytes, at most UdMtuBytes()
  bool with_imm;
  bool solicited;
  uint8_t hop_limit;
  uint8_t traffic_class;
  uint8_t src_gid[16];
  uint8_t dst_gid[16];
};

// The path MTU of a UD message: the port's active MTU, in bytes.
uint32_t UdMtuBytes();
// The GRH a receive of `datagram` gets, at the NIC of the GID `dgid`.
void BuildUdGrh(const UdDatagram& datagram, const uint8_t dgid[16], uint8_t grh[kGrhBytes]);
// `datagram` (its `length` bytes at `payload`) arriving at UD QP `qp`: into its oldest receive
// (or its SRQ's), behind the GRH. False when dropped: not RTR / RTS, another Q_Key, no receive.
// REQUIRES: qp->link->mu held.
bool DeliverUdLocked(SimQp* qp, const UdDatagram& datagram, const uint8_t* payload)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(qp->link->mu);
// ibv_post_send on a UD QP: each WR leaves (and completes) inside the post.
// `extended` (ibv_wr_complete's batch): all of the list or none (ibv_wr_post(3)): every WR is
// checked before the first leaves.
int PostUdSendWrs(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault,
                  bool extended = false);
// The link of this process's UD QP `qp_num`, or nullptr.
std::shared_ptr<SimLink> FindUdLink(uint32_t qp_num);
// A datagram to a GID of another process: over a connection to that process's endpoint, or
// lost when nobody is there.
void SendUdToProcess(const UdDatagram& datagram, const uint8_t* payload);

}  // namespace softrpma::sim::nic_internal

#endif  // SOFTRPMA_SIMVERBS_SIM_NIC_NIC_INTERNAL_H_
