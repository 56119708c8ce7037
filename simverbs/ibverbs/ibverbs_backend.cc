#include "simverbs/ibverbs/ibverbs_backend.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/attributes.h"
#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "simverbs/mutex.h"
#include "simverbs/ibverbs/verbs_errors.h"

namespace softrpma::ibverbs {
namespace {

using internal::ConvertGetaddrinfo;
using internal::ConvertMinusOneErrno;
using internal::ConvertNegativeCount;
using internal::ConvertNullErrno;
using internal::ConvertReturnedErrno;

// An extended-post batch (ibv_wr_start .. ibv_wr_complete, one thread, as verbs requires)
// named an op the QP has no builder for.
thread_local bool t_batch_has_missing_builder = false;

// The pass-through backend. Stateless but for the batch flag above (per thread): thread-safe
// exactly as far as verbs itself is.
class IbverbsBackend final : public Backend {
 public:
  const char* Name() const override { return "ibverbs"; }

  int IbvQueryDeviceEx(ibv_context* ctx, ibv_device_attr_ex* attr) override {
    ibv_device_attr_ex result = {};
    const int err = ConvertReturnedErrno(::ibv_query_device_ex(ctx, nullptr, &result));
    if (err == 0) *attr = result;
    return err;
  }

  int IbvAllocPd(ibv_context* ctx, ibv_pd** pd) override {
    return ConvertNullErrno([&] { return ::ibv_alloc_pd(ctx); }, pd);
  }
  int IbvDeallocPd(ibv_pd* pd) override { return ConvertReturnedErrno(::ibv_dealloc_pd(pd)); }

  int IbvRegMr(ibv_pd* pd, void* addr, size_t length, int access, ibv_mr** mr) override {
    return ConvertNullErrno([&] { return ::ibv_reg_mr(pd, addr, length, access); }, mr);
  }
  int IbvDeregMr(ibv_mr* mr) override { return ConvertReturnedErrno(::ibv_dereg_mr(mr)); }
  int IbvAdviseMr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
                  uint32_t num_sge) override {
    return ConvertReturnedErrno(::ibv_advise_mr(pd, advice, flags, sg_list, num_sge));
  }

  int IbvCreateCompChannel(ibv_context* ctx, ibv_comp_channel** channel) override {
    return ConvertNullErrno([&] { return ::ibv_create_comp_channel(ctx); }, channel);
  }
  int IbvDestroyCompChannel(ibv_comp_channel* channel) override {
    return ConvertReturnedErrno(::ibv_destroy_comp_channel(channel));
  }

