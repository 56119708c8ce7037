#include "tests/conformance/testing/cm_event_injector.h"

#include <cstdlib>
#include <cstring>

#include "absl/status/statusor.h"
#include "simverbs/sim/sim_backend.h"

namespace softrpma::conformance {
namespace {}  // namespace

CmEventInjector& CmEventInjector::Get() {
  static CmEventInjector* injector = [] {
    absl::StatusOr<Backend*> sim = sim::GetSimBackend();
    if (!sim.ok()) std::abort();  // the simulator always starts without RPMA_SIM_FAULTS
    return new CmEventInjector(*sim);
  }();
  return *injector;
}

void CmEventInjector::InjectNextCmEvent(rdma_cm_event_type type) {
  absl::MutexLock lock(&mu_);
  inject_pending_ = true;
  inject_type_ = type;
}

int CmEventInjector::UnackedInjectedEvents() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(unacked_.size());
}

int CmEventInjector::RdmaGetCmEvent(rdma_event_channel* channel, rdma_cm_event** event) {
  {
    absl::MutexLock lock(&mu_);
    if (inject_pending_ && event != nullptr) {
      inject_pending_ = false;
      auto* injected = new rdma_cm_event;
      std::memset(injected, 0, sizeof(*injected));
      injected->event = inject_type_;
      unacked_.insert(injected);
      *event = injected;
      return 0;
    }
  }
  return sim_->RdmaGetCmEvent(channel, event);
}

int CmEventInjector::RdmaAckCmEvent(rdma_cm_event* event) {
  {
    absl::MutexLock lock(&mu_);
    if (unacked_.erase(event) == 1) {
      delete event;
      return 0;
    }
  }
  return sim_->RdmaAckCmEvent(event);
}

// ---- Pass-through -------------------------------------------------------------------------

