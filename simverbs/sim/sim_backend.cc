#include "simverbs/sim/sim_backend.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "simverbs/mutex.h"
#include "simverbs/sim/cm/addr.h"
#include "simverbs/sim/cm/cm.h"
#include "simverbs/sim/nic/cq.h"
#include "simverbs/sim/nic/device.h"
#include "simverbs/sim/nic/inline_verbs.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/faults/fault.h"
#include "simverbs/sim/nic/qp.h"
#include "simverbs/sim/sched/sched.h"
#include "simverbs/sim/settings.h"
#include "simverbs/sim/trace/trace.h"
#include "simverbs/sim/waits.h"

namespace softrpma::sim {
namespace {

bool Async() { return CurrentExecutionMode() == ExecutionMode::kAsync; }

class SimBackend final : public Backend {
 public:
  SimBackend()
      : faults_(GlobalFaultInjector()),
        dummy_cq_(&device_, 1, nullptr, nullptr, /*is_dummy=*/true),
        cm_(&device_) {}

  const char* Name() const override { return "sim"; }

  // Routes the inline verbs of the context (ibv_poll_cq & co.) to this backend.
  void InstallContextOps() { sim::InstallContextOps(&device_.context.ops); }

  // ---- Device -------------------------------------------------------------------------------

  int IbvQueryDeviceEx(ibv_context* ctx, ibv_device_attr_ex* attr) override {
    if (int err = Injected(FaultPoint::kIbvQueryDeviceEx); err != 0) return err;
    if (!IsOurs(ctx) || attr == nullptr) return EINVAL;
    device_.Query(attr);
    return 0;
  }

  // ---- Protection domains and memory regions ------------------------------------------------

  int IbvAllocPd(ibv_context* ctx, ibv_pd** pd) override {
    if (int err = Injected(FaultPoint::kIbvAllocPd); err != 0) return err;
    if (!IsOurs(ctx) || pd == nullptr) return EINVAL;
    return AllocPd(&device_, pd);
  }

  int IbvDeallocPd(ibv_pd* pd) override {
    if (int err = InjectedDestroy(FaultPoint::kIbvDeallocPd, pd); err != 0) return err;
    if (pd == nullptr) return EINVAL;
    return Destroyed(pd, DeallocPd(to_sim(pd)));
  }

  int IbvRegMr(ibv_pd* pd, void* addr, size_t length, int access, ibv_mr** mr) override {
    if (int err = Injected(FaultPoint::kIbvRegMr); err != 0) return err;
    if (pd == nullptr || mr == nullptr) return EINVAL;
    return RegMr(to_sim(pd), addr, length, access, mr);
  }

  int IbvDeregMr(ibv_mr* mr) override {
    if (int err = InjectedDestroy(FaultPoint::kIbvDeregMr, mr); err != 0) return err;
    if (mr == nullptr) return EINVAL;
    return Destroyed(mr, DeregMr(to_sim(mr)));
  }

  int IbvAdviseMr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
                  uint32_t num_sge) override {
    if (int err = Injected(FaultPoint::kIbvAdviseMr); err != 0) return err;
    if (pd == nullptr) return EINVAL;
    return AdviseMr(to_sim(pd), advice, flags, sg_list, num_sge);
  }

  // ---- Completion channels and completion queues --------------------------------------------

  int IbvCreateCompChannel(ibv_context* ctx, ibv_comp_channel** channel) override {
    if (int err = Injected(FaultPoint::kIbvCreateCompChannel); err != 0) return err;
    if (!IsOurs(ctx) || channel == nullptr) return EINVAL;
    return CreateCompChannel(&device_, channel);
  }

  int IbvDestroyCompChannel(ibv_comp_channel* channel) override {
    if (int err = InjectedDestroy(FaultPoint::kIbvDestroyCompChannel, channel); err != 0) {
      return err;
    }
    if (channel == nullptr) return EINVAL;
    return Destroyed(channel, DestroyCompChannel(to_sim(channel)));
  }

