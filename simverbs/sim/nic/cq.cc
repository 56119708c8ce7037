#include "simverbs/sim/nic/cq.h"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

#include "simverbs/alloc.h"
#include "simverbs/sim/trace/trace.h"
#include "simverbs/sim/waits.h"

namespace softrpma::sim {
namespace {

bool Before(uint64_t ready_a, uint64_t order_a, uint64_t ready_b, uint64_t order_b) {
  return ready_a != ready_b ? ready_a < ready_b : order_a < order_b;
}

// Queues an event of `cq` due at `due_ns` on `channel`, in due-time order.
// REQUIRES: channel->mu held.
void QueueEventLocked(SimCompChannel* channel, SimCq* cq, uint64_t due_ns, uint64_t order)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(channel->mu) {
  auto& events = channel->events;
  if (events.empty()) {
    channel->signal.Raise();
  } else {
    channel->signal.Wake();
  }
  auto pos = events.end();
  while (pos != events.begin()) {
    auto prev = pos - 1;
    if (!Before(due_ns, order, prev->due_ns, prev->order)) break;
    pos = prev;
  }
  events.insert(pos, ChannelEvent{cq, due_ns, order});
}

void TraceWc(const char* type, uint32_t cq, const ibv_wc& wc, const uint64_t* ready_ns) {
  const std::string status = NameOr(WcStatusName(wc.status), wc.status);
  const std::string opcode = NameOr(WcOpcodeName(wc.opcode), wc.opcode);
  if (ready_ns != nullptr) {
    TraceEvent("%s cq=%u qp=%u wr_id=0x%llx status=%s opcode=%s byte_len=%u ready=%llu", type, cq,
               wc.qp_num, static_cast<unsigned long long>(wc.wr_id), status.c_str(), opcode.c_str(),
               wc.byte_len, static_cast<unsigned long long>(*ready_ns));
  } else {
    TraceEvent("%s cq=%u qp=%u wr_id=0x%llx status=%s opcode=%s byte_len=%u", type, cq, wc.qp_num,
               static_cast<unsigned long long>(wc.wr_id), status.c_str(), opcode.c_str(),
               wc.byte_len);
  }
}

}  // namespace

SimCompChannel::SimCompChannel(SimDevice* device)
    : number(device->next_comp_channel_number.fetch_add(1, std::memory_order_relaxed)) {
  std::memset(&channel, 0, sizeof(channel));
  channel.context = &device->context;
  channel.fd = -1;
}

// The ibv_cq_ex begins with the ibv_cq's fields (SimCq's union relies on it, as rdma-core's
// verbs_cq does).
static_assert(offsetof(ibv_cq_ex, context) == offsetof(ibv_cq, context));
static_assert(offsetof(ibv_cq_ex, channel) == offsetof(ibv_cq, channel));
static_assert(offsetof(ibv_cq_ex, cq_context) == offsetof(ibv_cq, cq_context));
static_assert(offsetof(ibv_cq_ex, handle) == offsetof(ibv_cq, handle));
static_assert(offsetof(ibv_cq_ex, cqe) == offsetof(ibv_cq, cqe));
static_assert(offsetof(ibv_cq_ex, mutex) == offsetof(ibv_cq, mutex));
static_assert(offsetof(ibv_cq_ex, cond) == offsetof(ibv_cq, cond));
static_assert(offsetof(ibv_cq_ex, comp_events_completed) ==
              offsetof(ibv_cq, comp_events_completed));
static_assert(offsetof(ibv_cq_ex, async_events_completed) ==
              offsetof(ibv_cq, async_events_completed));

// The entries a new CQ's ring has room for before it first grows (GrowRing).
constexpr size_t kInitialRingEntries = 256;

SimCq::SimCq(SimDevice* dev, int cqe, void* cq_context, SimCompChannel* comp_channel, bool dummy)
    : device(dev), channel(comp_channel), is_dummy(dummy) {
  std::memset(&cq_ex, 0, sizeof(cq_ex));  // the whole union: a plain CQ's cq_ex ops are NULL
  cq.context = &dev->context;
  cq.channel = comp_channel != nullptr ? &comp_channel->channel : nullptr;
  cq.cq_context = cq_context;
  // The dummy CQ takes no number: numbers stay the same whatever the tests before did.
  cq.handle = dummy ? 0 : dev->next_cq_handle.fetch_add(1, std::memory_order_relaxed);
  cq.cqe = cqe;
  pthread_mutex_init(&cq.mutex, nullptr);
  pthread_cond_init(&cq.cond, nullptr);
  capacity_ = static_cast<size_t>(cqe);
  softrpma::MutexLock lock(&mu_);
  ring_.resize(std::min(capacity_, kInitialRingEntries));
}

bool SimCq::GrowRing() {
  std::vector<CqEntry> grown;
  try {
    grown.resize(std::min(capacity_, 2 * ring_.size()));
  } catch (const std::bad_alloc&) {
    return false;
  }
  for (size_t i = 0; i < count_; ++i) grown[i] = ring_[(head_ + i) % ring_.size()];
  ring_.swap(grown);
  head_ = 0;
  return true;
}

SimCq::~SimCq() {
  pthread_cond_destroy(&cq.cond);
  pthread_mutex_destroy(&cq.mutex);
}

bool SimCq::Push(const ibv_wc& wc, bool solicited, std::atomic<uint32_t>* slots, uint32_t retire,
                 CompletionTimer::Slot slot) {
  softrpma::MutexLock lock(&mu_);
  if (overflowed.load(std::memory_order_relaxed)) return false;
  bool out_of_memory = false;
  if (count_ == ring_.size() && count_ < capacity_ && !GrowRing()) {
    out_of_memory = true;
    std::fprintf(stderr,
                 "softrpma-sim: out of memory growing CQ %u's ring beyond %zu entries: the CQ "
                 "fails as on an overflow (IBV_EVENT_CQ_ERR)\n",
                 cq.handle, ring_.size());
  }
  if (count_ == capacity_ || out_of_memory) {
    overflowed.store(true, std::memory_order_release);
    if (TraceOn()) TraceEvent("cq_overflow cq=%u", cq.handle);
    ibv_async_event event;
    std::memset(&event, 0, sizeof(event));
    event.element.cq = &cq;
    event.event_type = IBV_EVENT_CQ_ERR;
    device->QueueAsyncEvent(event);
    return false;
  }
  // Insert in (ready, order) order, from the tail: new completions are usually the latest.
  const size_t capacity = ring_.size();
  size_t pos = count_;  // index from head_ where the entry goes
  while (pos > 0) {
    const CqEntry& prev = ring_[(head_ + pos - 1) % capacity];
    if (!Before(slot.ready_ns, slot.order, prev.ready_ns, prev.order)) break;
    ring_[(head_ + pos) % capacity] = prev;
    --pos;
  }
  CqEntry& entry = ring_[(head_ + pos) % capacity];
  entry.wc = wc;
  entry.slots = slots;
  entry.retire = retire;
  entry.ready_ns = slot.ready_ns;
  entry.order = slot.order;
  ++count_;
  queued_.store(count_, std::memory_order_release);
  if (TraceOn()) TraceWc("cqe", cq.handle, wc, &slot.ready_ns);
  const bool fire =
      arm_ == Arm::kAny || (arm_ == Arm::kSolicited && (solicited || wc.status != IBV_WC_SUCCESS));
  if (fire && channel != nullptr) {
    arm_ = Arm::kNone;
    armed_.store(false, std::memory_order_release);
    if (arm_muted_) {
      arm_muted_ = false;
      if (TraceOn()) TraceEvent("cq_event_suppressed cq=%u", cq.handle);
      return true;
    }
    softrpma::MutexLock channel_lock(&channel->mu);
    QueueEventLocked(channel, this, slot.ready_ns, slot.order);
    if (TraceOn()) {
      TraceEvent("cq_event cq=%u channel=%u at=%llu", cq.handle, channel->number,
                 static_cast<unsigned long long>(slot.ready_ns));
    }
  }
  return true;
}

void PoisonUndefinedFields(ibv_wc* wc) {
  if (wc->status != IBV_WC_SUCCESS) {
    const ibv_wc valid = *wc;
    std::memset(wc, 0xA5, sizeof(*wc));
    wc->wr_id = valid.wr_id;
    wc->status = valid.status;
    wc->qp_num = valid.qp_num;
    wc->vendor_err = valid.vendor_err;
    wc->opcode = kWcPoisonOpcode;
    return;
  }
  if (wc->opcode == IBV_WC_RDMA_WRITE || wc->opcode == IBV_WC_SEND) wc->byte_len = kWcPoison;
}

int SimCq::Poll(int num_entries, ibv_wc* wc, int* num_polled) {
  // An empty CQ is seen without the lock that a poster pushing a completion needs: a
  // busy-polling thread must never make the poster wait for it (for its time slice, when
  // both share a core).
  if (queued_.load(std::memory_order_acquire) == 0) {
    *num_polled = 0;
    return 0;
  }
  softrpma::MutexLock lock(&mu_);
  const int n = static_cast<int>(std::min<size_t>(count_, std::max(num_entries, 0)));
  if (n > 0) {
    // The program waited for the last completion it takes.
    GlobalClock().AdvanceTo(ring_[(head_ + n - 1) % ring_.size()].ready_ns);
  }
  for (int i = 0; i < n; ++i) {
    CqEntry& entry = ring_[head_];
    wc[i] = entry.wc;
    if (entry.slots != nullptr) {
      entry.slots->fetch_sub(entry.retire, std::memory_order_acq_rel);
    }
    head_ = (head_ + 1) % ring_.size();
    --count_;
    queued_.store(count_, std::memory_order_release);
    if (TraceOn()) TraceWc("wc", cq.handle, wc[i], nullptr);  // what the NIC knows
    PoisonUndefinedFields(&wc[i]);                            // what the program may read
  }
  *num_polled = n;
  return 0;
}

void SimCq::AddRemote(const std::shared_ptr<Transport>& conn) {
  softrpma::MutexLock lock(&mu_);
  // Forget connections that ended, so that a long-lived CQ's list stays short.
  remotes_.erase(std::remove_if(remotes_.begin(), remotes_.end(),
                                [](const std::weak_ptr<Transport>& c) { return c.expired(); }),
                 remotes_.end());
  remotes_.push_back(conn);
  has_remote_.store(true, std::memory_order_relaxed);
}

void SimCq::ProgressRemotes() {
  std::vector<std::shared_ptr<Transport>> live;
  {
    softrpma::MutexLock lock(&mu_);
    live.reserve(remotes_.size());
    for (const std::weak_ptr<Transport>& conn : remotes_) {
      if (std::shared_ptr<Transport> c = conn.lock()) live.push_back(std::move(c));
    }
  }
  for (const std::shared_ptr<Transport>& conn : live) conn->Progress();
}

int SimCq::ReqNotify(bool solicited_only, bool muted) {
  if (is_dummy) return 0;
  if (channel == nullptr) return EINVAL;
  SetArm(solicited_only, muted);
  return 0;
}

void SimCq::Kick(bool solicited) {
  if (channel == nullptr || !armed_.load(std::memory_order_acquire)) return;
  softrpma::MutexLock lock(&mu_);
  if (arm_muted_ || !(arm_ == Arm::kAny || (arm_ == Arm::kSolicited && solicited))) return;
  softrpma::MutexLock channel_lock(&channel->mu);
  channel->signal.Raise();
}

void SimCq::SetArm(bool solicited_only, bool muted) {
  softrpma::MutexLock lock(&mu_);
  // A solicited-only request does not weaken an outstanding "any" request.
  if (!solicited_only) {
    arm_ = Arm::kAny;
  } else if (arm_ == Arm::kNone) {
    arm_ = Arm::kSolicited;
  }
  arm_muted_ = muted;
  armed_.store(true, std::memory_order_release);
  if (TraceOn()) {
    TraceEvent("cq_arm cq=%u solicited_only=%d", cq.handle, solicited_only ? 1 : 0);
  }
}

void SimCq::ReleaseSlots(std::atomic<uint32_t>* slots, uint32_t qp_num) {
  softrpma::MutexLock lock(&mu_);
  for (size_t i = 0; i < count_; ++i) {
    CqEntry& entry = ring_[(head_ + i) % ring_.size()];
    if (entry.slots != slots || entry.wc.qp_num != qp_num) continue;
    slots->fetch_sub(entry.retire, std::memory_order_acq_rel);
    entry.slots = nullptr;
  }
}

size_t SimCq::Clean(uint32_t qp_num) {
  softrpma::MutexLock lock(&mu_);
  const size_t capacity = ring_.size();
  size_t kept = 0;
  for (size_t i = 0; i < count_; ++i) {
    CqEntry& entry = ring_[(head_ + i) % capacity];
    if (entry.wc.qp_num == qp_num) {
      if (entry.slots != nullptr) entry.slots->fetch_sub(entry.retire, std::memory_order_acq_rel);
      continue;
    }
    if (kept != i) ring_[(head_ + kept) % capacity] = entry;
    ++kept;
  }
  const size_t removed = count_ - kept;
  count_ = kept;
  queued_.store(count_, std::memory_order_release);
  if (removed > 0 && TraceOn()) {
    TraceEvent("cq_clean cq=%u qp=%u removed=%zu", cq.handle, qp_num, removed);
  }
  return removed;
}

void SimCq::ForgetSlots(std::atomic<uint32_t>* slots) {
  softrpma::MutexLock lock(&mu_);
  for (size_t i = 0; i < count_; ++i) {
    CqEntry& entry = ring_[(head_ + i) % ring_.size()];
    if (entry.slots == slots) entry.slots = nullptr;
  }
}

int CreateCompChannel(SimDevice* device, ibv_comp_channel** channel) {
  return NewChannel<SimCompChannel>(channel, device);
}

int DestroyCompChannel(SimCompChannel* channel) {
  {
    softrpma::MutexLock lock(&channel->mu);
    if (!channel->cqs.empty()) return EBUSY;
  }
  Delete(channel);
  return 0;
}

namespace {

// CreateCq, and CreateCqEx once its own attributes are checked: `poller` non-null makes the CQ
// an extended one, with the readers of `wc_flags`.
int NewCq(SimDevice* device, int cqe, void* cq_context, SimCompChannel* channel, int comp_vector,
          Backend* poller, uint64_t wc_flags, SimCq** made) {
  // The CQ holds, and cq->cqe reports, what the driver makes of `cqe` (docs/DEVICES.md).
  const DeviceProfile& profile = ActiveProfile();
  if (cqe < 1 || cqe > profile.max_cqe) return EINVAL;
  cqe = static_cast<int>(RoundQueueSize(profile.cq_rounding, static_cast<uint32_t>(cqe)));
  if (comp_vector < 0 || comp_vector >= device->context.num_comp_vectors) return EINVAL;
  if (channel != nullptr && channel->channel.context != &device->context) return EINVAL;
  SimCq* sim_cq = New<SimCq>(device, cqe, cq_context, channel, /*is_dummy=*/false);
  if (sim_cq == nullptr) return ENOMEM;
  if (poller != nullptr) sim_cq->MakeExtended(poller, wc_flags);
  if (channel != nullptr) {
    softrpma::MutexLock lock(&channel->mu);
    channel->cqs.push_back(sim_cq);
  }
  if (TraceOn()) {
    if (poller != nullptr) {
      TraceEvent("create_cq cq=%u cqe=%d channel=%u wc_flags=0x%llx", sim_cq->cq.handle, cqe,
                 channel != nullptr ? channel->number : 0,
                 static_cast<unsigned long long>(wc_flags));
    } else {
      TraceEvent("create_cq cq=%u cqe=%d channel=%u", sim_cq->cq.handle, cqe,
                 channel != nullptr ? channel->number : 0);
    }
  }
  *made = sim_cq;
  return 0;
}

// ---- The ops of an extended CQ (verbs.h's inline ibv_start_poll, ibv_wc_read_*, ...) ---------

int OpStartPoll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) { return to_sim(cq)->StartPoll(attr); }
int OpNextPoll(ibv_cq_ex* cq) { return to_sim(cq)->NextPoll(); }
void OpEndPoll(ibv_cq_ex* cq) { to_sim(cq)->EndPoll(); }
ibv_wc_opcode OpReadOpcode(ibv_cq_ex* cq) { return to_sim(cq)->current().opcode; }
uint32_t OpReadVendorErr(ibv_cq_ex* cq) { return to_sim(cq)->current().vendor_err; }
uint32_t OpReadByteLen(ibv_cq_ex* cq) { return to_sim(cq)->current().byte_len; }
__be32 OpReadImmData(ibv_cq_ex* cq) { return to_sim(cq)->current().imm_data; }
uint32_t OpReadQpNum(ibv_cq_ex* cq) { return to_sim(cq)->current().qp_num; }
uint32_t OpReadSrcQp(ibv_cq_ex* cq) { return to_sim(cq)->current().src_qp; }
unsigned int OpReadWcFlags(ibv_cq_ex* cq) { return to_sim(cq)->current().wc_flags; }
uint32_t OpReadSlid(ibv_cq_ex* cq) { return to_sim(cq)->current().slid; }
uint8_t OpReadSl(ibv_cq_ex* cq) { return to_sim(cq)->current().sl; }
uint8_t OpReadDlidPathBits(ibv_cq_ex* cq) { return to_sim(cq)->current().dlid_path_bits; }

// The IBV_CQ_INIT_ATTR_MASK_* bits and ibv_create_cq_attr_flags verbs defines.
constexpr uint32_t kKnownCqInitAttrMask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
constexpr uint32_t kKnownCreateCqFlags =
    IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;

}  // namespace