int CmEventInjector::IbvQueryDeviceEx(ibv_context* ctx, ibv_device_attr_ex* attr) {
  return sim_->IbvQueryDeviceEx(ctx, attr);
}
int CmEventInjector::IbvAllocPd(ibv_context* ctx, ibv_pd** pd) { return sim_->IbvAllocPd(ctx, pd); }
int CmEventInjector::IbvDeallocPd(ibv_pd* pd) { return sim_->IbvDeallocPd(pd); }
int CmEventInjector::IbvRegMr(ibv_pd* pd, void* addr, size_t length, int access, ibv_mr** mr) {
  return sim_->IbvRegMr(pd, addr, length, access, mr);
}
int CmEventInjector::IbvDeregMr(ibv_mr* mr) { return sim_->IbvDeregMr(mr); }
int CmEventInjector::IbvAdviseMr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags,
                                 ibv_sge* sg_list, uint32_t num_sge) {
  return sim_->IbvAdviseMr(pd, advice, flags, sg_list, num_sge);
}
int CmEventInjector::IbvCreateCompChannel(ibv_context* ctx, ibv_comp_channel** channel) {
  return sim_->IbvCreateCompChannel(ctx, channel);
}
int CmEventInjector::IbvDestroyCompChannel(ibv_comp_channel* channel) {
  return sim_->IbvDestroyCompChannel(channel);
}
int CmEventInjector::IbvCreateCq(ibv_context* ctx, int cqe, void* cq_context,
                                 ibv_comp_channel* channel, int comp_vector, ibv_cq** cq) {
  return sim_->IbvCreateCq(ctx, cqe, cq_context, channel, comp_vector, cq);
}
int CmEventInjector::IbvCreateCqEx(ibv_context* ctx, ibv_cq_init_attr_ex* attr, ibv_cq_ex** cq) {
  return sim_->IbvCreateCqEx(ctx, attr, cq);
}
int CmEventInjector::IbvDestroyCq(ibv_cq* cq) { return sim_->IbvDestroyCq(cq); }
int CmEventInjector::IbvReqNotifyCq(ibv_cq* cq, int solicited_only) {
  return sim_->IbvReqNotifyCq(cq, solicited_only);
}
int CmEventInjector::IbvGetCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  return sim_->IbvGetCqEvent(channel, cq, cq_context);
}
void CmEventInjector::IbvAckCqEvents(ibv_cq* cq, unsigned int nevents) {
  sim_->IbvAckCqEvents(cq, nevents);
}
int CmEventInjector::IbvGetAsyncEvent(ibv_context* context, ibv_async_event* event) {
  return sim_->IbvGetAsyncEvent(context, event);
}
void CmEventInjector::IbvAckAsyncEvent(ibv_async_event* event) { sim_->IbvAckAsyncEvent(event); }
int CmEventInjector::IbvPollCq(ibv_cq* cq, int num_entries, ibv_wc* wc, int* num_polled) {
  return sim_->IbvPollCq(cq, num_entries, wc, num_polled);
}
int CmEventInjector::IbvCreateSrq(ibv_pd* pd, ibv_srq_init_attr* attr, ibv_srq** srq) {
  return sim_->IbvCreateSrq(pd, attr, srq);
}
int CmEventInjector::IbvDestroySrq(ibv_srq* srq) { return sim_->IbvDestroySrq(srq); }
int CmEventInjector::IbvPostSrqRecv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return sim_->IbvPostSrqRecv(srq, wr, bad_wr);
}
int CmEventInjector::IbvCreateQp(ibv_pd* pd, ibv_qp_init_attr* attr, ibv_qp** qp) {
  return sim_->IbvCreateQp(pd, attr, qp);
}
int CmEventInjector::IbvCreateQpEx(ibv_context* ctx, ibv_qp_init_attr_ex* attr, ibv_qp** qp) {
  return sim_->IbvCreateQpEx(ctx, attr, qp);
}
int CmEventInjector::IbvModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  return sim_->IbvModifyQp(qp, attr, attr_mask);
}
int CmEventInjector::IbvQueryQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                                ibv_qp_init_attr* init_attr) {
  return sim_->IbvQueryQp(qp, attr, attr_mask, init_attr);
}
int CmEventInjector::IbvDestroyQp(ibv_qp* qp) { return sim_->IbvDestroyQp(qp); }
int CmEventInjector::IbvCreateAh(ibv_pd* pd, ibv_ah_attr* attr, ibv_ah** ah) {
  return sim_->IbvCreateAh(pd, attr, ah);
}
int CmEventInjector::IbvDestroyAh(ibv_ah* ah) { return sim_->IbvDestroyAh(ah); }
int CmEventInjector::IbvPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  return sim_->IbvPostSend(qp, wr, bad_wr);
}
int CmEventInjector::IbvPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return sim_->IbvPostRecv(qp, wr, bad_wr);
}
int CmEventInjector::IbvQpToQpEx(ibv_qp* qp, ibv_qp_ex** qpx) { return sim_->IbvQpToQpEx(qp, qpx); }
void CmEventInjector::IbvWrStart(ibv_qp_ex* qpx) { sim_->IbvWrStart(qpx); }
void CmEventInjector::IbvWrAtomicWrite(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr,
                                       const void* atomic_wr) {
  sim_->IbvWrAtomicWrite(qpx, rkey, remote_addr, atomic_wr);
}
int CmEventInjector::IbvWrComplete(ibv_qp_ex* qpx) { return sim_->IbvWrComplete(qpx); }
int CmEventInjector::RdmaGetaddrinfo(const char* node, const char* service,
                                     const rdma_addrinfo* hints, rdma_addrinfo** res) {
  return sim_->RdmaGetaddrinfo(node, service, hints, res);
}
void CmEventInjector::RdmaFreeaddrinfo(rdma_addrinfo* res) { sim_->RdmaFreeaddrinfo(res); }
int CmEventInjector::RdmaCreateEventChannel(rdma_event_channel** channel) {
  return sim_->RdmaCreateEventChannel(channel);
}
void CmEventInjector::RdmaDestroyEventChannel(rdma_event_channel* channel) {
  sim_->RdmaDestroyEventChannel(channel);
}
int CmEventInjector::RdmaCreateId(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                                  rdma_port_space ps) {
  return sim_->RdmaCreateId(channel, id, context, ps);
}
int CmEventInjector::RdmaDestroyId(rdma_cm_id* id) { return sim_->RdmaDestroyId(id); }
int CmEventInjector::RdmaMigrateId(rdma_cm_id* id, rdma_event_channel* channel) {
  return sim_->RdmaMigrateId(id, channel);
}
int CmEventInjector::RdmaBindAddr(rdma_cm_id* id, sockaddr* addr) {
  return sim_->RdmaBindAddr(id, addr);
}
int CmEventInjector::RdmaResolveAddr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr,
                                     int timeout_ms) {
  return sim_->RdmaResolveAddr(id, src_addr, dst_addr, timeout_ms);
}
int CmEventInjector::RdmaResolveRoute(rdma_cm_id* id, int timeout_ms) {
  return sim_->RdmaResolveRoute(id, timeout_ms);
}
int CmEventInjector::RdmaListen(rdma_cm_id* id, int backlog) {
  return sim_->RdmaListen(id, backlog);
}
int CmEventInjector::RdmaCreateQpEx(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  return sim_->RdmaCreateQpEx(id, attr);
}
void CmEventInjector::RdmaDestroyQp(rdma_cm_id* id) { sim_->RdmaDestroyQp(id); }
int CmEventInjector::RdmaConnect(rdma_cm_id* id, rdma_conn_param* param) {
  return sim_->RdmaConnect(id, param);
}
int CmEventInjector::RdmaAccept(rdma_cm_id* id, rdma_conn_param* param) {
  return sim_->RdmaAccept(id, param);
}
int CmEventInjector::RdmaReject(rdma_cm_id* id, const void* private_data,
                                uint8_t private_data_len) {
  return sim_->RdmaReject(id, private_data, private_data_len);
}
int CmEventInjector::RdmaDisconnect(rdma_cm_id* id) { return sim_->RdmaDisconnect(id); }

}  // namespace softrpma::conformance
