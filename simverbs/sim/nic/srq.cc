// srq.cc: shared receive queues: creation, destruction and ibv_post_srq_recv, which resumes
// the links whose senders waited for a receive of the SRQ.

#include "simverbs/sim/nic/qp.h"

#include <pthread.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "simverbs/alloc.h"
#include "simverbs/sim/nic/nic_internal.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

SimSrq::SimSrq(SimPd* sim_pd, const ibv_srq_init_attr& attr)
    : pd(sim_pd), max_wr(attr.attr.max_wr), max_sge(attr.attr.max_sge) {
  std::memset(&srq, 0, sizeof(srq));
  srq.context = sim_pd->pd.context;
  srq.srq_context = attr.srq_context;
  srq.pd = &sim_pd->pd;
  srq.handle = sim_pd->device->next_srq_handle.fetch_add(1, std::memory_order_relaxed);
  pthread_mutex_init(&srq.mutex, nullptr);
  pthread_cond_init(&srq.cond, nullptr);
  softrpma::MutexLock lock(&mu);
  InitReceiveQueue(&rq, max_wr, max_sge);
}

SimSrq::~SimSrq() {
  pthread_cond_destroy(&srq.cond);
  pthread_mutex_destroy(&srq.mutex);
}

int CreateSrq(SimPd* pd, ibv_srq_init_attr* attr, ibv_srq** srq) {
  if (attr == nullptr) return EINVAL;
  const DeviceProfile& profile = ActiveProfile();
  if (attr->attr.max_wr < 1 || attr->attr.max_wr > static_cast<uint32_t>(profile.max_srq_wr) ||
      attr->attr.max_sge < 1 || attr->attr.max_sge > static_cast<uint32_t>(profile.max_srq_sge)) {
    return EINVAL;
  }
  SimSrq* sim_srq = New<SimSrq>(pd, *attr);
  if (sim_srq == nullptr) return ENOMEM;
  pd->users.fetch_add(1, std::memory_order_acq_rel);
  *srq = &sim_srq->srq;
  return 0;
}

int DestroySrq(SimSrq* srq) {
  if (srq->users.load(std::memory_order_acquire) != 0) return EBUSY;
  srq->pd->users.fetch_sub(1, std::memory_order_acq_rel);
  Delete(srq);
  return 0;
}

int PostSrqRecv(SimSrq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (RaceDetectorOn() && CurrentExecutionMode() == ExecutionMode::kAsync) {
    for (const ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
      PoisonReceive(srq->pd, w, srq->max_sge, kPoisonedReceiveBytes);
    }
  }
  int err = 0;
  std::vector<std::weak_ptr<SimLink>> waiters;
  {
    softrpma::MutexLock lock(&srq->mu);
    for (; wr != nullptr; wr = wr->next) {
      err = ValidateRecv(wr, srq->max_sge);
      if (err != 0) break;
      if (srq->in_use.load(std::memory_order_acquire) >= srq->max_wr) {
        err = ENOMEM;  // posted, or completed and not polled yet
        break;
      }
      srq->in_use.fetch_add(1, std::memory_order_acq_rel);
      if (TraceOn()) {
        TraceEvent("post_srq_recv srq=%u wr_id=0x%llx len=%llu", srq->srq.handle,
                   static_cast<unsigned long long>(wr->wr_id),
                   static_cast<unsigned long long>(RecvCapacity(wr)));
      }
      FillRecv(wr, &srq->rq.push_back());
    }
    waiters.swap(srq->waiters);
  }
  // Resume the senders that waited for a receive of this SRQ, in the order they began waiting.
  for (const std::weak_ptr<SimLink>& weak : waiters) {
    std::shared_ptr<SimLink> link = weak.lock();
    if (link == nullptr) continue;
    softrpma::MutexLock lock(&link->mu);
    ProgressLinkLocked(link.get());
    KickLinkLocked(link.get());
  }
  if (err != 0) {
    *bad_wr = wr;
    return err;
  }
  return 0;
}

}  // namespace softrpma::sim
