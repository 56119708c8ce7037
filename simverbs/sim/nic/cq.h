// cq.h: completion channels (SimCompChannel) and completion queues (SimCq) of the simulator.
//
// A CQ is a fixed-capacity ring of work completions (capacity = the cqe asked for at creation;
// no allocation on the data path). Pushing to a full CQ is an overflow, as on mlx5: the
// completion is lost, the CQ enters an error state for good (every later completion is lost
// too), the device queues IBV_EVENT_CQ_ERR for it (IbvGetAsyncEvent; the CQ cannot be destroyed
// until that event is acknowledged, once got) and the QPs using it go to the error state
// (qp.cc: when they are next used, see SimQp). The completions queued before the overflow can
// still be polled; then the CQ stays empty.
//
// Simulated time (sched.h): each completion carries the ready time its QP's CompletionTimer
// gave it, and the ring is kept in (ready time, seeded key) order, so completions of different
// QPs sharing a CQ come out in a seed-decided interleaving while one QP's stay in order (its
// ready times strictly increase). A new completion is always ready later than the clock, so it
// never overtakes one that is due already. IbvPollCq takes the earliest completions and moves
// the clock to the ready time of the last one taken: it never returns fewer than it could.
//
// Notification follows hardware: IbvReqNotifyCq arms the CQ; the next completion added to an
// armed CQ (solicited or error only, for a solicited-only arm) disarms it and queues one event
// (the CQ, due at the completion's ready time) on its channel, raising the channel's eventfd.
// Completions already in the CQ when it is armed send nothing; completions on an unarmed CQ
// send nothing. A channel delivers its events in due-time order, and IbvGetCqEvent moves the
// clock to the event's time. An arm muted by a no_notify fault disarms without an event.
//
// Each CQ counts the events IbvGetCqEvent delivered and IbvAckCqEvents acknowledged;
// destroying a CQ with unacknowledged events is EBUSY (libibverbs would block forever).
//
// THE EXTENDED CQ (CreateCqEx, ibv_create_cq_ex(3)). A SimCq begins with a union of ibv_cq and
// ibv_cq_ex (the ibv_cq_ex begins with the ibv_cq's fields, as in rdma-core's struct verbs_cq),
// so ibv_cq_ex_to_cq's cast gives the same CQ: every call on an ibv_cq works on it. Its ops are
// a provider's: start_poll takes the earliest completion (ENOENT when there is none), next_poll
// the next one, end_poll ends the batch, each sets cq_ex->wr_id and status, and the read_*
// ops read the current one. start_poll and next_poll are each one IbvPollCq of one entry by the
// backend that made the CQ (CreateCqEx's `poller`), so faults of ibv_poll_cq, the poll point of
// asynchronous execution, the progress of remote connections and the poison of what verbs
// leaves undefined are theirs too; a failing poll is their error code (kNoErrno: EIO). Only the
// readers of the fields attr->wc_flags asks for are set, as mlx5 sets them (read_opcode,
// read_vendor_err and read_wc_flags always): reading another field calls NULL, on a real NIC
// too. Fields the simulator has no value for (timestamps, CVLAN, flow tag, tag matching) are
// refused at creation (EOPNOTSUPP).
// Thread-safety of a batch: a successful start_poll holds the CQ's batch lock until end_poll,
// as mlx5 holds its CQ lock, so another thread's start_poll of the same CQ waits for the batch
// (IBV_CREATE_CQ_ATTR_SINGLE_THREADED is taken as a hint: the simulator locks anyway). A batch
// touches nothing of other CQs: batches of different CQs in different threads run in parallel.
// IbvPollCq does not take the batch lock (completions are handed out once each, to whichever
// poll takes them). Misuse that would deadlock or corrupt the batch fails instead: start_poll
// inside the same thread's open batch and next_poll outside one give EINVAL, end_poll outside
// one does nothing.
//
// Lock order (the whole simulator): SimCq::batch_mu_ -> LinkSet::mu -> SimLink::mu ->
// SimPd::mu (shared) -> SimSrq::mu -> SimCq::mu_ -> SimCompChannel::mu -> the tracer's mutex
// (trace.h). IbvPollCq takes the CQ's mutex (and the tracer's when tracing), after its poll
// point (qp.h); a batch holds its CQ's batch lock over its polls (no simulator code takes one
// while holding another lock).

#ifndef SOFTRPMA_SIMVERBS_SIM_NIC_CQ_H_
#define SOFTRPMA_SIMVERBS_SIM_NIC_CQ_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "simverbs/backend.h"
#include "simverbs/mutex.h"
#include "simverbs/sim/nic/device.h"
#include "simverbs/sim/fabric/transport.h"
#include "simverbs/sim/sched/sched.h"
#include "simverbs/sim/signal_fd.h"

