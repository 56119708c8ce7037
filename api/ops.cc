// ops.cc: the data path: RDMA read and write (rpma_read(3), rpma_write(3),
// rpma_write_with_imm(3)), the 8-byte atomic write (rpma_atomic_write(3)), flush
// (rpma_flush(3)) and messaging (rpma_send(3), rpma_send_with_imm(3), rpma_recv(3)).
//
// Each call checks its arguments as its man page says, builds one work request with at most one
// SGE and posts it; nothing here allocates or takes a lock. Thread-safe as ibv_post_send(3) is.
//
// How the two operations verbs does not spell directly travel through the Backend:
//   * rpma_atomic_write, as librpma: where the device has native atomic write (found at
//     rpma_peer_new), ibv_wr_atomic_write(3) through the extended post API of the connection's
//     QP (made with IBV_QP_EX_WITH_ATOMIC_WRITE), completing with IBV_WC_ATOMIC_WRITE; else an
//     8-byte RDMA WRITE with IBV_SEND_INLINE | IBV_SEND_FENCE (the QP takes 8 bytes inline),
//     completing with IBV_WC_RDMA_WRITE: the fence holds it behind earlier RDMA READs (an
//     emulated flush), and 8 aligned bytes land as one write. Either way the provider copies
//     the 8 bytes when posting, so src may be reused as soon as the call returns.
//   * rpma_flush: the installed verbs.h has no IBV_WR_FLUSH, so a flush is, as in librpma
//     without native flush support, an RDMA READ of 8 bytes at dst + dst_offset into the
//     connection's flush scratch (internal/mr.h), whatever len and the region's size are (a
//     read past the region's end completes with an error, as on upstream). On an RC QP the READ completes only after
//     every earlier write of the QP is applied at the responder, and a READ that really reads
//     memory also pushes those writes out of the responder's PCIe path (a zero-length READ
//     would not, on real hardware). The completion's opcode is IBV_WC_RDMA_READ.

#include <arpa/inet.h>

#include <cstring>

#include "api/internal/conn.h"
#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/mr.h"
#include "api/internal/traced_call.h"
#include "librpma.h"
#include "simverbs/backend.h"

namespace softrpma::api {
namespace {

// The flag bit that asks for a completion on success too (RPMA_F_COMPLETION_ALWAYS has it,
// RPMA_F_COMPLETION_ON_ERROR does not).
constexpr int kCompletionOnSuccess = RPMA_F_COMPLETION_ALWAYS & ~RPMA_F_COMPLETION_ON_ERROR;

// The argument rule shared by rpma_read / rpma_write(_with_imm): either both regions are given,
// or neither and every offset and the length are 0 (a 0-byte operation).
bool ValidRegionPair(const void* local, const void* remote, size_t local_offset,
                     size_t remote_offset, size_t len) {
  if (local != nullptr && remote != nullptr) return true;
  return local == nullptr && remote == nullptr && local_offset == 0 && remote_offset == 0 &&
         len == 0;
}

// The send flags for rpma `flags`: signaled when a completion on success is asked for.
unsigned int SignaledIf(int flags) {
  return (flags & kCompletionOnSuccess) ? IBV_SEND_SIGNALED : 0;
}

// Posts `wr` on the connection's QP. Returns 0 or RPMA_E_PROVIDER (logged).
int Post(rpma_conn* conn, ibv_send_wr* wr) {
  ibv_send_wr* bad_wr = nullptr;
  int err = ConnBackend(conn)->IbvPostSend(ConnQp(conn), wr, &bad_wr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_post_send");
    return RpmaErrorFromBackend(err);
  }
  return 0;
}

// Posts one native atomic write through the extended post API of conn's QP
// (ibv_qp_to_qp_ex, ibv_wr_start, ibv_wr_atomic_write, ibv_wr_complete). Returns 0 or
// RPMA_E_PROVIDER (logged).
int PostAtomicWriteEx(rpma_conn* conn, uint32_t rkey, uint64_t remote_addr, const char src[8],
                      int flags, const void* op_context) {
  Backend* backend = ConnBackend(conn);
  ibv_qp_ex* qpx = nullptr;
  int err = backend->IbvQpToQpEx(ConnQp(conn), &qpx);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_qp_to_qp_ex");
    return RpmaErrorFromBackend(err);
  }
  backend->IbvWrStart(qpx);
  qpx->wr_id = reinterpret_cast<uint64_t>(op_context);
  qpx->wr_flags = SignaledIf(flags);
  backend->IbvWrAtomicWrite(qpx, rkey, remote_addr, src);
  err = backend->IbvWrComplete(qpx);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_wr_complete");
    return RpmaErrorFromBackend(err);
  }
  return 0;
}

