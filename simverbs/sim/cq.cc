#include "simverbs/sim/cq.h"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "simverbs/alloc.h"

namespace softrpma::sim {

SimCompChannel::SimCompChannel(SimDevice* device) {
  std::memset(&channel, 0, sizeof(channel));
  channel.context = &device->context;
  channel.fd = -1;
}

SimCq::SimCq(SimDevice* dev, int cqe, void* cq_context, SimCompChannel* comp_channel, bool dummy)
    : device(dev), channel(comp_channel), is_dummy(dummy) {
  std::memset(&cq, 0, sizeof(cq));
  cq.context = &dev->context;
  cq.channel = comp_channel != nullptr ? &comp_channel->channel : nullptr;
  cq.cq_context = cq_context;
  cq.handle = dev->next_cq_handle.fetch_add(1, std::memory_order_relaxed);
  cq.cqe = cqe;
  pthread_mutex_init(&cq.mutex, nullptr);
  pthread_cond_init(&cq.cond, nullptr);
  softrpma::MutexLock lock(&mu_);
  ring_.resize(static_cast<size_t>(cqe));
}

SimCq::~SimCq() {
  pthread_cond_destroy(&cq.cond);
  pthread_mutex_destroy(&cq.mutex);
}

bool SimCq::Push(const ibv_wc& wc, bool solicited, std::atomic<uint32_t>* sq_slots,
                 uint32_t retire) {
  softrpma::MutexLock lock(&mu_);
  if (overflowed.load(std::memory_order_relaxed)) return false;
  if (count_ == ring_.size()) {
    overflowed.store(true, std::memory_order_release);
    return false;
  }
  CqEntry& entry = ring_[(head_ + count_) % ring_.size()];
  entry.wc = wc;
  entry.sq_slots = sq_slots;
  entry.retire = retire;
  ++count_;
  const bool fire =
      arm_ == Arm::kAny || (arm_ == Arm::kSolicited && (solicited || wc.status != IBV_WC_SUCCESS));
  if (fire && channel != nullptr) {
    arm_ = Arm::kNone;
    softrpma::MutexLock channel_lock(&channel->mu);
    if (channel->events.empty()) channel->signal.Raise();
    channel->events.push_back(this);
  }
  return true;
}

int SimCq::Poll(int num_entries, ibv_wc* wc, int* num_polled) {
  softrpma::MutexLock lock(&mu_);
  if (overflowed.load(std::memory_order_relaxed)) return EOVERFLOW;
  const int n = static_cast<int>(std::min<size_t>(count_, std::max(num_entries, 0)));
  for (int i = 0; i < n; ++i) {
    CqEntry& entry = ring_[head_];
    wc[i] = entry.wc;
    if (entry.sq_slots != nullptr) {
      entry.sq_slots->fetch_sub(entry.retire, std::memory_order_acq_rel);
    }
    head_ = (head_ + 1) % ring_.size();
    --count_;
  }
  *num_polled = n;
  return 0;
}

int SimCq::ReqNotify(bool solicited_only) {
  if (is_dummy) return 0;
  if (channel == nullptr) return EINVAL;
  softrpma::MutexLock lock(&mu_);
  // A solicited-only request does not weaken an outstanding "any" request.
  if (!solicited_only) {
    arm_ = Arm::kAny;
  } else if (arm_ == Arm::kNone) {
    arm_ = Arm::kSolicited;
  }
  return 0;
}

void SimCq::ForgetSqSlots(std::atomic<uint32_t>* sq_slots) {
  softrpma::MutexLock lock(&mu_);
  for (size_t i = 0; i < count_; ++i) {
    CqEntry& entry = ring_[(head_ + i) % ring_.size()];
    if (entry.sq_slots == sq_slots) entry.sq_slots = nullptr;
  }
}

int CreateCompChannel(SimDevice* device, ibv_comp_channel** channel) {
  SimCompChannel* sim_channel = New<SimCompChannel>(device);
  if (sim_channel == nullptr) return ENOMEM;
  const int err = sim_channel->signal.Open();
  if (err != 0) {
    Delete(sim_channel);
    return err;
  }
  sim_channel->channel.fd = sim_channel->signal.fd();
  *channel = &sim_channel->channel;
  return 0;
}

int DestroyCompChannel(SimCompChannel* channel) {
  {
    softrpma::MutexLock lock(&channel->mu);
    if (channel->num_cqs != 0) return EBUSY;
  }
  Delete(channel);
  return 0;
}

int CreateCq(SimDevice* device, int cqe, void* cq_context, SimCompChannel* channel, int comp_vector,
             ibv_cq** cq) {
  if (cqe < 1 || cqe > kMaxCqe) return EINVAL;
  if (comp_vector < 0 || comp_vector >= device->context.num_comp_vectors) return EINVAL;
  if (channel != nullptr && channel->channel.context != &device->context) return EINVAL;
  SimCq* sim_cq = New<SimCq>(device, cqe, cq_context, channel, /*is_dummy=*/false);
  if (sim_cq == nullptr) return ENOMEM;
  if (channel != nullptr) {
    softrpma::MutexLock lock(&channel->mu);
    ++channel->num_cqs;
  }
  *cq = &sim_cq->cq;
  return 0;
}

int DestroyCq(SimCq* cq) {
  if (cq->is_dummy) return EINVAL;
  if (cq->users.load(std::memory_order_acquire) != 0) return EBUSY;
  SimCompChannel* channel = cq->channel;
  if (channel != nullptr) {
    softrpma::MutexLock lock(&channel->mu);
    // Delivered counts are updated under this mutex, so the check and the removal of the
    // CQ's pending (not yet got) events are one atomic step.
    if (cq->events_delivered.load(std::memory_order_acquire) !=
        cq->events_acked.load(std::memory_order_acquire)) {
      return EBUSY;
    }
    const bool had_events = !channel->events.empty();
    channel->events.erase(std::remove(channel->events.begin(), channel->events.end(), cq),
                          channel->events.end());
    if (had_events && channel->events.empty()) channel->signal.Lower();
    --channel->num_cqs;
  }
  Delete(cq);
  return 0;
}

int GetCqEvent(SimCompChannel* channel, ibv_cq** cq, void** cq_context) {
  while (true) {
    {
      softrpma::MutexLock lock(&channel->mu);
      if (!channel->events.empty()) {
        SimCq* event_cq = channel->events.front();
        channel->events.pop_front();
        if (channel->events.empty()) channel->signal.Lower();
        event_cq->events_delivered.fetch_add(1, std::memory_order_acq_rel);
        *cq = &event_cq->cq;
        *cq_context = event_cq->cq.cq_context;
        return 0;
      }
    }
    const int err = SignalFd::WaitReadable(channel->channel.fd);
    if (err != 0) return err;
  }
}

void AckCqEvents(SimCq* cq, unsigned int nevents) {
  if (cq->is_dummy) return;
  cq->events_acked.fetch_add(nevents, std::memory_order_acq_rel);
}

}  // namespace softrpma::sim