  int IbvCreateCq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                  int comp_vector, ibv_cq** cq) override {
    return ConvertNullErrno(
        [&] { return ::ibv_create_cq(ctx, cqe, cq_context, channel, comp_vector); }, cq);
  }
  int IbvCreateCqEx(ibv_context* ctx, ibv_cq_init_attr_ex* attr, ibv_cq_ex** cq) override {
    return ConvertNullErrno([&] { return ::ibv_create_cq_ex(ctx, attr); }, cq);
  }
  int IbvDestroyCq(ibv_cq* cq) override { return ConvertReturnedErrno(::ibv_destroy_cq(cq)); }
  int IbvReqNotifyCq(ibv_cq* cq, int solicited_only) override {
    return ConvertReturnedErrno(::ibv_req_notify_cq(cq, solicited_only));
  }
  int IbvGetCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) override {
    ibv_cq* event_cq = nullptr;
    void* event_cq_context = nullptr;
    const int err = ConvertMinusOneErrno(
        [&] { return ::ibv_get_cq_event(channel, &event_cq, &event_cq_context); });
    if (err == 0) {
      *cq = event_cq;
      *cq_context = event_cq_context;
    }
    return err;
  }
  void IbvAckCqEvents(ibv_cq* cq, unsigned int nevents) override {
    ::ibv_ack_cq_events(cq, nevents);
  }
  int IbvGetAsyncEvent(ibv_context* context, ibv_async_event* event) override {
    return ConvertMinusOneErrno([&] { return ::ibv_get_async_event(context, event); });
  }
  void IbvAckAsyncEvent(ibv_async_event* event) override { ::ibv_ack_async_event(event); }
  int IbvPollCq(ibv_cq* cq, int num_entries, ibv_wc* wc, int* num_polled) override {
    return ConvertNegativeCount(::ibv_poll_cq(cq, num_entries, wc), num_polled);
  }

  int IbvCreateSrq(ibv_pd* pd, ibv_srq_init_attr* attr, ibv_srq** srq) override {
    return ConvertNullErrno([&] { return ::ibv_create_srq(pd, attr); }, srq);
  }
  int IbvDestroySrq(ibv_srq* srq) override { return ConvertReturnedErrno(::ibv_destroy_srq(srq)); }
  int IbvPostSrqRecv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) override {
    return ConvertReturnedErrno(::ibv_post_srq_recv(srq, wr, bad_wr));
  }

  int IbvCreateQp(ibv_pd* pd, ibv_qp_init_attr* attr, ibv_qp** qp) override {
    return ConvertNullErrno([&] { return ::ibv_create_qp(pd, attr); }, qp);
  }
  int IbvCreateQpEx(ibv_context* ctx, ibv_qp_init_attr_ex* attr, ibv_qp** qp) override {
    return ConvertNullErrno([&] { return ::ibv_create_qp_ex(ctx, attr); }, qp);
  }
  int IbvModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) override {
    return ConvertReturnedErrno(::ibv_modify_qp(qp, attr, attr_mask));
  }
  int IbvQueryQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                 ibv_qp_init_attr* init_attr) override {
    return ConvertReturnedErrno(::ibv_query_qp(qp, attr, attr_mask, init_attr));
  }
  int IbvDestroyQp(ibv_qp* qp) override { return ConvertReturnedErrno(::ibv_destroy_qp(qp)); }
  int IbvCreateAh(ibv_pd* pd, ibv_ah_attr* attr, ibv_ah** ah) override {
    return ConvertNullErrno([&] { return ::ibv_create_ah(pd, attr); }, ah);
  }
  int IbvDestroyAh(ibv_ah* ah) override { return ConvertReturnedErrno(::ibv_destroy_ah(ah)); }

  int IbvPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) override {
    return ConvertReturnedErrno(::ibv_post_send(qp, wr, bad_wr));
  }
  int IbvPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) override {
    return ConvertReturnedErrno(::ibv_post_recv(qp, wr, bad_wr));
  }

  int IbvQpToQpEx(ibv_qp* qp, ibv_qp_ex** qpx) override {
    ibv_qp_ex* const result = ::ibv_qp_to_qp_ex(qp);
    if (result == nullptr) return kNoErrno;
    *qpx = result;
    return 0;
  }
  void IbvWrStart(ibv_qp_ex* qpx) override {
    t_batch_has_missing_builder = false;
    ::ibv_wr_start(qpx);
  }
  void IbvWrAtomicWrite(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr,
                        const void* atomic_wr) override {
    // A provider leaves the builders of ops outside the QP's send_ops_flags unset: calling one
    // would jump to NULL. The batch is then refused whole at IbvWrComplete (EINVAL, as the
    // simulator refuses it), never posted without the WR.
    if (qpx->wr_atomic_write == nullptr) {
      t_batch_has_missing_builder = true;
      return;
    }
    ::ibv_wr_atomic_write(qpx, rkey, remote_addr, atomic_wr);
  }
  int IbvWrComplete(ibv_qp_ex* qpx) override {
    if (t_batch_has_missing_builder) {
      t_batch_has_missing_builder = false;
      ::ibv_wr_abort(qpx);
      return EINVAL;
    }
    return ConvertReturnedErrno(::ibv_wr_complete(qpx));
  }

  int RdmaGetaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                      rdma_addrinfo** res) override {
    rdma_addrinfo* result = nullptr;
    const int err = ConvertGetaddrinfo([&] { return ::rdma_getaddrinfo(node, service, hints, &result); });
    if (err == 0) *res = result;
    return err;
  }
  void RdmaFreeaddrinfo(rdma_addrinfo* res) override { ::rdma_freeaddrinfo(res); }

  int RdmaCreateEventChannel(rdma_event_channel** channel) override {
    return ConvertNullErrno([] { return ::rdma_create_event_channel(); }, channel);
  }
  void RdmaDestroyEventChannel(rdma_event_channel* channel) override {
    ::rdma_destroy_event_channel(channel);
  }

  int RdmaCreateId(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) override {
    rdma_cm_id* result = nullptr;
    const int err =
        ConvertMinusOneErrno([&] { return ::rdma_create_id(channel, &result, context, ps); });
    if (err == 0) *id = result;
    return err;
  }
  int RdmaDestroyId(rdma_cm_id* id) override {
    return ConvertMinusOneErrno([&] { return ::rdma_destroy_id(id); });
  }
  int RdmaMigrateId(rdma_cm_id* id, rdma_event_channel* channel) override {
    return ConvertMinusOneErrno([&] { return ::rdma_migrate_id(id, channel); });
  }

  int RdmaBindAddr(rdma_cm_id* id, sockaddr* addr) override {
    return ConvertMinusOneErrno([&] { return ::rdma_bind_addr(id, addr); });
  }
  int RdmaResolveAddr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr,
                      int timeout_ms) override {
    return ConvertMinusOneErrno(
        [&] { return ::rdma_resolve_addr(id, src_addr, dst_addr, timeout_ms); });
  }
  int RdmaResolveRoute(rdma_cm_id* id, int timeout_ms) override {
    return ConvertMinusOneErrno([&] { return ::rdma_resolve_route(id, timeout_ms); });
  }
  int RdmaListen(rdma_cm_id* id, int backlog) override {
    return ConvertMinusOneErrno([&] { return ::rdma_listen(id, backlog); });
  }

  int RdmaCreateQpEx(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) override {
    return ConvertMinusOneErrno([&] { return ::rdma_create_qp_ex(id, attr); });
  }
  void RdmaDestroyQp(rdma_cm_id* id) override { ::rdma_destroy_qp(id); }

  int RdmaConnect(rdma_cm_id* id, rdma_conn_param* param) override {
    return ConvertMinusOneErrno([&] { return ::rdma_connect(id, param); });
  }
  int RdmaAccept(rdma_cm_id* id, rdma_conn_param* param) override {
    return ConvertMinusOneErrno([&] { return ::rdma_accept(id, param); });
  }
  int RdmaReject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) override {
    return ConvertMinusOneErrno([&] { return ::rdma_reject(id, private_data, private_data_len); });
  }
  int RdmaDisconnect(rdma_cm_id* id) override {
    return ConvertMinusOneErrno([&] { return ::rdma_disconnect(id); });
  }

  int RdmaGetCmEvent(rdma_event_channel* channel, rdma_cm_event** event) override {
    rdma_cm_event* result = nullptr;
    const int err = ConvertMinusOneErrno([&] { return ::rdma_get_cm_event(channel, &result); });
    if (err == 0) *event = result;
    return err;
  }
  int RdmaAckCmEvent(rdma_cm_event* event) override {
    return ConvertMinusOneErrno([&] { return ::rdma_ack_cm_event(event); });
  }
};