// Posts one send-queue work request. Returns 0, RPMA_E_INVAL (len does not fit an SGE) or
// RPMA_E_PROVIDER (logged).
int PostSend(rpma_conn* conn, ibv_wr_opcode opcode, const rpma_mr_local* local,
             size_t local_offset, const rpma_mr_remote* remote, size_t remote_offset, size_t len,
             int flags, const void* op_context, uint32_t imm_host_order) {
  ibv_sge sge = {};
  ibv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = reinterpret_cast<uint64_t>(op_context);
  wr.opcode = opcode;
  if (local != nullptr) {
    int ret = MrLocalSge(local, local_offset, len, &sge);
    if (ret != 0) return ret;
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  if (remote != nullptr) {
    wr.wr.rdma.remote_addr = MrRemoteAddress(remote, remote_offset);
    wr.wr.rdma.rkey = MrRemoteRkey(remote);
  }
  if (opcode == IBV_WR_RDMA_WRITE_WITH_IMM || opcode == IBV_WR_SEND_WITH_IMM) {
    wr.imm_data = htonl(imm_host_order);
  }
  wr.send_flags = SignaledIf(flags);
  return Post(conn, &wr);
}

int Write(rpma_conn* conn, rpma_mr_remote* dst, size_t dst_offset, const rpma_mr_local* src,
          size_t src_offset, size_t len, int flags, const void* op_context, ibv_wr_opcode opcode,
          uint32_t imm) {
  if (conn == nullptr || flags == 0) return RPMA_E_INVAL;
  if (!ValidRegionPair(src, dst, src_offset, dst_offset, len)) return RPMA_E_INVAL;
  return PostSend(conn, opcode, src, src_offset, dst, dst_offset, len, flags, op_context, imm);
}

int Send(rpma_conn* conn, const rpma_mr_local* src, size_t offset, size_t len, int flags,
         const void* op_context, ibv_wr_opcode opcode, uint32_t imm) {
  if (conn == nullptr || flags == 0) return RPMA_E_INVAL;
  if (src == nullptr && (offset != 0 || len != 0)) return RPMA_E_INVAL;
  return PostSend(conn, opcode, src, offset, nullptr, 0, len, flags, op_context, imm);
}

}  // namespace
}  // namespace softrpma::api

