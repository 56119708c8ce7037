// ops.cc: the data path: RDMA read and write (rpma_read(3), rpma_write(3),
// rpma_write_with_imm(3)), messaging (rpma_send(3), rpma_send_with_imm(3), rpma_recv(3)), and
// the operations not implemented yet (rpma_atomic_write(3), rpma_flush(3)).
//
// Each call checks its arguments as its man page says, builds one work request with at most one
// SGE and posts it; nothing here allocates or takes a lock. Thread-safe as ibv_post_send(3) is.

#include <arpa/inet.h>

#include <cstring>

#include "api/internal/conn.h"
#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/mr.h"
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

// Posts one send-queue work request. Returns 0 or RPMA_E_PROVIDER (logged).
int PostSend(rpma_conn* conn, ibv_wr_opcode opcode, const rpma_mr_local* local,
             size_t local_offset, const rpma_mr_remote* remote, size_t remote_offset, size_t len,
             int flags, const void* op_context, uint32_t imm_host_order) {
  ibv_sge sge = {};
  ibv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = reinterpret_cast<uint64_t>(op_context);
  wr.opcode = opcode;
  if (local != nullptr) {
    sge = MrLocalSge(local, local_offset, len);
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
  wr.send_flags = (flags & kCompletionOnSuccess) ? IBV_SEND_SIGNALED : 0;
  ibv_send_wr* bad_wr = nullptr;
  int err = ConnBackend(conn)->IbvPostSend(ConnQp(conn), &wr, &bad_wr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_post_send");
    return RpmaErrorFromBackend(err);
  }
  return 0;
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
  if (conn == nullptr || flags == 0) return RPMA_E_INVAL;
  if (!softrpma::api::ValidRegionPair(dst, src, dst_offset, src_offset, len)) {
    return RPMA_E_INVAL;
  }
  return softrpma::api::PostSend(conn, IBV_WR_RDMA_READ, dst, dst_offset, src, src_offset, len,
                                 flags, op_context, 0);
}

int rpma_write(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
               const struct rpma_mr_local* src, size_t src_offset, size_t len, int flags,
               const void* op_context) {
  return softrpma::api::Write(conn, dst, dst_offset, src, src_offset, len, flags, op_context,
                              IBV_WR_RDMA_WRITE, 0);
}

int rpma_write_with_imm(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
                        const struct rpma_mr_local* src, size_t src_offset, size_t len,
                        int flags, uint32_t imm, const void* op_context) {
  return softrpma::api::Write(conn, dst, dst_offset, src, src_offset, len, flags, op_context,
                              IBV_WR_RDMA_WRITE_WITH_IMM, imm);
}

int rpma_send(struct rpma_conn* conn, const struct rpma_mr_local* src, size_t offset, size_t len,
              int flags, const void* op_context) {
  return softrpma::api::Send(conn, src, offset, len, flags, op_context, IBV_WR_SEND, 0);
}

int rpma_send_with_imm(struct rpma_conn* conn, const struct rpma_mr_local* src, size_t offset,
                       size_t len, int flags, uint32_t imm, const void* op_context) {
  return softrpma::api::Send(conn, src, offset, len, flags, op_context, IBV_WR_SEND_WITH_IMM,
                             imm);
}

int rpma_recv(struct rpma_conn* conn, struct rpma_mr_local* dst, size_t offset, size_t len,
              const void* op_context) {
  if (conn == nullptr) return RPMA_E_INVAL;
  if (dst == nullptr && (offset != 0 || len != 0)) return RPMA_E_INVAL;
  ibv_sge sge = {};
  ibv_recv_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = reinterpret_cast<uint64_t>(op_context);
  if (dst != nullptr) {
    sge = softrpma::api::MrLocalSge(dst, offset, len);
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  ibv_recv_wr* bad_wr = nullptr;
  softrpma::Backend* backend = softrpma::api::ConnBackend(conn);
  int err = backend->IbvPostRecv(softrpma::api::ConnQp(conn), &wr, &bad_wr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_post_recv");
    return softrpma::api::RpmaErrorFromBackend(err);
  }
  return 0;
}

int rpma_atomic_write(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
                      const char src[8], int flags, const void* op_context) {
  RPMA_LOG_NOT_IMPLEMENTED();
  return RPMA_E_NOSUPP;
}

int rpma_flush(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset, size_t len,
               enum rpma_flush_type type, int flags, const void* op_context) {
  RPMA_LOG_NOT_IMPLEMENTED();
  return RPMA_E_NOSUPP;
}

}  // extern "C"