// Why no device was found, for the FailedPrecondition message: whether ibv_get_device_list
// returned a list, the errno it left, and the device count it reported.
std::string NoDeviceReason(bool listed, int err, int num_devices) {
  if (listed) return absl::StrCat("ibv_get_device_list() listed ", num_devices, " devices");
  if (err == ENOSYS) {
    return "ibv_get_device_list() failed with ENOSYS: the kernel has no RDMA support loaded";
  }
  return absl::StrCat("ibv_get_device_list() failed with errno ", err);
}

ABSL_CONST_INIT softrpma::Mutex backend_mu;
// Set once the backend has started; never destroyed (used until exit).
Backend* started_backend ABSL_GUARDED_BY(backend_mu) = nullptr;

}  // namespace

absl::StatusOr<Backend*> GetIbverbsBackend() {
  softrpma::MutexLock lock(&backend_mu);
  if (started_backend != nullptr) return started_backend;

  int num_devices = 0;
  errno = 0;
  ibv_device** const list = ::ibv_get_device_list(&num_devices);
  const int err = errno;
  const bool listed = list != nullptr;
  if (listed) ::ibv_free_device_list(list);
  if (!listed || num_devices <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the ibverbs backend cannot start: no RDMA device was found (",
        NoDeviceReason(listed, err, num_devices),
        "). Without RDMA hardware, Soft-RoCE gives one on an Ethernet interface: "
        "`rdma link add rxe0 type rxe netdev <if>` (as root; see simverbs/ibverbs/README.md). "
        "RPMA_BACKEND=sim (or RPMA_BACKEND unset) selects the simulated NIC instead."));
  }
  started_backend = new IbverbsBackend();
  return started_backend;
}

}  // namespace softrpma::ibverbs