namespace softrpma::sim {

// What verbs leaves undefined in a completion, a real provider leaves as its memory happened to
// be; the simulator hands those fields out as poison (0xA5 bytes; the opcode 0xA5), so a program
// reading them reads nonsense here too: on an error completion everything but wr_id, status,
// qp_num and vendor_err; byte_len of a successful send-side RDMA WRITE or SEND (verbs defines
// it only for receives, RDMA READ and atomics). Applied to each completion IbvPollCq returns
// (the trace shows what the simulator knows).
inline constexpr uint32_t kWcPoison = 0xA5A5A5A5;
// The opcode of an error completion: a value no opcode has, yet inside the enum's range (an
// out-of-range enum value would be undefined behaviour for a C++ caller, caught by UBSan).
inline constexpr ibv_wc_opcode kWcPoisonOpcode = static_cast<ibv_wc_opcode>(0xA5);
void PoisonUndefinedFields(ibv_wc* wc);

struct SimCq;
struct SimLink;

// The connections whose QPs use a CQ (or a CQ of a channel): what a poll point of asynchronous
// execution (sched.h) runs (qp.h: AddLink, RunPollPoint). Links stay until they are freed (the
// set forgets expired ones when a link is added).
struct LinkSet final {
  softrpma::Mutex mu;  // lock order: before SimLink::mu
  std::vector<std::weak_ptr<SimLink>> links ABSL_GUARDED_BY(mu);
};

// One pending completion event: the CQ it names and when it is due.
struct ChannelEvent {
  SimCq* cq;
  uint64_t due_ns;
  uint64_t order;  // seeded tie-break
};

// A completion channel: a queue of CQ events behind a pollable eventfd.
struct SimCompChannel final {
  ibv_comp_channel channel;  // FIRST member
  uint32_t number;           // 1, 2, ... in creation order (trace id)

  softrpma::Mutex mu;
  // Pending events in (due_ns, order) order.
  std::deque<ChannelEvent> events ABSL_GUARDED_BY(mu);
  std::vector<SimCq*> cqs ABSL_GUARDED_BY(mu);  // CQs created on this channel, oldest first
  SignalFd signal;
  LinkSet links;  // the links of the QPs on its CQs

  explicit SimCompChannel(SimDevice* device);
  SimCompChannel(const SimCompChannel&) = delete;
  SimCompChannel& operator=(const SimCompChannel&) = delete;
};

inline SimCompChannel* to_sim(ibv_comp_channel* channel) {
  return reinterpret_cast<SimCompChannel*>(channel);
}

// One queued completion. `retire` queue slots counted by `slots` (a QP's send or receive
// queue, an SRQ) are released when the user polls it (see SimQp::sq_in_use, rq_in_use).
struct CqEntry {
  ibv_wc wc;
  std::atomic<uint32_t>* slots;
  uint32_t retire;
  uint64_t ready_ns;  // when it arrives, in simulated time
  uint64_t order;     // seeded tie-break between equal ready times
};

struct SimCq final {
  // FIRST member: the CQ as verbs sees it; cq_ex only on a CQ of CreateCqEx (see file comment).
  union {
    ibv_cq cq;
    ibv_cq_ex cq_ex;
  };
  SimDevice* device;
  SimCompChannel* channel;  // may be nullptr
  bool is_dummy;            // the "unknown_cq" fault's CQ: on no channel, never destroyed

  // Events got with IbvGetCqEvent / acknowledged with IbvAckCqEvents. Updated under the
  // channel's mutex (delivered) or lock-free (acked).
  std::atomic<uint64_t> events_delivered{0};
  std::atomic<uint64_t> events_acked{0};
  // QPs using this CQ (for EBUSY on destroy).
  std::atomic<int> users{0};
  // Set once, on the first overflow.
  std::atomic<bool> overflowed{false};
  // Its IBV_EVENT_CQ_ERR got with IbvGetAsyncEvent / acknowledged with IbvAckAsyncEvent.
  std::atomic<uint32_t> async_events_delivered{0};
  std::atomic<uint32_t> async_events_acked{0};

  SimCq(SimDevice* device, int cqe, void* cq_context, SimCompChannel* channel, bool is_dummy);
  SimCq(const SimCq&) = delete;
  SimCq& operator=(const SimCq&) = delete;
  ~SimCq();

