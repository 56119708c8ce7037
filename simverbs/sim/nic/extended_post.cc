// extended_post.cc: the extended post API (ibv_wr_start ... ibv_wr_complete): a batch built
// WR by WR under the QP's ex_mu, then posted whole or not at all by post.cc.

#include "simverbs/sim/nic/qp.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include "simverbs/sim/nic/nic_internal.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

void WrStart(SimQp* qp) {
  qp->ex_mu.Lock();
  qp->ex_batch.clear();
  qp->ex_sge_pool.clear();
  qp->ex_inline_pool.clear();
  qp->ex_error = 0;
}

namespace {

// The first error of a batch is the one ibv_wr_complete reports.
void FailBatch(SimQp* qp, int err) {
  if (qp->ex_error == 0) qp->ex_error = err;
}

// The WR the setters give memory to: the last one built (nullptr, and the batch fails, when
// none is).
ExtendedWr* LastBuilt(SimQp* qp) {
  if (qp->ex_batch.empty()) {
    FailBatch(qp, EINVAL);
    return nullptr;
  }
  return &qp->ex_batch.back();
}

}  // namespace

void WrBuild(SimQp* qp, ibv_wr_opcode opcode, uint32_t rkey, uint64_t remote_addr,
             uint32_t imm_data) {
  // As mlx5 and rxe, an extended QP has the builder of every op the device has, not only of
  // those its send_ops_flags named.
  // (The extended post API has a builder for each row of the opcode table, opcodes.h.)
  const Opcode* op = FindOpcode(opcode);
  if (op == nullptr || (ModelledSendOps() & op->send_ops_flag) == 0) {
    FailBatch(qp, EINVAL);
    return;
  }
  // A UD QP has the send builders only (mlx5's fill_wr_builders_ud, rxe's UD ops).
  if (qp->qp.qp_type == IBV_QPT_UD && opcode != IBV_WR_SEND && opcode != IBV_WR_SEND_WITH_IMM) {
    FailBatch(qp, EINVAL);
    return;
  }
  if (qp->ex_batch.size() >= qp->cap.max_send_wr) {
    FailBatch(qp, ENOMEM);
    return;
  }
  ExtendedWr wr;
  wr.wr_id = qp->qp_ex.wr_id;
  wr.wr_flags = qp->qp_ex.wr_flags;
  wr.opcode = opcode;
  wr.rkey = rkey;
  wr.remote_addr = remote_addr;
  wr.imm_data = imm_data;
  qp->ex_batch.push_back(wr);
}

void WrAtomicWrite(SimQp* qp, uint32_t rkey, uint64_t remote_addr, const void* atomic_wr) {
  if (atomic_wr == nullptr) {
    FailBatch(qp, EINVAL);
    return;
  }
  const size_t built = qp->ex_batch.size();
  WrBuild(qp, IBV_WR_ATOMIC_WRITE, rkey, remote_addr);
  if (qp->ex_batch.size() == built) return;  // refused
  const ibv_data_buf value = {const_cast<void*>(atomic_wr), sizeof(uint64_t)};
  WrSetInlineDataList(qp, 1, &value);  // its 8 bytes travel in the WQE
}

void WrFetchingAtomic(SimQp* qp, ibv_wr_opcode opcode, uint32_t rkey, uint64_t remote_addr,
                      uint64_t compare_add, uint64_t swap) {
  const size_t built = qp->ex_batch.size();
  WrBuild(qp, opcode, rkey, remote_addr);
  if (qp->ex_batch.size() == built) return;  // refused
  qp->ex_batch.back().compare_add = compare_add;
  qp->ex_batch.back().swap = swap;
}

void WrSetSgeList(SimQp* qp, size_t num_sge, const ibv_sge* sg_list) {
  ExtendedWr* wr = LastBuilt(qp);
  if (wr == nullptr) return;
  if (wr->opcode == IBV_WR_ATOMIC_WRITE || (num_sge > 0 && sg_list == nullptr)) {
    FailBatch(qp, EINVAL);
    return;
  }
  if (num_sge > qp->cap.max_send_sge) {
    FailBatch(qp, ActiveProfile().wr_setter_limit_errno);
    return;
  }
  wr->is_inline = false;
  wr->first_sge = qp->ex_sge_pool.size();
  wr->num_sge = static_cast<int>(num_sge);
  qp->ex_sge_pool.insert(qp->ex_sge_pool.end(), sg_list, sg_list + num_sge);
}