  int IbvCreateCq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                  int comp_vector, ibv_cq** cq) override {
    if (int err = Injected(FaultPoint::kIbvCreateCq); err != 0) return err;
    if (!IsOurs(ctx) || cq == nullptr) return EINVAL;
    return CreateCq(&device_, cqe, cq_context, channel != nullptr ? to_sim(channel) : nullptr,
                    comp_vector, cq);
  }

  int IbvCreateCqEx(ibv_context* ctx, ibv_cq_init_attr_ex* attr, ibv_cq_ex** cq) override {
    if (int err = Injected(FaultPoint::kIbvCreateCqEx); err != 0) return err;
    if (!IsOurs(ctx) || attr == nullptr || cq == nullptr) return EINVAL;
    // Its start_poll / next_poll are this backend's IbvPollCq (faults, poll points, poison).
    return CreateCqEx(&device_, *attr, this, cq);
  }

  int IbvDestroyCq(ibv_cq* cq) override {
    if (int err = InjectedDestroy(FaultPoint::kIbvDestroyCq, cq); err != 0) return err;
    if (cq == nullptr) return EINVAL;
    return Destroyed(cq, DestroyCq(to_sim(cq)));
  }

  int IbvReqNotifyCq(ibv_cq* cq, int solicited_only) override {
    const FaultDecision decision = Check(FaultPoint::kIbvReqNotifyCq);
    if (decision.kind == FaultKind::kFail) return decision.err;
    if (cq == nullptr) return EINVAL;
    SimCq* sim_cq = to_sim(cq);
    const int err =
        sim_cq->ReqNotify(solicited_only != 0, /*muted=*/decision.kind == FaultKind::kNoNotify);
    // WRs that will complete here and have not executed: a waiter must come and execute them.
    bool solicited = false;
    if (err == 0 && Async() && WouldCompleteOn(&sim_cq->links, sim_cq, &solicited)) {
      sim_cq->Kick(solicited);
    }
    return err;
  }