  // Adds one completion, ready at `slot` (`solicited`: the sender asked for a solicited
  // event). Queues an event when armed. Returns false when the CQ has overflowed (now or
  // before): the completion was dropped.
  bool Push(const ibv_wc& wc, bool solicited, std::atomic<uint32_t>* slots, uint32_t retire,
            CompletionTimer::Slot slot) ABSL_LOCKS_EXCLUDED(mu_);
  // ibv_poll_cq: the earliest completions, moving the clock to the last one's ready time.
  // Returns 0.
  int Poll(int num_entries, ibv_wc* wc, int* num_polled) ABSL_LOCKS_EXCLUDED(mu_);
  // ibv_req_notify_cq. `muted` (a no_notify fault): the arm is taken but sends no event.
  // Returns 0 or EINVAL (no channel).
  int ReqNotify(bool solicited_only, bool muted = false) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes out every completion of QP `qp_num`, polled or not (mlx5's CQ clean at
  // ibv_destroy_qp and at a move to RESET), releasing the queue slots they hold (an SRQ's
  // among them); the others keep their order. Returns how many were taken out.
  size_t Clean(uint32_t qp_num) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the queue slots of a QP being destroyed (its completions stay pollable).
  void ForgetSlots(std::atomic<uint32_t>* slots) ABSL_LOCKS_EXCLUDED(mu_);
  // Releases, and forgets, the SRQ slots `slots` held by the completions of QP `qp_num` (being
  // destroyed; the SRQ lives on).
  void ReleaseSlots(std::atomic<uint32_t>* slots, uint32_t qp_num) ABSL_LOCKS_EXCLUDED(mu_);

  // A QP on this CQ is connected to another process through `conn` (fabric/host.h). An empty
  // poll then drives those connections itself (ProgressRemotes), so that a busy-polling
  // program's completions do not wait for the fabric thread to be scheduled.
  void AddRemote(const std::shared_ptr<Transport>& conn) ABSL_LOCKS_EXCLUDED(mu_);
  bool has_remote() const { return has_remote_.load(std::memory_order_relaxed); }
  // Conn::Progress() of each live connection added. REQUIRES: no simulator lock held.
  void ProgressRemotes() ABSL_LOCKS_EXCLUDED(mu_);

  // Asynchronous execution: a WR that will complete on this CQ (or consume a receive whose
  // completion comes here; `solicited`: with IBV_SEND_SOLICITED) was posted and has not
  // executed. When the CQ is armed for it, its channel's fd becomes readable, so that a
  // program waiting in poll(2) / epoll calls ibv_get_cq_event, whose poll point executes it (a
  // NIC does not wait for the program). Only when executing would complete something here (a
  // dry run, progress.cc WouldCompleteLocked): a SEND whose receive is not posted kicks nothing
  // until one is, as a real channel stays unreadable while its sender retries. An error
  // completion of a WR that was not expected to complete here (unsignaled, or unsolicited
  // under a solicited-only arm) kicks nothing: it comes at the next poll point.
  void Kick(bool solicited) ABSL_LOCKS_EXCLUDED(mu_);

  LinkSet links;  // the links of the QPs using this CQ

  // ---- The extended CQ (see file comment); the ops of cq_ex call these. -------------------
  // Makes this CQ an extended one: its polls go through `poller`'s IbvPollCq, the readers of
  // `wc_flags` (already checked by CreateCqEx) are set. REQUIRES: before the CQ is handed out.
  void MakeExtended(Backend* poller, uint64_t wc_flags);
  // ibv_start_poll: 0 (the first completion is current; the batch lock is held), ENOENT (none),
  // EINVAL (attr NULL or attr->comp_mask not 0, or a batch of this thread is open), or the
  // poll's error (the batch lock is not held after a failure).
  // (It takes the batch lock and returns holding it: not expressible to the analysis.)
  int StartPoll(const ibv_poll_cq_attr* attr) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // ibv_next_poll: 0, ENOENT, the poll's error; EINVAL outside a batch of this thread.
  int NextPoll();
  // ibv_end_poll: releases the batch. Outside a batch of this thread: nothing.
  void EndPoll() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // The current completion of the open batch (what the read_* ops read). REQUIRES: the caller's
  // batch is open and its last start_poll / next_poll returned 0.
  const ibv_wc& current() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return current_; }
  // Whether a thread's batch is open (DestroyCq then refuses: EBUSY).
  bool batch_open() const {
    return batch_owner_.load(std::memory_order_acquire) != std::thread::id();
  }