void SimCq::MakeExtended(Backend* poller, uint64_t wc_flags) {
  poller_ = poller;
  cq_ex.start_poll = &OpStartPoll;
  cq_ex.next_poll = &OpNextPoll;
  cq_ex.end_poll = &OpEndPoll;
  cq_ex.read_opcode = &OpReadOpcode;
  cq_ex.read_vendor_err = &OpReadVendorErr;
  cq_ex.read_wc_flags = &OpReadWcFlags;
  if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN) cq_ex.read_byte_len = &OpReadByteLen;
  if (wc_flags & IBV_WC_EX_WITH_IMM) cq_ex.read_imm_data = &OpReadImmData;
  if (wc_flags & IBV_WC_EX_WITH_QP_NUM) cq_ex.read_qp_num = &OpReadQpNum;
  if (wc_flags & IBV_WC_EX_WITH_SRC_QP) cq_ex.read_src_qp = &OpReadSrcQp;
  if (wc_flags & IBV_WC_EX_WITH_SLID) cq_ex.read_slid = &OpReadSlid;
  if (wc_flags & IBV_WC_EX_WITH_SL) cq_ex.read_sl = &OpReadSl;
  if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS) cq_ex.read_dlid_path_bits = &OpReadDlidPathBits;
}

int SimCq::PollCurrent() {
  int polled = 0;
  const int err = poller_->IbvPollCq(&cq, 1, &current_, &polled);
  if (err != 0) return err > 0 ? err : EIO;  // kNoErrno: the poll gave no errno value
  if (polled == 0) return ENOENT;
  cq_ex.wr_id = current_.wr_id;
  cq_ex.status = current_.status;
  return 0;
}