void WrSetInlineDataList(SimQp* qp, size_t num_buf, const ibv_data_buf* buf_list) {
  ExtendedWr* wr = LastBuilt(qp);
  if (wr == nullptr) return;
  if (num_buf > 0 && buf_list == nullptr) {
    FailBatch(qp, EINVAL);
    return;
  }
  size_t total = 0;
  for (size_t i = 0; i < num_buf; ++i) total += buf_list[i].length;
  // (The atomic write's 8 bytes do not count against max_inline_data; ibv_post_send checks
  // the rest when the batch is posted.)
  if (wr->opcode != IBV_WR_ATOMIC_WRITE && total > qp->cap.max_inline_data) {
    FailBatch(qp, ActiveProfile().wr_setter_limit_errno);
    return;
  }
  wr->is_inline = true;
  wr->num_sge = 0;
  wr->first_inline = qp->ex_inline_pool.size();
  wr->inline_length = total;
  for (size_t i = 0; i < num_buf; ++i) {
    const auto* bytes = static_cast<const uint8_t*>(buf_list[i].addr);
    qp->ex_inline_pool.insert(qp->ex_inline_pool.end(), bytes, bytes + buf_list[i].length);
  }
}

void WrSetUdAddr(SimQp* qp, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  if (qp->qp.qp_type != IBV_QPT_UD) {
    FailBatch(qp, EINVAL);
    return;
  }
  ExtendedWr* wr = LastBuilt(qp);
  if (wr == nullptr) return;
  wr->ah = ah;
  wr->remote_qpn = remote_qpn;
  wr->remote_qkey = remote_qkey;
}

void WrUnsupported(SimQp* qp) { FailBatch(qp, EINVAL); }

namespace {

// The batch's WR `built` as ibv_post_send takes it; `inline_sge` is its one SGE when it is
// inline.
void ToSendWr(SimQp* qp, const ExtendedWr& built, ibv_sge* inline_sge, ibv_send_wr* wr) {
  std::memset(wr, 0, sizeof(*wr));
  wr->wr_id = built.wr_id;
  wr->opcode = built.opcode;
  // Inline is what the setter chose: IBV_SEND_INLINE in wr_flags means nothing here (mlx5).
  wr->send_flags = built.wr_flags & ~static_cast<unsigned int>(IBV_SEND_INLINE);
  wr->imm_data = built.imm_data;
  if (built.is_inline) {
    inline_sge->addr = reinterpret_cast<uint64_t>(qp->ex_inline_pool.data() + built.first_inline);
    inline_sge->length = static_cast<uint32_t>(built.inline_length);
    inline_sge->lkey = 0;
    wr->sg_list = inline_sge;
    wr->num_sge = built.inline_length > 0 ? 1 : 0;
    wr->send_flags |= IBV_SEND_INLINE;
  } else {
    wr->sg_list = built.num_sge > 0 ? qp->ex_sge_pool.data() + built.first_sge : nullptr;
    wr->num_sge = built.num_sge;
  }
  if (qp->qp.qp_type == IBV_QPT_UD) {
    wr->wr.ud.ah = built.ah;
    wr->wr.ud.remote_qpn = built.remote_qpn;
    wr->wr.ud.remote_qkey = built.remote_qkey;
  } else if (FetchesAtomically(RowOf(built.opcode))) {
    wr->wr.atomic.remote_addr = built.remote_addr;
    wr->wr.atomic.rkey = built.rkey;
    wr->wr.atomic.compare_add = built.compare_add;
    wr->wr.atomic.swap = built.swap;
  } else {
    wr->wr.rdma.remote_addr = built.remote_addr;
    wr->wr.rdma.rkey = built.rkey;
  }
}

}  // namespace

int WrComplete(SimQp* qp, const WrFault& fault) {
  int err = qp->ex_error;
  if (err == 0 && !qp->ex_batch.empty()) {
    std::vector<ibv_sge>& sges = qp->ex_sges;
    std::vector<ibv_send_wr>& wrs = qp->ex_wrs;
    sges.resize(qp->ex_batch.size());
    wrs.resize(qp->ex_batch.size());
    for (size_t i = 0; i < qp->ex_batch.size(); ++i) {
      ToSendWr(qp, qp->ex_batch[i], &sges[i], &wrs[i]);
      wrs[i].next = i + 1 < wrs.size() ? &wrs[i + 1] : nullptr;
    }
    ibv_send_wr* bad_wr = nullptr;
    err = PostSendWrs(qp, wrs.data(), &bad_wr, fault, /*extended=*/true);
  }
  qp->ex_batch.clear();
  qp->ex_sge_pool.clear();
  qp->ex_inline_pool.clear();
  qp->ex_error = 0;
  qp->ex_mu.Unlock();
  return err;
}

void WrAbort(SimQp* qp) {
  qp->ex_batch.clear();
  qp->ex_sge_pool.clear();
  qp->ex_inline_pool.clear();
  qp->ex_error = 0;
  qp->ex_mu.Unlock();
}

}  // namespace softrpma::sim