 private:
  // One IbvPollCq of one entry into current_; sets cq_ex.wr_id and status. REQUIRES: the
  // calling thread holds batch_mu_ (across calls: not expressible to the analysis).
  int PollCurrent() ABSL_NO_THREAD_SAFETY_ANALYSIS;

  Backend* poller_ = nullptr;  // of an extended CQ: whose IbvPollCq start_poll / next_poll use
  softrpma::Mutex batch_mu_;   // held from a successful StartPoll to EndPoll
  std::atomic<std::thread::id> batch_owner_{};  // the thread whose batch is open, or none
  ibv_wc current_ ABSL_GUARDED_BY(batch_mu_);

  enum class Arm : uint8_t { kNone, kAny, kSolicited };
  void SetArm(bool solicited_only, bool muted) ABSL_LOCKS_EXCLUDED(mu_);

  softrpma::Mutex mu_;
  // Grows the ring (doubling, at most capacity_) when it is full below capacity_: a CQ of
  // millions of entries (mlx5's max_cqe is 4 M) costs what it holds, not 80 B per entry up front.
  // False, the ring unchanged, when the memory cannot be had (Push then fails the CQ as an
  // overflow would, and says why on stderr: never a crash in the middle of the NIC's work).
  bool GrowRing() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t capacity_ = 0;  // cq.cqe: the entries it holds before it overflows
  std::vector<CqEntry> ring_ ABSL_GUARDED_BY(mu_);  // a circular buffer, head_ first
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  // count_, readable without mu_ (written under it): Poll's empty check takes no lock.
  std::atomic<size_t> queued_{0};
  Arm arm_ ABSL_GUARDED_BY(mu_) = Arm::kNone;
  // arm_ != kNone, written under mu_ with arm_ and readable without it: Kick, called at every
  // post, takes no lock on a CQ nobody armed.
  std::atomic<bool> armed_{false};
  std::atomic<bool> has_remote_{false};
  std::vector<std::weak_ptr<Transport>> remotes_ ABSL_GUARDED_BY(mu_);
  bool arm_muted_ ABSL_GUARDED_BY(mu_) = false;
};

inline SimCq* to_sim(ibv_cq* cq) { return reinterpret_cast<SimCq*>(cq); }
inline SimCq* to_sim(ibv_cq_ex* cq) { return reinterpret_cast<SimCq*>(cq); }

// The wc_flags of ibv_cq_init_attr_ex the simulator gives (IBV_WC_STANDARD_FLAGS: every field
// of an ibv_wc), and those verbs defines (IBV_CREATE_CQ_SUP_WC_FLAGS).
inline constexpr uint64_t kSupportedWcFlags = IBV_WC_STANDARD_FLAGS;
inline constexpr uint64_t kKnownWcFlags = IBV_CREATE_CQ_SUP_WC_FLAGS;

// ---- The verbs calls of this module (see backend.h for each contract) -------------------
int CreateCompChannel(SimDevice* device, ibv_comp_channel** channel);
int DestroyCompChannel(SimCompChannel* channel);
int CreateCq(SimDevice* device, int cqe, void* cq_context, SimCompChannel* channel, int comp_vector,
             ibv_cq** cq);
// ibv_create_cq_ex. The CQ's start_poll / next_poll are IbvPollCq calls of `poller` (the
// backend that makes it).
int CreateCqEx(SimDevice* device, const ibv_cq_init_attr_ex& attr, Backend* poller,
               ibv_cq_ex** cq);
int DestroyCq(SimCq* cq);
// Blocks (or EAGAIN on an O_NONBLOCK fd) until the channel has an event; returns the CQ of
// the earliest one and moves the clock to its due time. `poll_point` (when not nullptr) runs
// with the channel's links, no lock held, before each look at the queue: asynchronous
// execution's poll point before a sleep (a kick wakes the sleeper to run it again).
// `carriers` (when not nullptr) gives up to its last argument of the links' carriers to other
// processes (qp.h, WaitCarriersOf): while asleep, the waiter handles their messages itself.
int GetCqEvent(SimCompChannel* channel, ibv_cq** cq, void** cq_context,
               void (*poll_point)(LinkSet*) = nullptr,
               int (*carriers)(LinkSet*, std::shared_ptr<Transport>*, int) = nullptr);
// The "spurious" fault: an event, at once, of the channel's oldest CQ, with nothing new in it
// (counted as delivered: it must be acknowledged). The channel's real events stay queued.
// Returns 0, or EINVAL when no CQ uses the channel.
int SpuriousCqEvent(SimCompChannel* channel, ibv_cq** cq, void** cq_context);
void AckCqEvents(SimCq* cq, unsigned int nevents);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_NIC_CQ_H_