int SimCq::StartPoll(const ibv_poll_cq_attr* attr) {
  if (attr == nullptr || attr->comp_mask != 0) return EINVAL;
  const std::thread::id self = std::this_thread::get_id();
  if (batch_owner_.load(std::memory_order_relaxed) == self) return EINVAL;  // would deadlock
  batch_mu_.Lock();
  batch_owner_.store(self, std::memory_order_relaxed);
  const int err = PollCurrent();
  if (err != 0) {  // verbs: no end_poll after a failed start_poll
    batch_owner_.store(std::thread::id(), std::memory_order_relaxed);
    batch_mu_.Unlock();
  }
  return err;
}

int SimCq::NextPoll() {
  if (batch_owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) return EINVAL;
  return PollCurrent();
}

void SimCq::EndPoll() {
  if (batch_owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) return;
  batch_owner_.store(std::thread::id(), std::memory_order_relaxed);
  batch_mu_.Unlock();
}

int CreateCq(SimDevice* device, int cqe, void* cq_context, SimCompChannel* channel, int comp_vector,
             ibv_cq** cq) {
  SimCq* made = nullptr;
  const int err = NewCq(device, cqe, cq_context, channel, comp_vector, /*poller=*/nullptr,
                        /*wc_flags=*/0, &made);
  if (err == 0) *cq = &made->cq;
  return err;
}