  int IbvGetCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) override {
    const FaultDecision decision = Check(FaultPoint::kIbvGetCqEvent);
    if (decision.kind == FaultKind::kFail) return decision.err;
    if (channel == nullptr || cq == nullptr || cq_context == nullptr) return EINVAL;
    if (decision.kind == FaultKind::kUnknownCq) {
      // Succeeds at once with a CQ that is on no channel; the channel's events stay queued.
      if (TraceOn()) {
        TraceEvent("cq_event_got cq=0 channel=%u unknown=1", to_sim(channel)->number);
      }
      *cq = &dummy_cq_.cq;
      *cq_context = dummy_cq_.cq.cq_context;
      return 0;
    }
    if (decision.kind == FaultKind::kSpurious &&
        SpuriousCqEvent(to_sim(channel), cq, cq_context) == 0) {
      return 0;  // (a channel no CQ uses cannot make one up: it waits as usual)
    }
    return GetCqEvent(to_sim(channel), cq, cq_context, Async() ? &RunPollPoint : nullptr,
                      &WaitCarriersOf);
  }

  void IbvAckCqEvents(ibv_cq* cq, unsigned int nevents) override {
    Check(FaultPoint::kIbvAckCqEvents);  // counted; cannot fail
    if (cq != nullptr) AckCqEvents(to_sim(cq), nevents);
  }

  int IbvGetAsyncEvent(ibv_context* context, ibv_async_event* event) override {
    if (context == nullptr || event == nullptr || context != &device_.context) return EINVAL;
    const int err = device_.GetAsyncEvent(event);
    if (err == 0 && event->event_type == IBV_EVENT_CQ_ERR) {
      to_sim(event->element.cq)->async_events_delivered.fetch_add(1, std::memory_order_acq_rel);
    }
    if (err == 0 && TraceOn()) {
      TraceEvent("async_event_got type=%s",
                 NameOr(event->event_type == IBV_EVENT_CQ_ERR ? "IBV_EVENT_CQ_ERR" : nullptr,
                        event->event_type)
                     .c_str());
    }
    return err;
  }

  void IbvAckAsyncEvent(ibv_async_event* event) override {
    if (event != nullptr && event->event_type == IBV_EVENT_CQ_ERR) {
      to_sim(event->element.cq)->async_events_acked.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  int IbvPollCq(ibv_cq* cq, int num_entries, ibv_wc* wc, int* num_polled) override {
    if (int err = Injected(FaultPoint::kIbvPollCq); err != 0) return err;
    if (cq == nullptr || num_polled == nullptr || num_entries < 0 ||
        (num_entries > 0 && wc == nullptr)) {
      return EINVAL;
    }
    SimCq* sim_cq = to_sim(cq);
    // A poll point: what was posted on the QPs using this CQ executes now, at the latest.
    if (Async()) RunPollPoint(&sim_cq->links);
    Settle();  // (the host transport in one process: what the poll point sent is answered)
    int err = sim_cq->Poll(num_entries, wc, num_polled);
    if (err == 0 && *num_polled == 0 && num_entries > 0 && sim_cq->has_remote()) {
      // Nothing yet from a peer in another process: do the fabric's work here, then look again.
      sim_cq->ProgressRemotes();
      err = sim_cq->Poll(num_entries, wc, num_polled);
    }
    return err;
  }

  // ---- Shared receive queues ----------------------------------------------------------------

  int IbvCreateSrq(ibv_pd* pd, ibv_srq_init_attr* attr, ibv_srq** srq) override {
    if (int err = Injected(FaultPoint::kIbvCreateSrq); err != 0) return err;
    if (pd == nullptr || srq == nullptr) return EINVAL;
    return CreateSrq(to_sim(pd), attr, srq);
  }

  int IbvDestroySrq(ibv_srq* srq) override {
    if (int err = InjectedDestroy(FaultPoint::kIbvDestroySrq, srq); err != 0) return err;
    if (srq == nullptr) return EINVAL;
    return Destroyed(srq, DestroySrq(to_sim(srq)));
  }

  int IbvPostSrqRecv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) override {
    if (int err = Injected(FaultPoint::kIbvPostSrqRecv); err != 0) {
      if (bad_wr != nullptr) *bad_wr = wr;
      return err;
    }
    if (srq == nullptr || bad_wr == nullptr) return EINVAL;
    return Settled(PostSrqRecv(to_sim(srq), wr, bad_wr));
  }

  // ---- Queue pairs made and connected by verbs (qp.h, "QPs of ibv_create_qp") -------------

  int IbvCreateQp(ibv_pd* pd, ibv_qp_init_attr* attr, ibv_qp** qp) override {
    if (int err = Injected(FaultPoint::kIbvCreateQp); err != 0) return err;
    if (pd == nullptr || attr == nullptr || qp == nullptr) return EINVAL;
    SimQp* made = nullptr;
    if (int err = CreateVerbsQp(to_sim(pd), attr, &made); err != 0) return err;
    *qp = &made->qp;
    return 0;
  }

  int IbvCreateQpEx(ibv_context* ctx, ibv_qp_init_attr_ex* attr, ibv_qp** qp) override {
    if (int err = Injected(FaultPoint::kIbvCreateQpEx); err != 0) return err;
    if (!IsOurs(ctx) || attr == nullptr || qp == nullptr) return EINVAL;
    if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) != 0 && attr->pd != nullptr &&
        attr->pd->context != ctx) {
      return EINVAL;
    }
    SimQp* made = nullptr;
    if (int err = CreateVerbsQp(attr, &made); err != 0) return err;
    if (made->send_ops_flags != 0) InstallQpExOps(&made->qp_ex);
    *qp = &made->qp;
    return 0;
  }

  int IbvModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) override {
    if (int err = Injected(FaultPoint::kIbvModifyQp); err != 0) return err;
    if (qp == nullptr || attr == nullptr) return EINVAL;
    return ModifyVerbsQp(to_sim(qp), attr, attr_mask);
  }

  int IbvQueryQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                 ibv_qp_init_attr* init_attr) override {
    if (int err = Injected(FaultPoint::kIbvQueryQp); err != 0) return err;
    if (qp == nullptr) return EINVAL;
    return QueryVerbsQp(to_sim(qp), attr, attr_mask, init_attr);
  }

  int IbvDestroyQp(ibv_qp* qp) override {
    if (int err = InjectedDestroy(FaultPoint::kIbvDestroyQp, qp); err != 0) return err;
    if (qp == nullptr) return EINVAL;
    const bool orphan = to_sim(qp)->cm_orphan.load(std::memory_order_acquire);
    if ((!to_sim(qp)->verbs || to_sim(qp)->cm_ud) && !orphan) {
      return EINVAL;  // a QP of RdmaCreateQpEx whose id lives: RdmaDestroyQp's
    }
    // (Traced as RdmaDestroyQp traces the CM's QPs; a QP of ibv_create_qp has no create_qp line.)
    if (orphan && TraceOn()) TraceEvent("destroy_qp qp=%u", qp->qp_num);
    DestroyVerbsQp(to_sim(qp));
    return Destroyed(qp, 0);
  }

  // ---- Address handles (ud.cc) ---------------------------------------------------------------

  int IbvCreateAh(ibv_pd* pd, ibv_ah_attr* attr, ibv_ah** ah) override {
    if (int err = Injected(FaultPoint::kIbvCreateAh); err != 0) return err;
    if (pd == nullptr || ah == nullptr) return EINVAL;
    return CreateAh(to_sim(pd), attr, ah);
  }

  int IbvDestroyAh(ibv_ah* ah) override {
    if (int err = InjectedDestroy(FaultPoint::kIbvDestroyAh, ah); err != 0) return err;
    if (ah == nullptr) return EINVAL;
    return Destroyed(ah, DestroyAh(to_sim(ah)));
  }

  // ---- Queue pairs: the data path -----------------------------------------------------------

  int IbvPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) override {
    const FaultDecision decision = Check(FaultPoint::kIbvPostSend, QpNum(qp));
    if (decision.kind == FaultKind::kFail) {
      if (bad_wr != nullptr) *bad_wr = wr;
      return decision.err;
    }
    if (qp == nullptr || bad_wr == nullptr) return EINVAL;
    return Settled(PostSend(to_sim(qp), wr, bad_wr, ApplyPostFault(decision, to_sim(qp))));
  }

  // ---- Queue pairs: the extended post API --------------------------------------------------

  int IbvQpToQpEx(ibv_qp* qp, ibv_qp_ex** qpx) override {
    if (qp == nullptr || qpx == nullptr || to_sim(qp)->send_ops_flags == 0) return kNoErrno;
    *qpx = &to_sim(qp)->qp_ex;
    return 0;
  }

  void IbvWrStart(ibv_qp_ex* qpx) override { WrStart(to_sim(qpx)); }

  void IbvWrAtomicWrite(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr,
                        const void* atomic_wr) override {
    WrAtomicWrite(to_sim(qpx), rkey, remote_addr, atomic_wr);
  }

  int IbvWrComplete(ibv_qp_ex* qpx) override {
    SimQp* qp = to_sim(qpx);
    const FaultDecision decision = Check(FaultPoint::kIbvWrComplete, qp->qp.qp_num);
    if (decision.kind == FaultKind::kFail) {
      WrAbort(qp);
      return decision.err;
    }
    return Settled(WrComplete(qp, ApplyPostFault(decision, qp)));
  }

  int IbvPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) override {
    const FaultDecision decision = Check(FaultPoint::kIbvPostRecv, QpNum(qp));
    if (decision.kind == FaultKind::kFail) {
      if (bad_wr != nullptr) *bad_wr = wr;
      return decision.err;
    }
    if (qp == nullptr || bad_wr == nullptr) return EINVAL;
    return Settled(PostRecv(to_sim(qp), wr, bad_wr, ApplyPostFault(decision, to_sim(qp))));
  }

  // ---- Connection manager -------------------------------------------------------------------

  int RdmaGetaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                      rdma_addrinfo** res) override {
    if (int err = Injected(FaultPoint::kRdmaGetaddrinfo); err != 0) return err;
    if (res == nullptr) return EINVAL;
    return GetAddrInfo(node, service, hints, res);
  }

  void RdmaFreeaddrinfo(rdma_addrinfo* res) override {
    Check(FaultPoint::kRdmaFreeaddrinfo);
    FreeAddrInfo(res);
  }

  int RdmaCreateEventChannel(rdma_event_channel** channel) override {
    if (int err = Injected(FaultPoint::kRdmaCreateEventChannel); err != 0) return err;
    if (channel == nullptr) return EINVAL;
    return cm_.CreateEventChannel(channel);
  }

  void RdmaDestroyEventChannel(rdma_event_channel* channel) override {
    Check(FaultPoint::kRdmaDestroyEventChannel);
    if (channel != nullptr) cm_.DestroyEventChannel(to_sim(channel));
  }

  int RdmaCreateId(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) override {
    if (int err = Injected(FaultPoint::kRdmaCreateId); err != 0) return err;
    if (id == nullptr) return EINVAL;
    return cm_.CreateId(channel != nullptr ? to_sim(channel) : nullptr, id, context, ps);
  }

  int RdmaDestroyId(rdma_cm_id* id) override {
    if (int err = InjectedDestroy(FaultPoint::kRdmaDestroyId, id); err != 0) return err;
    if (id == nullptr) return EINVAL;
    return Destroyed(id, cm_.DestroyId(to_sim(id)));
  }

  int RdmaMigrateId(rdma_cm_id* id, rdma_event_channel* channel) override {
    if (int err = Injected(FaultPoint::kRdmaMigrateId); err != 0) return err;
    if (id == nullptr) return EINVAL;
    return cm_.MigrateId(to_sim(id), channel != nullptr ? to_sim(channel) : nullptr);
  }

  int RdmaBindAddr(rdma_cm_id* id, sockaddr* addr) override {
    if (int err = Injected(FaultPoint::kRdmaBindAddr); err != 0) return err;
    if (id == nullptr) return EINVAL;
    return cm_.BindAddr(to_sim(id), addr);
  }

  int RdmaResolveAddr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr,
                      int timeout_ms) override {
    if (int err = Injected(FaultPoint::kRdmaResolveAddr); err != 0) return err;
    if (id == nullptr) return EINVAL;
    return cm_.ResolveAddr(to_sim(id), src_addr, dst_addr);
  }

  int RdmaResolveRoute(rdma_cm_id* id, int timeout_ms) override {
    if (int err = Injected(FaultPoint::kRdmaResolveRoute); err != 0) return err;
    if (id == nullptr) return EINVAL;
    return cm_.ResolveRoute(to_sim(id));
  }

  int RdmaListen(rdma_cm_id* id, int backlog) override {
    if (int err = Injected(FaultPoint::kRdmaListen); err != 0) return err;
    if (id == nullptr) return EINVAL;
    return cm_.Listen(to_sim(id));
  }

  int RdmaCreateQpEx(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) override {
    if (int err = Injected(FaultPoint::kRdmaCreateQpEx); err != 0) return err;
    if (id == nullptr) return EINVAL;
    const int err = cm_.CreateQp(to_sim(id), attr);
    if (err == 0 && to_sim(id->qp)->send_ops_flags != 0) InstallQpExOps(&to_sim(id->qp)->qp_ex);
    return err;
  }

  void RdmaDestroyQp(rdma_cm_id* id) override {
    Check(FaultPoint::kRdmaDestroyQp);
    if (id != nullptr) cm_.DestroyQp(to_sim(id));
  }

  int RdmaConnect(rdma_cm_id* id, rdma_conn_param* param) override {
    const FaultDecision decision = Check(FaultPoint::kRdmaConnect, IdQpNum(id));
    if (decision.kind == FaultKind::kFail) return decision.err;
    if (id == nullptr) return EINVAL;
    return cm_.Connect(to_sim(id), param, ToConnFault(decision.kind));
  }

  int RdmaAccept(rdma_cm_id* id, rdma_conn_param* param) override {
    const FaultDecision decision = Check(FaultPoint::kRdmaAccept, IdQpNum(id));
    if (decision.kind == FaultKind::kFail) return decision.err;
    if (id == nullptr) return EINVAL;
    return cm_.Accept(to_sim(id), param, ToConnFault(decision.kind));
  }

  int RdmaReject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) override {
    if (int err = Injected(FaultPoint::kRdmaReject); err != 0) return err;
    if (id == nullptr) return EINVAL;
    return cm_.Reject(to_sim(id), private_data, private_data_len);
  }

  int RdmaDisconnect(rdma_cm_id* id) override {
    if (int err = Injected(FaultPoint::kRdmaDisconnect, IdQpNum(id)); err != 0) return err;
    if (id == nullptr) return EINVAL;
    return cm_.Disconnect(to_sim(id));
  }

  int RdmaGetCmEvent(rdma_event_channel* channel, rdma_cm_event** event) override {
    if (int err = Injected(FaultPoint::kRdmaGetCmEvent); err != 0) return err;
    if (channel == nullptr || event == nullptr) return EINVAL;
    return cm_.GetEvent(to_sim(channel), event);
  }

  int RdmaAckCmEvent(rdma_cm_event* event) override {
    if (int err = InjectedDestroy(FaultPoint::kRdmaAckCmEvent, event); err != 0) return err;
    if (event == nullptr) return EINVAL;
    return Destroyed(event, ConnectionManager::AckEvent(reinterpret_cast<SimCmEvent*>(event)));
  }

 private:
  int Injected(FaultPoint point, uint32_t qp_num = 0) {
    const FaultDecision decision = Check(point, qp_num);
    return decision.kind == FaultKind::kFail ? decision.err : 0;
  }

  // The start of a destroy call (the object's last call): Injected, and when the plan fails it,
  // the object stays alive, as on a real provider, and is recorded as kept
  // (FaultInjector::KeepObject; the verbs struct is the first member of the simulator's object,
  // so `object` is where its allocation starts). A child's EIO on its parent's objects is no
  // injection: nothing is recorded then.
  int InjectedDestroy(FaultPoint point, const void* object) {
    const int err = Injected(point);
    if (err != 0 && object != nullptr && !forked_.load(std::memory_order_acquire)) {
      faults_.KeepObject(point, object);
    }
    return err;
  }

  // The end of a destroy call: `err` is its result; when it freed `object`, an earlier failed
  // call's record of it goes (the program tried again, and it worked).
  int Destroyed(const void* object, int err) {
    if (err == 0) faults_.ForgetKept(object);
    return err;
  }

  // The host transport inside one process (sched.h, Transport): what this process sent itself
  // has been served and answered, as the in-process link would have done inside the call.
  static void Settle() {
    if (CurrentTransport() == TransportKind::kHost) host::Quiesce();
  }
  static int Settled(int result) {
    Settle();
    return result;
  }

  static bool IsPostPoint(FaultPoint point) {
    return point == FaultPoint::kIbvPostSend || point == FaultPoint::kIbvPostRecv ||
           point == FaultPoint::kIbvWrComplete || point == FaultPoint::kIbvPostSrqRecv;
  }

  // Every method starts here: the fault plan's decision for this hit of `point`, or, in a
  // child of fork(), EIO for every object the parent's NIC made (see MarkForked).
  FaultDecision Check(FaultPoint point, uint32_t qp_num = 0) {
    if (!IsPostPoint(point) && Async()) RunProcessProgressPoint();
    Settle();
    if (forked_.load(std::memory_order_acquire)) {
      ReportForkedUse();
      FaultDecision decision;
      decision.kind = FaultKind::kFail;
      decision.err = EIO;
      return decision;
    }
    return faults_.Check(point, qp_num);
  }

  void ReportForkedUse() {
    if (forked_reported_.exchange(true)) return;
    std::fprintf(stderr,
                 "softrpma-sim: process %d used an RDMA object that its parent created before "
                 "fork(); it belongs to the parent's simulated NIC (calls on it fail with EIO). "
                 "Create the child's own objects after fork().\n",
                 static_cast<int>(getpid()));
  }

 public:
  // In the child of a fork(): this NIC is the parent's. Its objects stay in memory but every
  // call on them fails; the child's next rpma_utils_get_ibv_context starts a NIC of its own.
  void MarkForked() { forked_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> forked_{false};
  std::atomic<bool> forked_reported_{false};

  static uint32_t QpNum(const ibv_qp* qp) { return qp != nullptr ? qp->qp_num : 0; }
  static uint32_t IdQpNum(const rdma_cm_id* id) {
    return id != nullptr && id->qp != nullptr ? id->qp->qp_num : 0;
  }

  static ConnFault ToConnFault(FaultKind kind) {
    switch (kind) {
      case FaultKind::kReject:
        return ConnFault::kReject;
      case FaultKind::kUnreachable:
        return ConnFault::kUnreachable;
      case FaultKind::kLost:
        return ConnFault::kLost;
      case FaultKind::kDisconnect:
        return ConnFault::kDisconnect;
      default:
        return ConnFault::kNone;
    }
  }

  // What a fault of a post does before the post: lost / disconnect break the QP's connection
  // (so the WRs flush); wc_status / delay are returned for the WRs.
  WrFault ApplyPostFault(const FaultDecision& decision, SimQp* qp) {
    WrFault fault;
    switch (decision.kind) {
      case FaultKind::kWcStatus:
        fault.status = decision.wc_status;
        break;
      case FaultKind::kDelay:
        fault.delay_ns = decision.delay_ns;
        break;
      case FaultKind::kLost:
      case FaultKind::kDisconnect:
        // A UD QP has no connection: `lost` loses its first datagram, `disconnect` does nothing
        // (as on an RC QP without one).
        if (qp != nullptr && qp->qp.qp_type == IBV_QPT_UD) {
          fault.lose_first = decision.kind == FaultKind::kLost;
          break;
        }
        cm_.BreakConnection(qp, ToConnFault(decision.kind));
        break;
      default:
        break;
    }
    return fault;
  }

  bool IsOurs(ibv_context* ctx) const { return ctx == &device_.context; }

 public:
  ibv_context* context() { return &device_.context; }

 private:

  FaultInjector& faults_;
  SimDevice device_;
  SimCq dummy_cq_;
  ConnectionManager cm_;
};

