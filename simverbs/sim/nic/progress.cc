// progress.cc: where a posted WR gets its chance to execute, as a NIC's would. Post points
// (every post), poll points (a CQ polled or waited on), the process's progress point (every
// call), the backstop for links to other processes (host::CallSoon), and KICKS: a completion
// channel made readable for a completion that would come if the link executed now.

#include "simverbs/sim/nic/qp.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/base/optimization.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/nic/nic_internal.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

// ---- Kicks (cq.h, SimCq::Kick) ---------------------------------------------------------

namespace nic_internal {

// The dry run behind every kick. A WR that would wait (its receive is not posted, or the
// responder is not ready) holds back every WR behind it, as the LOCAL carrier does
// (carrier_local.cc, ExecuteLocked): then nothing completes, and no channel may become
// readable, or a program waiting in poll(2) would wake to an ibv_get_cq_event that sleeps (a
// real channel is readable only with an event there).
// An SRQ's receives count as there (another QP may take them first: such a kick is spurious).
// REQUIRES: link->mu held; an in-process link.
WouldComplete WouldCompleteLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  WouldComplete result;
  if (qp->state != IBV_QPS_RTS || qp->sq.empty()) return result;
  SimQp* peer = link->side[1 - qp->side];
  switch (ReadinessOf(peer)) {
    case Readiness::kNotYet:
      return result;  // the WRs wait
    case Readiness::kGone:
      result.send = true;  // the head's retries run out: an error completion
      return result;
    case Readiness::kReady:
      break;
  }
  size_t receives = peer->srq != nullptr ? SIZE_MAX : peer->rq.size();
  for (size_t i = 0; i < qp->sq.size(); ++i) {
    const SendWqe& wqe = qp->sq.at(i);
    if (wqe.forced_status != IBV_WC_SUCCESS) {
      result.send = true;  // an error completion, and the rest flushes
      break;
    }
    if (RowOf(wqe.opcode).consumes_receive) {
      if (receives == 0) break;  // receiver not ready: this WR and those behind it wait
      if (receives != SIZE_MAX) --receives;
      result.recv = true;
      result.recv_solicited = result.recv_solicited || wqe.solicited;
    }
    result.send = result.send || wqe.signaled;
    if (result.send && result.recv_solicited) break;  // the rest can add nothing
  }
  return result;
}

// A connection of this process to itself made by the host transport (sched.h, Transport): it
// stands in for the in-process link, so it has no backstop (the in-process link has none) and
// kicks as that link does. (A raw peer or a QP bound to itself are other processes' stand-ins.)
bool SelfOnHostTransportLocked(const SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  return CurrentTransport() == TransportKind::kHost && link->remote_pid == getpid();
}

// Kicks the channels that qp's unexecuted WRs would complete on (its link's carrier knows
// which). REQUIRES: link->mu held.
void KickForLocked(SimLink* link, SimQp* qp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (qp == nullptr || link->unexecuted.load(std::memory_order_acquire) == 0) return;
  link->carrier->KickLocked(link, qp);
}

// Kicks for both QPs of `link` (a receive was posted, a side became ready). REQUIRES:
// link->mu held.
void KickLinkLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (CurrentExecutionMode() != ExecutionMode::kAsync) return;
  for (SimQp* qp : link->side) KickForLocked(link, qp);
}

}  // namespace nic_internal

namespace {

// THE PROCESS'S LINKS that hold deferred WRs, inside the process or to another one: the
// process's progress point (every call) runs what they hold, and THE BACKSTOP
// (host::CallSoon) sends what a link to another process holds when the program gives the
// simulator no call to do it at, as a NIC puts a WR on the wire whatever its process does next
// (spins on memory, sleeps in poll(2)). Never destroyed (the fabric thread may use it at exit).
// A child of fork() starts a set of its own at its first look: the parent's links are not its
// to send on, and another thread of the parent may have held the set's lock, or a link's, at
// the fork.
// Whether a link was ever listed: until then the process's progress points have nothing to
// look at.
std::atomic<bool> g_links_listed{false};

struct OwnedLinkSet {
  pid_t owner;
  LinkSet set;
};

// This process's pid without a syscall per call (the progress point runs at every verbs
// call): read once, and again in the child of every fork (pthread_atfork, registered before
// the first read, so that no fork can come between a read and the registration).
std::atomic<pid_t> g_self{0};

void RefreshSelfInChild() { g_self.store(getpid(), std::memory_order_release); }

pid_t Self() {
  pid_t self = g_self.load(std::memory_order_acquire);
  if (ABSL_PREDICT_TRUE(self != 0)) return self;
  static const bool registered = (pthread_atfork(nullptr, nullptr, &RefreshSelfInChild), true);
  (void)registered;
  self = getpid();
  pid_t expected = 0;
  g_self.compare_exchange_strong(expected, self, std::memory_order_acq_rel);
  return self;
}

LinkSet& DeferredLinks() {
  static std::atomic<OwnedLinkSet*> current{nullptr};
  const pid_t self = Self();
  OwnedLinkSet* seen = current.load(std::memory_order_acquire);
  while (seen == nullptr || seen->owner != self) {
    auto* fresh = new OwnedLinkSet{self, {}};
    if (current.compare_exchange_strong(seen, fresh, std::memory_order_acq_rel)) return fresh->set;
    delete fresh;  // another thread made one first: `seen` is now it (or the parent's)
  }
  return seen->set;
}

// A poll point on `link`: everything its QPs posted may execute now, and does.
void ReleaseAllLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  for (SimQp* qp : link->side) {
    if (qp != nullptr) qp->released_seq = qp->posted_seq;
  }
  ProgressLinkLocked(link);
}