int CreateCqEx(SimDevice* device, const ibv_cq_init_attr_ex& attr, Backend* poller,
               ibv_cq_ex** cq) {
  if ((attr.comp_mask & ~kKnownCqInitAttrMask) != 0) return EINVAL;
  // libibverbs refuses wc_flags it does not define with EOPNOTSUPP itself (ibv_cmd_create_cq_ex).
  if ((attr.wc_flags & ~kSupportedWcFlags) != 0) return EOPNOTSUPP;
  if ((attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) != 0) {
    if ((attr.flags & ~kKnownCreateCqFlags) != 0) return EINVAL;
    // An overrun is an error of the CQ here, as on every device by default (cq.h).
    if ((attr.flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) != 0) return EOPNOTSUPP;
  }
  // The simulator has no parent domains (ibv_alloc_parent_domain fails): whatever is given is
  // not one, as mlx5 answers for a PD that is not a parent domain.
  if ((attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) != 0) return EINVAL;
  if (attr.cqe > static_cast<uint32_t>(INT_MAX) ||
      attr.comp_vector > static_cast<uint32_t>(INT_MAX)) {
    return EINVAL;
  }
  SimCq* made = nullptr;
  const int err = NewCq(device, static_cast<int>(attr.cqe), attr.cq_context,
                        attr.channel != nullptr ? to_sim(attr.channel) : nullptr,
                        static_cast<int>(attr.comp_vector), poller, attr.wc_flags, &made);
  if (err == 0) *cq = &made->cq_ex;
  return err;
}

