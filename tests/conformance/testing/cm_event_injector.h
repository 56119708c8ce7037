// cm_event_injector.h: CmEventInjector, a Backend that is the simulated NIC except that it can
// be told to report an rdma_cm event the simulator never produces, for the two ERRORS lines
// about events librpma does not expect:
//   rpma_conn_next_event   RPMA_E_UNKNOWN  unexpected event
//   rpma_ep_next_conn_req  RPMA_E_INVAL    obtained an event different than a connection request
// A real provider reports such events (RDMA_CM_EVENT_ADDR_CHANGE when the address of the
// device changes, for a listener as for a connected id); the simulator's connection manager
// does not model them and its fault grammar (docs/FAULTS.md) has no action for them yet.
//
// It is the LevelDB EnvWrapper pattern: every method forwards to the simulator's backend,
// except that after InjectNextCmEvent(type) the next RdmaGetCmEvent returns at once (without
// waiting, without taking anything from the channel) an event of that type that the injector
// owns; RdmaAckCmEvent frees it. The channel's real events stay queued.
//
// Use: while a softrpma::ScopedBackendOverride(&CmEventInjector::Get()) is alive, build the
// objects (rpma_utils_get_ibv_context registers the device with the injector, so every object
// made on it calls through it); then InjectNextCmEvent() right before the call under test.
// Without an injection pending it is a plain pass-through.
//
// Thread-safe.

#ifndef SOFTRPMA_TESTS_CONFORMANCE_TESTING_CM_EVENT_INJECTOR_H_
#define SOFTRPMA_TESTS_CONFORMANCE_TESTING_CM_EVENT_INJECTOR_H_

#include <rdma/rdma_cma.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "simverbs/backend.h"

namespace softrpma::conformance {

// The report's note on the rows reached through the injector (RPMA_ROW_NOTE).
inline constexpr char kInjectedEventNote[] =
    "the simulator reports only the rdma_cm events its model produces; the test reaches the row "
    "through CmEventInjector (tests/conformance/testing/cm_event_injector.h), a forwarding "
    "Backend over the simulator that reports RDMA_CM_EVENT_ADDR_CHANGE, as a real provider does "
    "when the address of the device changes";

class CmEventInjector final : public Backend {
 public:
  // The process's injector over the simulator's backend (started on first use). Never
  // destroyed: objects made through it may outlive a test.
  static CmEventInjector& Get();

  // The next RdmaGetCmEvent (on any channel) returns an event of `type` (status 0, no id, no
  // private data) instead of waiting for the channel's next event.
  void InjectNextCmEvent(rdma_cm_event_type type) ABSL_LOCKS_EXCLUDED(mu_);
  // Injected events handed out and not yet acknowledged.
  int UnackedInjectedEvents() const ABSL_LOCKS_EXCLUDED(mu_);

  const char* Name() const override { return "sim"; }
  int IbvQueryDeviceEx(ibv_context* ctx, ibv_device_attr_ex* attr) override;
  int IbvAllocPd(ibv_context* ctx, ibv_pd** pd) override;
  int IbvDeallocPd(ibv_pd* pd) override;
  int IbvRegMr(ibv_pd* pd, void* addr, size_t length, int access, ibv_mr** mr) override;
  int IbvDeregMr(ibv_mr* mr) override;
  int IbvAdviseMr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
                  uint32_t num_sge) override;
  int IbvCreateCompChannel(ibv_context* ctx, ibv_comp_channel** channel) override;
  int IbvDestroyCompChannel(ibv_comp_channel* channel) override;
  int IbvCreateCq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                  int comp_vector, ibv_cq** cq) override;
  int IbvCreateCqEx(ibv_context* ctx, ibv_cq_init_attr_ex* attr, ibv_cq_ex** cq) override;
  int IbvDestroyCq(ibv_cq* cq) override;
  int IbvReqNotifyCq(ibv_cq* cq, int solicited_only) override;
  int IbvGetCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) override;
  void IbvAckCqEvents(ibv_cq* cq, unsigned int nevents) override;
  int IbvGetAsyncEvent(ibv_context* context, ibv_async_event* event) override;
  void IbvAckAsyncEvent(ibv_async_event* event) override;
  int IbvPollCq(ibv_cq* cq, int num_entries, ibv_wc* wc, int* num_polled) override;
  int IbvCreateSrq(ibv_pd* pd, ibv_srq_init_attr* attr, ibv_srq** srq) override;
  int IbvDestroySrq(ibv_srq* srq) override;
  int IbvPostSrqRecv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) override;
  int IbvCreateQp(ibv_pd* pd, ibv_qp_init_attr* attr, ibv_qp** qp) override;
  int IbvCreateQpEx(ibv_context* ctx, ibv_qp_init_attr_ex* attr, ibv_qp** qp) override;
  int IbvModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) override;
  int IbvQueryQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                 ibv_qp_init_attr* init_attr) override;
  int IbvDestroyQp(ibv_qp* qp) override;
  int IbvCreateAh(ibv_pd* pd, ibv_ah_attr* attr, ibv_ah** ah) override;
  int IbvDestroyAh(ibv_ah* ah) override;
  int IbvPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) override;
  int IbvPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) override;
  int IbvQpToQpEx(ibv_qp* qp, ibv_qp_ex** qpx) override;
  void IbvWrStart(ibv_qp_ex* qpx) override;
  void IbvWrAtomicWrite(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr,
                        const void* atomic_wr) override;
  int IbvWrComplete(ibv_qp_ex* qpx) override;
  int RdmaGetaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                      rdma_addrinfo** res) override;
  void RdmaFreeaddrinfo(rdma_addrinfo* res) override;
  int RdmaCreateEventChannel(rdma_event_channel** channel) override;
  void RdmaDestroyEventChannel(rdma_event_channel* channel) override;
  int RdmaCreateId(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) override;
  int RdmaDestroyId(rdma_cm_id* id) override;
  int RdmaMigrateId(rdma_cm_id* id, rdma_event_channel* channel) override;
  int RdmaBindAddr(rdma_cm_id* id, sockaddr* addr) override;
  int RdmaResolveAddr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr,
                      int timeout_ms) override;
  int RdmaResolveRoute(rdma_cm_id* id, int timeout_ms) override;
  int RdmaListen(rdma_cm_id* id, int backlog) override;
  int RdmaCreateQpEx(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) override;
  void RdmaDestroyQp(rdma_cm_id* id) override;
  int RdmaConnect(rdma_cm_id* id, rdma_conn_param* param) override;
  int RdmaAccept(rdma_cm_id* id, rdma_conn_param* param) override;
  int RdmaReject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) override;
  int RdmaDisconnect(rdma_cm_id* id) override;
  int RdmaGetCmEvent(rdma_event_channel* channel, rdma_cm_event** event) override
      ABSL_LOCKS_EXCLUDED(mu_);
  int RdmaAckCmEvent(rdma_cm_event* event) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit CmEventInjector(Backend* sim) : sim_(sim) {}

  Backend* const sim_;
  mutable absl::Mutex mu_;
  bool inject_pending_ ABSL_GUARDED_BY(mu_) = false;
  rdma_cm_event_type inject_type_ ABSL_GUARDED_BY(mu_) = RDMA_CM_EVENT_ADDR_CHANGE;
  // Injected events handed out and not acknowledged yet.
  absl::flat_hash_set<rdma_cm_event*> unacked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace softrpma::conformance

#endif  // SOFTRPMA_TESTS_CONFORMANCE_TESTING_CM_EVENT_INJECTOR_H_