// The process's progress point over DeferredLinks: RunPollPoint's work, and the links that hold
// nothing deferred any more leave the set, their progress_listed cleared under their lock (a
// post after that lists the link again: ScheduleDeferredSends). So a progress point costs the
// links with deferred work, not every link the process ever deferred on (1,000 connections
// taken in turn would otherwise walk 1,000 links at every call).
void RunProcessLinks() {
  LinkSet& set = DeferredLinks();
  softrpma::MutexLock lock(&set.mu);
  std::vector<std::weak_ptr<SimLink>>& links = set.links;
  size_t kept = 0;
  for (size_t i = 0; i < links.size(); ++i) {
    std::shared_ptr<SimLink> link = links[i].lock();
    if (link == nullptr) continue;
    {
      softrpma::MutexLock link_lock(&link->mu);
      if (link->unexecuted.load(std::memory_order_acquire) != 0) ReleaseAllLocked(link.get());
      if (link->unexecuted.load(std::memory_order_acquire) == 0) {
        link->progress_listed.store(false, std::memory_order_release);
        continue;
      }
    }
    if (kept != i) links[kept] = std::move(links[i]);
    ++kept;
  }
  links.resize(kept);
}

}  // namespace

namespace nic_internal {

// Lists `link`, which holds deferred WRs, where the process's progress points find it;
// `backstop` (a link to another process): and has the fabric thread send what it holds soon.
void ScheduleDeferredSends(const std::shared_ptr<SimLink>& link, bool backstop) {
  if (!link->progress_listed.load(std::memory_order_acquire) &&
      !link->progress_listed.exchange(true, std::memory_order_acq_rel)) {
    // Listed once: the flag, set here and cleared by RunProcessLinks under the set's lock,
    // says whether it is in the set.
    LinkSet& set = DeferredLinks();
    softrpma::MutexLock lock(&set.mu);
    set.links.push_back(link);
    g_links_listed.store(true, std::memory_order_release);
  }
  if (backstop) host::CallSoon(&RunProcessLinks);
}

}  // namespace nic_internal

void RunProcessProgressPoint() {
  // (A process with nothing deferred pays two loads.)
  if (!g_links_listed.load(std::memory_order_acquire) ||
      g_unexecuted.load(std::memory_order_acquire) == 0) {
    return;
  }
  RunProcessLinks();
}

size_t ProcessProgressLinkCount() {
  LinkSet& set = DeferredLinks();
  softrpma::MutexLock lock(&set.mu);
  return set.links.size();
}

void AddLink(LinkSet* set, const std::shared_ptr<SimLink>& link) {
  softrpma::MutexLock lock(&set->mu);
  auto& links = set->links;
  links.erase(std::remove_if(links.begin(), links.end(),
                             [](const std::weak_ptr<SimLink>& l) { return l.expired(); }),
              links.end());
  for (const std::weak_ptr<SimLink>& known : links) {
    if (known.lock() == link) return;
  }
  links.push_back(link);
}

void RunPollPoint(LinkSet* set) {
  // Nothing unexecuted in the process (the usual case once its progress point ran): no link of
  // the set has anything to release, so its lock is not taken.
  if (g_unexecuted.load(std::memory_order_acquire) == 0) return;
  softrpma::MutexLock lock(&set->mu);
  for (const std::weak_ptr<SimLink>& weak : set->links) {
    std::shared_ptr<SimLink> link = weak.lock();
    if (link == nullptr || link->unexecuted.load(std::memory_order_acquire) == 0) continue;
    softrpma::MutexLock link_lock(&link->mu);
    ReleaseAllLocked(link.get());
  }
}

namespace {
std::atomic<bool> g_remote_links{false};  // NoteRemoteLink
}  // namespace

void nic_internal::NoteRemoteLink() { g_remote_links.store(true, std::memory_order_release); }

int WaitCarriersOf(LinkSet* set, std::shared_ptr<Transport>* out, int max) {
  if (!g_remote_links.load(std::memory_order_acquire)) return 0;
  int count = 0;
  softrpma::MutexLock lock(&set->mu);
  for (const std::weak_ptr<SimLink>& weak : set->links) {
    if (count == max) break;
    std::shared_ptr<SimLink> link = weak.lock();
    if (link == nullptr) continue;
    softrpma::MutexLock link_lock(&link->mu);
    if (std::shared_ptr<Transport> watched = link->carrier->WatchedLocked(link.get())) {
      out[count++] = std::move(watched);
    }
  }
  return count;
}

bool WouldCompleteOn(LinkSet* set, const SimCq* cq, bool* solicited) {
  bool any = false;
  *solicited = false;
  softrpma::MutexLock lock(&set->mu);
  for (const std::weak_ptr<SimLink>& weak : set->links) {
    std::shared_ptr<SimLink> link = weak.lock();
    if (link == nullptr || link->unexecuted.load(std::memory_order_acquire) == 0) continue;
    softrpma::MutexLock link_lock(&link->mu);
    if (!link->carrier->InProcess()) continue;
    for (SimQp* qp : link->side) {
      if (qp == nullptr) continue;
      const WouldComplete would = WouldCompleteLocked(link.get(), qp);
      SimQp* peer = link->side[1 - qp->side];
      any = any || (would.send && qp->send_cq == cq);
      if (would.recv && peer != nullptr && peer->recv_cq == cq) {
        any = true;
        *solicited = *solicited || would.recv_solicited;
      }
    }
  }
  return any;
}

}  // namespace softrpma::sim