int DestroyCq(SimCq* cq) {
  if (cq->is_dummy) return EINVAL;
  if (cq->users.load(std::memory_order_acquire) != 0) return EBUSY;
  if (cq->batch_open()) return EBUSY;  // a thread is between ibv_start_poll and ibv_end_poll
  // libibverbs waits for the acknowledgement of every asynchronous event it handed out.
  if (cq->async_events_delivered.load(std::memory_order_acquire) !=
      cq->async_events_acked.load(std::memory_order_acquire)) {
    return EBUSY;
  }
  SimCompChannel* channel = cq->channel;
  if (channel != nullptr) {
    softrpma::MutexLock lock(&channel->mu);
    // Delivered counts are updated under this mutex, so the check and the removal of the
    // CQ's pending (not yet got) events are one atomic step.
    if (cq->events_delivered.load(std::memory_order_acquire) !=
        cq->events_acked.load(std::memory_order_acquire)) {
      return EBUSY;
    }
    auto& events = channel->events;
    const bool had_events = !events.empty();
    events.erase(std::remove_if(events.begin(), events.end(),
                                [cq](const ChannelEvent& event) { return event.cq == cq; }),
                 events.end());
    if (had_events && events.empty()) channel->signal.Lower();
    auto& cqs = channel->cqs;
    cqs.erase(std::remove(cqs.begin(), cqs.end(), cq), cqs.end());
  }
  cq->device->ForgetAsyncEvents(&cq->cq);
  if (TraceOn()) TraceEvent("destroy_cq cq=%u", cq->cq.handle);
  Delete(cq);
  return 0;
}

