// backend.h: the Backend interface, the one seam between the librpma API layer (api/) and an
// RDMA provider. Two implementations sit behind it: the simulated NIC (simverbs/sim/) and a
// pass-through to the real libibverbs + librdmacm (simverbs/ibverbs/).
//
// Each method stands for exactly one libibverbs or librdmacm call, is named after it
// (ibv_get_cq_event -> IbvGetCqEvent) and takes that call's arguments in that call's order. The
// objects are the real verbs types (struct ibv_cq, struct rdma_cm_id, ...): an implementation
// hands out structs that embed them as their first member, the way a verbs provider does, so the
// API layer never knows which backend made an object.
//
// ONE ERROR CONVENTION for every method that can fail, whatever the verbs call it stands for
// does (NULL + errno, a returned errno, -1 + errno, or a negative count):
//   * 0 on success;
//   * a positive errno value on failure: the errno the call reported;
//   * kNoErrno on failure when the provider reported failure but gave no errno value;
//   * for RdmaGetaddrinfo only, GaiError(code) when name resolution failed with getaddrinfo's
//     EAI_* `code` (librdmacm returns -1 with that code in errno; gai_strerror(3) explains it).
// Output objects are returned through the last pointer argument(s), which are written only on
// success. Methods that cannot fail in verbs (ibv_ack_cq_events, rdma_destroy_qp, ...) return
// void.
//
// Thread safety: every implementation is safe to call from several threads at once under the
// rules verbs itself sets (e.g. one QP may be posted to from one thread while its CQ is polled
// from another; an object must not be destroyed while another thread uses it).

#ifndef SOFTRPMA_SIMVERBS_BACKEND_H_
#define SOFTRPMA_SIMVERBS_BACKEND_H_

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>

namespace softrpma {

// Returned instead of an errno value when a provider call failed without saying why (for
// example ibv_alloc_pd() returning NULL with errno 0).
inline constexpr int kNoErrno = -1;

// A getaddrinfo(3) failure (EAI_* codes are negative on Linux) as a Backend error: neither a
// positive errno value nor kNoErrno. GaiCode gives the EAI_* code back.
inline constexpr int kGaiErrorBase = -1000;
inline constexpr int GaiError(int eai_code) { return kGaiErrorBase + eai_code; }
inline constexpr bool IsGaiError(int err) { return err < kGaiErrorBase && err > 2 * kGaiErrorBase; }
inline constexpr int GaiCode(int err) { return err - kGaiErrorBase; }

// The ibv_device_attr_ex.device_cap_flags_ex bit of a device with native 8-byte atomic write
// (ibv_wr_atomic_write(3)): the kernel's IB_UVERBS_DEVICE_ATOMIC_WRITE (1 << 40), which the
// installed rdma/ib_user_verbs.h (rdma-core 44) predates.
inline constexpr uint64_t kDeviceCapAtomicWrite = uint64_t{1} << 40;

class Backend {
 public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;

  // The name RPMA_BACKEND selects this backend by: "sim" or "ibverbs".
  virtual const char* Name() const = 0;

  // ---- Device -------------------------------------------------------------------------------

  // ibv_query_device_ex(ctx, NULL, attr). Errors: EINVAL (unknown ctx), EOPNOTSUPP.
  virtual int IbvQueryDeviceEx(ibv_context* ctx, ibv_device_attr_ex* attr) = 0;

  // ---- Protection domains and memory regions ------------------------------------------------

  // ibv_alloc_pd(ctx). Errors: ENOMEM, EINVAL.
  virtual int IbvAllocPd(ibv_context* ctx, ibv_pd** pd) = 0;
  // ibv_dealloc_pd(pd). Errors: EBUSY (MRs, QPs or SRQs still use it).
  virtual int IbvDeallocPd(ibv_pd* pd) = 0;

  // ibv_reg_mr(pd, addr, length, access). The region stays valid until IbvDeregMr.
  // Errors: EINVAL (length 0, bad access flags), ENOMEM.
  virtual int IbvRegMr(ibv_pd* pd, void* addr, size_t length, int access, ibv_mr** mr) = 0;
  // ibv_dereg_mr(mr). Errors: EINVAL.
  virtual int IbvDeregMr(ibv_mr* mr) = 0;
  // ibv_advise_mr(pd, advice, flags, sg_list, num_sge). Errors: EOPNOTSUPP (no on-demand
  // paging), EINVAL (bad advice or flags), EFAULT (range not in a registered region).
  virtual int IbvAdviseMr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags,
                          ibv_sge* sg_list, uint32_t num_sge) = 0;

  // ---- Completion channels and completion queues --------------------------------------------

