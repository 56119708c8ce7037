#include "simverbs/sim/nic/inline_verbs.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "simverbs/sim/nic/qp.h"

namespace softrpma::sim {
namespace {

// The started backend, for the entries below.
std::atomic<Backend*> g_backend{nullptr};

// ibv_context_ops entries: the conventions of the inline verbs, on top of the backend's.
int OpPollCq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  int polled = 0;
  const int err =
      g_backend.load(std::memory_order_acquire)->IbvPollCq(cq, num_entries, wc, &polled);
  return err == 0 ? polled : (err > 0 ? -err : -1);
}
int OpReqNotifyCq(ibv_cq* cq, int solicited_only) {
  return g_backend.load(std::memory_order_acquire)->IbvReqNotifyCq(cq, solicited_only);
}
int OpPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  return g_backend.load(std::memory_order_acquire)->IbvPostSend(qp, wr, bad_wr);
}
int OpPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return g_backend.load(std::memory_order_acquire)->IbvPostRecv(qp, wr, bad_wr);
}
int OpPostSrqRecv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return g_backend.load(std::memory_order_acquire)->IbvPostSrqRecv(srq, wr, bad_wr);
}

// ibv_qp_ex entries of an extended QP (the inline ibv_wr_* verbs). The batch's post goes
// through the backend (its fault point, ibv_wr_complete); the builders and setters, which a
// provider runs without a syscall or a check, go to the QP directly. Every entry is set: one
// the simulator does not model fails the batch where a provider's NULL would crash.
void OpWrStart(ibv_qp_ex* qpx) { g_backend.load(std::memory_order_acquire)->IbvWrStart(qpx); }
int OpWrComplete(ibv_qp_ex* qpx) {
  return g_backend.load(std::memory_order_acquire)->IbvWrComplete(qpx);
}
void OpWrAbort(ibv_qp_ex* qpx) { WrAbort(to_sim(qpx)); }
void OpWrAtomicWrite(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr, const void* atomic_wr) {
  g_backend.load(std::memory_order_acquire)->IbvWrAtomicWrite(qpx, rkey, remote_addr, atomic_wr);
}
void OpWrRdmaWrite(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr) {
  WrBuild(to_sim(qpx), IBV_WR_RDMA_WRITE, rkey, remote_addr);
}
void OpWrRdmaWriteImm(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr, __be32 imm_data) {
  WrBuild(to_sim(qpx), IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr, imm_data);
}
void OpWrSend(ibv_qp_ex* qpx) { WrBuild(to_sim(qpx), IBV_WR_SEND, 0, 0); }
void OpWrSendImm(ibv_qp_ex* qpx, __be32 imm_data) {
  WrBuild(to_sim(qpx), IBV_WR_SEND_WITH_IMM, 0, 0, imm_data);
}
void OpWrRdmaRead(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr) {
  WrBuild(to_sim(qpx), IBV_WR_RDMA_READ, rkey, remote_addr);
}
void OpWrSetSge(ibv_qp_ex* qpx, uint32_t lkey, uint64_t addr, uint32_t length) {
  const ibv_sge sge = {addr, length, lkey};
  WrSetSgeList(to_sim(qpx), 1, &sge);
}
void OpWrSetSgeList(ibv_qp_ex* qpx, size_t num_sge, const ibv_sge* sg_list) {
  WrSetSgeList(to_sim(qpx), num_sge, sg_list);
}
void OpWrSetInlineData(ibv_qp_ex* qpx, void* addr, size_t length) {
  const ibv_data_buf buf = {addr, length};
  WrSetInlineDataList(to_sim(qpx), 1, &buf);
}
void OpWrSetInlineDataList(ibv_qp_ex* qpx, size_t num_buf, const ibv_data_buf* buf_list) {
  WrSetInlineDataList(to_sim(qpx), num_buf, buf_list);
}
void OpWrAtomicCmpSwp(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
                      uint64_t swap) {
  WrFetchingAtomic(to_sim(qpx), IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr, compare, swap);
}
void OpWrAtomicFetchAdd(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
  WrFetchingAtomic(to_sim(qpx), IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add, 0);
}
// Not modelled (memory windows, invalidation, TSO, UD, XRC).
void OpWrBindMw(ibv_qp_ex* qpx, ibv_mw*, uint32_t, const ibv_mw_bind_info*) {
  WrUnsupported(to_sim(qpx));
}
void OpWrLocalInv(ibv_qp_ex* qpx, uint32_t) { WrUnsupported(to_sim(qpx)); }
void OpWrSendInv(ibv_qp_ex* qpx, uint32_t) { WrUnsupported(to_sim(qpx)); }
void OpWrSendTso(ibv_qp_ex* qpx, void*, uint16_t, uint16_t) { WrUnsupported(to_sim(qpx)); }
void OpWrSetUdAddr(ibv_qp_ex* qpx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  WrSetUdAddr(to_sim(qpx), ah, remote_qpn, remote_qkey);
}
void OpWrSetXrcSrqn(ibv_qp_ex* qpx, uint32_t) { WrUnsupported(to_sim(qpx)); }

}  // namespace

void SetInlineVerbsBackend(Backend* backend) {
  g_backend.store(backend, std::memory_order_release);
}

void InstallContextOps(ibv_context_ops* ops) {
  ops->poll_cq = &OpPollCq;
  ops->req_notify_cq = &OpReqNotifyCq;
  ops->post_send = &OpPostSend;
  ops->post_recv = &OpPostRecv;
  ops->post_srq_recv = &OpPostSrqRecv;
}

void InstallQpExOps(ibv_qp_ex* qpx) {
  qpx->wr_start = &OpWrStart;
  qpx->wr_complete = &OpWrComplete;
  qpx->wr_abort = &OpWrAbort;
  qpx->wr_atomic_write = &OpWrAtomicWrite;
  qpx->wr_rdma_write = &OpWrRdmaWrite;
  qpx->wr_rdma_write_imm = &OpWrRdmaWriteImm;
  qpx->wr_send = &OpWrSend;
  qpx->wr_send_imm = &OpWrSendImm;
  qpx->wr_rdma_read = &OpWrRdmaRead;
  qpx->wr_atomic_cmp_swp = &OpWrAtomicCmpSwp;
  qpx->wr_atomic_fetch_add = &OpWrAtomicFetchAdd;
  qpx->wr_set_sge = &OpWrSetSge;
  qpx->wr_set_sge_list = &OpWrSetSgeList;
  qpx->wr_set_inline_data = &OpWrSetInlineData;
  qpx->wr_set_inline_data_list = &OpWrSetInlineDataList;
  qpx->wr_bind_mw = &OpWrBindMw;
  qpx->wr_local_inv = &OpWrLocalInv;
  qpx->wr_send_inv = &OpWrSendInv;
  qpx->wr_send_tso = &OpWrSendTso;
  qpx->wr_set_ud_addr = &OpWrSetUdAddr;
  qpx->wr_set_xrc_srqn = &OpWrSetXrcSrqn;
}

}  // namespace softrpma::sim