extern "C" {

int rpma_read(struct rpma_conn* conn, struct rpma_mr_local* dst, size_t dst_offset,
              const struct rpma_mr_remote* src, size_t src_offset, size_t len, int flags,
              const void* op_context) {
  softrpma::api::TracedCall call(
      "rpma_read", "qp=%u dst_offset=%zu src_offset=%zu len=%zu flags=0x%x op_context=%p",
      softrpma::api::ConnQpNum(conn), dst_offset, src_offset, len, flags, op_context);
  if (conn == nullptr || flags == 0) return call.Return(RPMA_E_INVAL);
  if (!softrpma::api::ValidRegionPair(dst, src, dst_offset, src_offset, len)) {
    return call.Return(RPMA_E_INVAL);
  }
  return call.Return(softrpma::api::PostSend(conn, IBV_WR_RDMA_READ, dst, dst_offset, src,
                                             src_offset, len, flags, op_context, 0));
}

int rpma_write(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
               const struct rpma_mr_local* src, size_t src_offset, size_t len, int flags,
               const void* op_context) {
  softrpma::api::TracedCall call(
      "rpma_write", "qp=%u dst_offset=%zu src_offset=%zu len=%zu flags=0x%x op_context=%p",
      softrpma::api::ConnQpNum(conn), dst_offset, src_offset, len, flags, op_context);
  return call.Return(softrpma::api::Write(conn, dst, dst_offset, src, src_offset, len, flags,
                                          op_context, IBV_WR_RDMA_WRITE, 0));
}

int rpma_write_with_imm(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
                        const struct rpma_mr_local* src, size_t src_offset, size_t len,
                        int flags, uint32_t imm, const void* op_context) {
  softrpma::api::TracedCall call(
      "rpma_write_with_imm",
      "qp=%u dst_offset=%zu src_offset=%zu len=%zu flags=0x%x imm=0x%x op_context=%p",
      softrpma::api::ConnQpNum(conn), dst_offset, src_offset, len, flags, imm, op_context);
  return call.Return(softrpma::api::Write(conn, dst, dst_offset, src, src_offset, len, flags,
                                          op_context, IBV_WR_RDMA_WRITE_WITH_IMM, imm));
}

int rpma_send(struct rpma_conn* conn, const struct rpma_mr_local* src, size_t offset, size_t len,
              int flags, const void* op_context) {
  softrpma::api::TracedCall call("rpma_send", "qp=%u offset=%zu len=%zu flags=0x%x op_context=%p",
                                 softrpma::api::ConnQpNum(conn), offset, len, flags, op_context);
  return call.Return(
      softrpma::api::Send(conn, src, offset, len, flags, op_context, IBV_WR_SEND, 0));
}

int rpma_send_with_imm(struct rpma_conn* conn, const struct rpma_mr_local* src, size_t offset,
                       size_t len, int flags, uint32_t imm, const void* op_context) {
  softrpma::api::TracedCall call(
      "rpma_send_with_imm", "qp=%u offset=%zu len=%zu flags=0x%x imm=0x%x op_context=%p",
      softrpma::api::ConnQpNum(conn), offset, len, flags, imm, op_context);
  return call.Return(
      softrpma::api::Send(conn, src, offset, len, flags, op_context, IBV_WR_SEND_WITH_IMM, imm));
}

int rpma_recv(struct rpma_conn* conn, struct rpma_mr_local* dst, size_t offset, size_t len,
              const void* op_context) {
  softrpma::api::TracedCall call("rpma_recv", "qp=%u offset=%zu len=%zu op_context=%p",
                                 softrpma::api::ConnQpNum(conn), offset, len, op_context);
  if (conn == nullptr) return call.Return(RPMA_E_INVAL);
  if (dst == nullptr && (offset != 0 || len != 0)) return call.Return(RPMA_E_INVAL);
  ibv_sge sge = {};
  ibv_recv_wr wr;
  int ret = softrpma::api::MrRecvWr(dst, offset, len, op_context, &sge, &wr);
  if (ret != 0) return call.Return(ret);
  ibv_recv_wr* bad_wr = nullptr;
  softrpma::Backend* backend = softrpma::api::ConnBackend(conn);
  int err = backend->IbvPostRecv(softrpma::api::ConnQp(conn), &wr, &bad_wr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_post_recv");
    return call.Return(softrpma::api::RpmaErrorFromBackend(err));
  }
  return call.Return(0);
}

int rpma_atomic_write(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
                      const char src[8], int flags, const void* op_context) {
  softrpma::api::TracedCall call("rpma_atomic_write",
                                 "qp=%u dst_offset=%zu flags=0x%x op_context=%p",
                                 softrpma::api::ConnQpNum(conn), dst_offset, flags, op_context);
  if (conn == nullptr || dst == nullptr || src == nullptr || flags == 0) {
    return call.Return(RPMA_E_INVAL);
  }
  if (dst_offset % RPMA_ATOMIC_WRITE_ALIGNMENT != 0) {
    RPMA_LOG_ERROR("dst_offset %zu is not aligned to %d bytes", dst_offset,
                   RPMA_ATOMIC_WRITE_ALIGNMENT);
    return call.Return(RPMA_E_INVAL);
  }
  const uint64_t remote_addr = softrpma::api::MrRemoteAddress(dst, dst_offset);
  const uint32_t rkey = softrpma::api::MrRemoteRkey(dst);
  if (softrpma::api::ConnNativeAtomicWrite(conn)) {
    return call.Return(
        softrpma::api::PostAtomicWriteEx(conn, rkey, remote_addr, src, flags, op_context));
  }
  ibv_sge sge;
  sge.addr = reinterpret_cast<uint64_t>(src);
  sge.length = RPMA_ATOMIC_WRITE_ALIGNMENT;
  sge.lkey = 0;  // inline: the provider copies the bytes, no registration needed
  ibv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = reinterpret_cast<uint64_t>(op_context);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  wr.send_flags = IBV_SEND_INLINE | IBV_SEND_FENCE | softrpma::api::SignaledIf(flags);
  return call.Return(softrpma::api::Post(conn, &wr));
}

int rpma_flush(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset, size_t len,
               enum rpma_flush_type type, int flags, const void* op_context) {
  softrpma::api::TracedCall call(
      "rpma_flush", "qp=%u dst_offset=%zu len=%zu type=%d flags=0x%x op_context=%p",
      softrpma::api::ConnQpNum(conn), dst_offset, len, static_cast<int>(type), flags, op_context);
  using softrpma::api::kFlushScratchSize;
  // The checks and their order are librpma's (conn.c): arguments, then the connection's and
  // the region's support of the type asked for. A type that is neither PERSISTENT nor
  // VISIBILITY is documented as RPMA_E_INVAL but accepted by librpma (it flushes as the others
  // do), so it is accepted here too (docs/STATUS.md).
  if (conn == nullptr || dst == nullptr || flags == 0) return call.Return(RPMA_E_INVAL);
  int usage_needed = 0;
  if (type == RPMA_FLUSH_TYPE_PERSISTENT) usage_needed = RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
  if (type == RPMA_FLUSH_TYPE_VISIBILITY) usage_needed = RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
  if (type == RPMA_FLUSH_TYPE_PERSISTENT && !softrpma::api::ConnDirectWriteToPmem(conn)) {
    RPMA_LOG_ERROR("the connection does not support flushing to persistence: the remote peer "
                   "configuration applied to it (rpma_conn_apply_remote_peer_cfg) does not "
                   "declare direct write to PMem");
    return call.Return(RPMA_E_NOSUPP);
  }
  // The flush types the remote region supports (rpma_mr_remote_get_flush_type(3)): flushing
  // it in another way is not supported either (as in librpma).
  if (usage_needed != 0 && (softrpma::api::MrRemoteUsage(dst) & usage_needed) == 0) {
    RPMA_LOG_ERROR("the remote memory region does not support flushing to %s (its usage has "
                   "no RPMA_MR_USAGE_FLUSH_TYPE_%s)",
                   type == RPMA_FLUSH_TYPE_PERSISTENT ? "persistence" : "global visibility",
                   type == RPMA_FLUSH_TYPE_PERSISTENT ? "PERSISTENT" : "VISIBILITY");
    return call.Return(RPMA_E_NOSUPP);
  }
  // Always 8 bytes at dst_offset, as librpma reads (flush.c): not trimmed at the region's end,
  // so a flush of a region's last 7 bytes, or of a region under 8 bytes, completes with a
  // remote access error, as on a real NIC with upstream. An offset past the region is left for
  // the provider to reject the same way, as with rpma_read / rpma_write.
  (void)len;  // the READ orders every earlier write, whatever range they touched
  ibv_sge sge = softrpma::api::FlushScratchSge(softrpma::api::ConnFlushScratch(conn),
                                               static_cast<uint32_t>(kFlushScratchSize));
  ibv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = reinterpret_cast<uint64_t>(op_context);
  wr.opcode = IBV_WR_RDMA_READ;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = softrpma::api::MrRemoteAddress(dst, dst_offset);
  wr.wr.rdma.rkey = softrpma::api::MrRemoteRkey(dst);
  wr.send_flags = softrpma::api::SignaledIf(flags);
  return call.Return(softrpma::api::Post(conn, &wr));
}

}  // extern "C"