  // ibv_create_comp_channel(ctx). The channel's fd is pollable: readable while an event waits.
  virtual int IbvCreateCompChannel(ibv_context* ctx, ibv_comp_channel** channel) = 0;
  // ibv_destroy_comp_channel(channel). Errors: EBUSY (a CQ still uses it).
  virtual int IbvDestroyCompChannel(ibv_comp_channel* channel) = 0;

  // ibv_create_cq(ctx, cqe, cq_context, channel, comp_vector). channel may be NULL.
  // Errors: EINVAL (cqe < 1 or above the device limit), ENOMEM.
  virtual int IbvCreateCq(ibv_context* ctx, int cqe, void* cq_context,
                          ibv_comp_channel* channel, int comp_vector, ibv_cq** cq) = 0;
  // ibv_create_cq_ex(ctx, attr): a CQ that is an extended CQ too (ibv_create_cq_ex(3)): the
  // ibv_start_poll / ibv_next_poll / ibv_end_poll iterator and the ibv_wc_read_* readers of the
  // fields attr->wc_flags asks for. attr->cqe, cq_context, channel (may be NULL) and
  // comp_vector are IbvCreateCq's; attr->comp_mask may hold IBV_CQ_INIT_ATTR_MASK_FLAGS
  // (attr->flags are read) and IBV_CQ_INIT_ATTR_MASK_PD (attr->parent_domain). The CQ is one CQ
  // under both names: ibv_cq_ex_to_cq(*cq) (a cast) goes to IbvPollCq, IbvReqNotifyCq and
  // IbvDestroyCq, which destroys it. Errors: EINVAL (cqe < 1 or above the device limit, bits
  // of comp_mask or flags that verbs does not define, a parent_domain that is not a parent
  // domain), EOPNOTSUPP (wc_flags the device does not give, or that verbs does not define, as
  // libibverbs; flags verbs defines but the device does not give), ENOMEM.
  virtual int IbvCreateCqEx(ibv_context* ctx, ibv_cq_init_attr_ex* attr, ibv_cq_ex** cq) = 0;
  // ibv_destroy_cq(cq). Errors: EBUSY (a QP or SRQ still uses it, or events were delivered
  // and not acknowledged: where libibverbs would block forever, a backend may report EBUSY).
  virtual int IbvDestroyCq(ibv_cq* cq) = 0;
  // ibv_req_notify_cq(cq, solicited_only): arms cq so that its next completion sends one event
  // to its channel. Errors: EINVAL (no channel).
  virtual int IbvReqNotifyCq(ibv_cq* cq, int solicited_only) = 0;
  // ibv_get_cq_event(channel, &cq, &cq_context): blocks until an event is there, unless the
  // channel's fd is O_NONBLOCK (then EAGAIN). Each event got must be acknowledged once with
  // IbvAckCqEvents on the CQ it names.
  virtual int IbvGetCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) = 0;
  // ibv_ack_cq_events(cq, nevents).
  virtual void IbvAckCqEvents(ibv_cq* cq, unsigned int nevents) = 0;
  // ibv_get_async_event(context, event): blocks until the device has an asynchronous event
  // (a CQ overflowed: IBV_EVENT_CQ_ERR, ...), unless context->async_fd is O_NONBLOCK (then
  // EAGAIN). Each event got must be acknowledged once with IbvAckAsyncEvent.
  virtual int IbvGetAsyncEvent(ibv_context* context, ibv_async_event* event) = 0;
  // ibv_ack_async_event(event).
  virtual void IbvAckAsyncEvent(ibv_async_event* event) = 0;
  // ibv_poll_cq(cq, num_entries, wc): up to num_entries completions, oldest first, into wc;
  // their count into *num_polled (0 when the CQ is empty, which is not a failure).
  // Errors: EOVERFLOW (the CQ overflowed: completions were lost), or kNoErrno.
  virtual int IbvPollCq(ibv_cq* cq, int num_entries, ibv_wc* wc, int* num_polled) = 0;

  // ---- Shared receive queues ----------------------------------------------------------------

  // ibv_create_srq(pd, attr). Errors: EINVAL, ENOMEM.
  virtual int IbvCreateSrq(ibv_pd* pd, ibv_srq_init_attr* attr, ibv_srq** srq) = 0;
  // ibv_destroy_srq(srq). Errors: EBUSY (a QP still uses it).
  virtual int IbvDestroySrq(ibv_srq* srq) = 0;
  // ibv_post_srq_recv(srq, wr, &bad_wr). Errors: ENOMEM (queue full), EINVAL.
  virtual int IbvPostSrqRecv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) = 0;

  // ---- Queue pairs made and connected by verbs (no CM) --------------------------------------

  // ibv_create_qp(pd, attr): a QP in RESET; writes the granted capabilities back into
  // attr->cap. Errors: EINVAL, ENOMEM, EOPNOTSUPP (a QP type the provider has not).
  virtual int IbvCreateQp(ibv_pd* pd, ibv_qp_init_attr* attr, ibv_qp** qp) = 0;
  // ibv_create_qp_ex(ctx, attr) (with attr->comp_mask beyond IBV_QP_INIT_ATTR_PD; verbs.h
  // calls ibv_create_qp for the PD alone): as IbvCreateQp, and with
  // IBV_QP_INIT_ATTR_SEND_OPS_FLAGS an extended QP (IbvQpToQpEx) whose ibv_qp_ex builders are
  // the ops in send_ops_flags. Writes the granted capabilities back into attr->cap.
  // Errors: EINVAL (comp_mask bits beyond the PD and send_ops_flags, a bad attribute),
  // EOPNOTSUPP (a QP type or send op the device has not), ENOMEM.
  virtual int IbvCreateQpEx(ibv_context* ctx, ibv_qp_init_attr_ex* attr, ibv_qp** qp) = 0;
  // ibv_modify_qp(qp, attr, attr_mask). Errors: EINVAL (a transition or attribute mask the
  // QP's state does not allow, a bad attribute value).
  virtual int IbvModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) = 0;
  // ibv_query_qp(qp, attr, attr_mask, init_attr). Errors: EINVAL.
  virtual int IbvQueryQp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                         ibv_qp_init_attr* init_attr) = 0;
  // ibv_destroy_qp(qp) of a QP of IbvCreateQp, or of RdmaCreateQpEx whose id was destroyed
  // with the QP on it (while the id lives: RdmaDestroyQp). Errors: EINVAL, EBUSY.
  virtual int IbvDestroyQp(ibv_qp* qp) = 0;

  // ---- Address handles (the destinations of UD sends) ----------------------------------------

  // ibv_create_ah(pd, attr). Errors: EINVAL (a bad port or GID index; no GRH on RoCE), ENOMEM.
  virtual int IbvCreateAh(ibv_pd* pd, ibv_ah_attr* attr, ibv_ah** ah) = 0;
  // ibv_destroy_ah(ah). Errors: EINVAL.
  virtual int IbvDestroyAh(ibv_ah* ah) = 0;

  // ---- Queue pairs: the data path -----------------------------------------------------------

  // ibv_post_send(qp, wr, &bad_wr). Errors: ENOMEM (send queue full), EINVAL (QP not ready to
  // send, bad opcode or too many SGEs); *bad_wr names the first WR not posted.
  virtual int IbvPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) = 0;
  // ibv_post_recv(qp, wr, &bad_wr). Errors: ENOMEM (receive queue full), EINVAL.
  virtual int IbvPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) = 0;

  // ---- Queue pairs: the extended post API (ibv_wr_post(3)) -----------------------------------
  // A batch is IbvWrStart, then one builder per WR (the caller sets qpx->wr_id and
  // qpx->wr_flags before each, as verbs has it), then IbvWrComplete, which posts the batch.
  // Only the builders of the ops in the QP's send_ops_flags may be called.

  // ibv_qp_to_qp_ex(qp). Errors: kNoErrno (the QP was not created with
  // IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: verbs gives NULL).
  virtual int IbvQpToQpEx(ibv_qp* qp, ibv_qp_ex** qpx) = 0;
  // ibv_wr_start(qpx): opens a batch (the provider holds the send queue until it ends).
  virtual void IbvWrStart(ibv_qp_ex* qpx) = 0;
  // ibv_wr_atomic_write(qpx, rkey, remote_addr, atomic_wr): adds an 8-byte atomic write of the
  // bytes at atomic_wr (copied now). On a QP without IBV_QP_EX_WITH_ATOMIC_WRITE in
  // send_ops_flags it adds nothing and the batch fails at IbvWrComplete (EINVAL).
  virtual void IbvWrAtomicWrite(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr,
                                const void* atomic_wr) = 0;
  // ibv_wr_complete(qpx): posts the batch and ends it. Errors: as IbvPostSend's, and EINVAL
  // for a builder the QP does not have (nothing of the batch is posted then).
  virtual int IbvWrComplete(ibv_qp_ex* qpx) = 0;

  // ---- Connection manager (rdma_cm) ---------------------------------------------------------

  // rdma_getaddrinfo(node, service, hints, &res); release with RdmaFreeaddrinfo.
  // Errors: GaiError(EAI_NONAME, ...) (the name does not resolve), EINVAL, ENOMEM,
  // EADDRNOTAVAIL / ENODEV (no device for that address).
  virtual int RdmaGetaddrinfo(const char* node, const char* service,
                              const rdma_addrinfo* hints, rdma_addrinfo** res) = 0;
  // rdma_freeaddrinfo(res).
  virtual void RdmaFreeaddrinfo(rdma_addrinfo* res) = 0;

  // rdma_create_event_channel(). Its fd is pollable: readable while an event waits.
  virtual int RdmaCreateEventChannel(rdma_event_channel** channel) = 0;
  // rdma_destroy_event_channel(channel).
  virtual void RdmaDestroyEventChannel(rdma_event_channel* channel) = 0;

  // rdma_create_id(channel, &id, context, ps). channel NULL: the id works synchronously.
  virtual int RdmaCreateId(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                           rdma_port_space ps) = 0;
  // rdma_destroy_id(id). An id with its QP still on it goes and leaves the QP, for IbvDestroyQp
  // (as rdma-core). Errors: EBUSY (events of the id not yet acknowledged).
  virtual int RdmaDestroyId(rdma_cm_id* id) = 0;
  // rdma_migrate_id(id, channel): later events of id arrive on channel.
  virtual int RdmaMigrateId(rdma_cm_id* id, rdma_event_channel* channel) = 0;

  // rdma_bind_addr(id, addr): binds id (and so id->verbs) to the device owning addr.
  // Errors: EADDRNOTAVAIL, EADDRINUSE, EINVAL.
  virtual int RdmaBindAddr(rdma_cm_id* id, sockaddr* addr) = 0;
  // rdma_resolve_addr(id, src_addr, dst_addr, timeout_ms): sets id->verbs to the device that
  // reaches dst_addr. Errors: EADDRNOTAVAIL, EHOSTUNREACH, ETIMEDOUT.
  virtual int RdmaResolveAddr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr,
                              int timeout_ms) = 0;
  // rdma_resolve_route(id, timeout_ms). Errors: EINVAL (address not resolved), ETIMEDOUT.
  virtual int RdmaResolveRoute(rdma_cm_id* id, int timeout_ms) = 0;
  // rdma_listen(id, backlog): connection requests to the bound address arrive as
  // RDMA_CM_EVENT_CONNECT_REQUEST events, each with a new id. Errors: EADDRINUSE, EINVAL.
  virtual int RdmaListen(rdma_cm_id* id, int backlog) = 0;

  // rdma_create_qp_ex(id, attr): an RC QP bound to id (id->qp), on attr->pd (comp_mask has
  // IBV_QP_INIT_ATTR_PD; without it, or with a NULL pd, the id's device's PD, as rdma-core);
  // a NULL send_cq / recv_cq is a CQ made for the QP (cap.max_send_wr / max_recv_wr entries,
  // on a completion channel of its own) and destroyed with it by RdmaDestroyQp. With
  // IBV_QP_INIT_ATTR_SEND_OPS_FLAGS it is an extended QP (IbvQpToQpEx). Writes the granted
  // capabilities back into attr->cap.
  // Errors: EINVAL (a PD of another device, a queue of 0 WRs without a CQ, ...), ENOMEM,
  // EOPNOTSUPP (send_ops_flags the device does not support).
  virtual int RdmaCreateQpEx(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) = 0;
  // rdma_destroy_qp(id): the QP, and the CQs RdmaCreateQpEx made for it.
  virtual void RdmaDestroyQp(rdma_cm_id* id) = 0;

  // rdma_connect(id, param) (active side): the outcome arrives on id's channel as
  // ESTABLISHED, REJECTED, UNREACHABLE or CONNECT_ERROR. Errors: EINVAL (route not resolved,
  // private data too long).
  virtual int RdmaConnect(rdma_cm_id* id, rdma_conn_param* param) = 0;
  // rdma_accept(id, param) (passive side, id from a CONNECT_REQUEST). Errors: EINVAL.
  virtual int RdmaAccept(rdma_cm_id* id, rdma_conn_param* param) = 0;
  // rdma_reject(id, private_data, private_data_len). Errors: EINVAL.
  virtual int RdmaReject(rdma_cm_id* id, const void* private_data,
                         uint8_t private_data_len) = 0;
  // rdma_disconnect(id): id's QP goes to the error state (its outstanding WRs flush) and, on a
  // connected id, IB's DREQ goes out: the peer gets RDMA_CM_EVENT_DISCONNECTED (its QP left as
  // it is), id gets its own when the peer disconnects too (the DREP) or the DREQ times out;
  // both get RDMA_CM_EVENT_TIMEWAIT_EXIT later. Errors: EINVAL (never took part in a
  // connection).
  virtual int RdmaDisconnect(rdma_cm_id* id) = 0;

  // rdma_get_cm_event(channel, &event): blocks until an event is there, unless the channel's
  // fd is O_NONBLOCK (then EAGAIN). Each event must be released with RdmaAckCmEvent.
  virtual int RdmaGetCmEvent(rdma_event_channel* channel, rdma_cm_event** event) = 0;
  // rdma_ack_cm_event(event): frees event (and the private data it points to).
  virtual int RdmaAckCmEvent(rdma_cm_event* event) = 0;
};

}  // namespace softrpma

#endif  // SOFTRPMA_SIMVERBS_BACKEND_H_