// The started backend.
std::atomic<SimBackend*> g_backend{nullptr};

}  // namespace

// The child of a fork() gets a NIC of its own on first use (sim_backend.h), and a trace of
// its own.
void ForgetBackendInChild() {
  SimBackend* parent = g_backend.exchange(nullptr, std::memory_order_acq_rel);
  if (parent == nullptr) return;
  SetInlineVerbsBackend(nullptr);
  parent->MarkForked();
  ForgetSettingsInChild();
  waits::ForgetInChild();
}

absl::StatusOr<Backend*> GetSimBackend() {
  static softrpma::Mutex mu;
  static const bool registered = (pthread_atfork(nullptr, nullptr, &ForgetBackendInChild), true);
  (void)registered;
  softrpma::MutexLock lock(&mu);
  SimBackend* backend = g_backend.load(std::memory_order_acquire);
  if (backend != nullptr) return backend;
  absl::Status status = ApplyEnvironment();
  if (!status.ok()) {
    // A configuration error (a malformed RPMA_SIM_FAULTS, a bad seed, an unreadable scenario):
    // said on stderr whatever librpma's log thresholds, like "fault injected", since by default
    // librpma's errors reach only syslog and the program would show nothing but an error code.
    std::fprintf(stderr, "softrpma-sim: cannot start the simulated NIC: %s\n",
                 std::string(status.message()).c_str());
    return status;
  }
  backend = new SimBackend();  // Never destroyed: objects it made may be used until exit.
  backend->InstallContextOps();
  SetInlineVerbsBackend(backend);
  g_backend.store(backend, std::memory_order_release);
  waits::Start(ProcessName());  // under rpma-sim (RPMA_SIM_RUN_DIR): its hang report
  return backend;
}

absl::StatusOr<ibv_context*> GetSimContext() {
  absl::StatusOr<Backend*> backend = GetSimBackend();
  if (!backend.ok()) return backend.status();
  return static_cast<SimBackend*>(*backend)->context();
}

}  // namespace softrpma::sim