static_assert(SleeperWatches::kMax == SignalFd::kMaxAlso, "a sleeper's wait watches them all");

int GetCqEvent(SimCompChannel* channel, ibv_cq** cq, void** cq_context,
               void (*poll_point)(LinkSet*),
               int (*carriers)(LinkSet*, std::shared_ptr<Transport>*, int)) {
  bool watch = carriers != nullptr;  // off for the one Wait after the counter woke a watch
  while (true) {
    if (poll_point != nullptr) poll_point(&channel->links);
    // The channel's connections to other processes: while asleep, this thread handles their
    // news itself (SignalFd::Wait), so a message wakes it once, not the fabric thread first.
    // Each watch is ended when this iteration ends, however it ends, after the lock is let go.
    SleeperWatches watched;
    if (watch) {
      std::shared_ptr<Transport> found[SleeperWatches::kMax];
      const int n = carriers(&channel->links, found, SleeperWatches::kMax);
      for (int i = 0; i < n; ++i) watched.Add(std::move(found[i]));
    }
    int ready = -1;
    {
      softrpma::MutexLock lock(&channel->mu);
      if (!channel->events.empty()) {
        const ChannelEvent event = channel->events.front();
        channel->events.pop_front();
        if (channel->events.empty()) {
          channel->signal.Lower();
        } else {
          channel->signal.Raise();  // (after a Wait took the counter) for the next reader
        }
        event.cq->events_delivered.fetch_add(1, std::memory_order_acq_rel);
        GlobalClock().AdvanceTo(event.due_ns);
        if (TraceOn()) {
          TraceEvent("cq_event_got cq=%u channel=%u", event.cq->cq.handle, channel->number);
        }
        *cq = &event.cq->cq;
        *cq_context = event.cq->cq.cq_context;
        return 0;
      }
      std::string what;
      if (waits::On()) {  // (built only under rpma-sim, for its hang report)
        what = "completion channel " + std::to_string(channel->number) + " (CQ";
        for (size_t i = 0; i < channel->cqs.size(); ++i) {
          what += (i == 0 ? " " : ", ") + std::to_string(channel->cqs[i]->cq.handle);
        }
        what += channel->cqs.empty() ? "s: none)" : ")";
      }
      waits::ScopedWait wait("ibv_get_cq_event", std::move(what));
      const int err = channel->signal.Wait(&channel->mu, watched.fds(), watched.count(), &ready);
      if (err != 0) return err;
    }
    // Handled with no lock held (the carrier's handlers take the NIC's locks); an event it
    // queues here is this thread's to take next (SignalFd, THE LOOKER'S OWN NEWS).
    {
      SignalFd::ScopedLooking looking(&channel->signal);
      watched.Serve(ready);
    }
    // The channel's own counter woke the watch and was left up: after a look at the queue, one
    // plain Wait takes it (that read may sleep if another waiter took it first, as any plain
    // one may: the connections are the fabric thread's then, as they were before watches).
    watch = carriers != nullptr && ready != SignalFd::kRaised;
  }
}

int SpuriousCqEvent(SimCompChannel* channel, ibv_cq** cq, void** cq_context) {
  softrpma::MutexLock lock(&channel->mu);
  if (channel->cqs.empty()) return EINVAL;
  SimCq* event_cq = channel->cqs.front();
  event_cq->events_delivered.fetch_add(1, std::memory_order_acq_rel);
  if (TraceOn()) {
    TraceEvent("cq_event_got cq=%u channel=%u spurious=1", event_cq->cq.handle, channel->number);
  }
  *cq = &event_cq->cq;
  *cq_context = event_cq->cq.cq_context;
  return 0;
}

void AckCqEvents(SimCq* cq, unsigned int nevents) {
  if (cq->is_dummy) return;
  cq->events_acked.fetch_add(nevents, std::memory_order_acq_rel);
  if (TraceOn()) TraceEvent("cq_event_ack cq=%u n=%u", cq->cq.handle, nevents);
}

}  // namespace softrpma::sim
