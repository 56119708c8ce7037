// mr.cc: memory regions. rpma_mr_local is a registration of local memory (rpma_mr_reg(3)); its
// descriptor (rpma_mr_get_descriptor(3)) is what the other side turns into an rpma_mr_remote
// (rpma_mr_remote_from_descriptor(3)) to target it with RDMA reads, writes and flushes.
//
// Descriptor layout, 21 bytes, little-endian whatever the host:
//   [0, 8)   remote address (u64)   [8, 16)  size (u64)   [16, 20) rkey (u32)   [20] usage (u8)
//
// Also here: rpma_mr_advise(3), and the flush scratch (internal/mr.h) that rpma_flush(3) reads
// into.
//
// Thread-safe: regions do not change after they are made.

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstring>

#include "api/internal/errors.h"
#include "api/internal/log.h"
#include "api/internal/mr.h"
#include "api/internal/peer.h"
#include "api/internal/traced_call.h"
#include "librpma.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"

namespace {

constexpr size_t kMrDescriptorSize = 8 + 8 + 4 + 1;
constexpr int kAllUsages = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST |
                           RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_WRITE_DST |
                           RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                           RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT | RPMA_MR_USAGE_SEND |
                           RPMA_MR_USAGE_RECV;
constexpr int kFlushUsages =
    RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;

void PutLittleEndian(uint8_t* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t GetLittleEndian(const uint8_t* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

}  // namespace

struct rpma_mr_local {
  softrpma::Backend* backend;
  ibv_mr* mr;
  void* ptr;
  size_t size;
  int usage;
};

struct rpma_mr_remote {
  uint64_t raddr;
  uint64_t size;
  uint32_t rkey;
  int usage;
};

namespace softrpma::api {

int MrLocalSge(const rpma_mr_local* mr, size_t offset, size_t len, ibv_sge* sge) {
  if (len > kMaxSgeLength) {
    RPMA_LOG_ERROR("len %zu does not fit one ibv_sge (at most %zu bytes)", len, kMaxSgeLength);
    return RPMA_E_INVAL;
  }
  sge->addr = reinterpret_cast<uint64_t>(mr->ptr) + offset;
  sge->length = static_cast<uint32_t>(len);
  sge->lkey = mr->mr->lkey;
  return 0;
}

int MrRecvWr(const rpma_mr_local* dst, size_t offset, size_t len, const void* op_context,
             ibv_sge* sge, ibv_recv_wr* wr) {
  std::memset(wr, 0, sizeof(*wr));
  wr->wr_id = reinterpret_cast<uint64_t>(op_context);
  if (dst != nullptr) {
    int ret = MrLocalSge(dst, offset, len, sge);
    if (ret != 0) return ret;
    wr->sg_list = sge;
    wr->num_sge = 1;
  }
  return 0;
}

uint64_t MrRemoteAddress(const rpma_mr_remote* mr, size_t offset) { return mr->raddr + offset; }

uint32_t MrRemoteRkey(const rpma_mr_remote* mr) { return mr->rkey; }

uint64_t MrRemoteSize(const rpma_mr_remote* mr) { return mr->size; }

int MrRemoteUsage(const rpma_mr_remote* mr) { return mr->usage; }

int MrUsageToAccess(int usage, bool iwarp) {
  // The flags librpma gives each usage (peer.c), so that a region registers the same way on
  // both and a provider's access checks see the same flags.
  int access = 0;
  // Being read remotely, or flushed (a flush is carried as an RDMA read).
  if (usage & (RPMA_MR_USAGE_READ_SRC | kFlushUsages)) access |= IBV_ACCESS_REMOTE_READ;
  // The destination of a read is written by the local NIC; on iWARP the read's response
  // arrives as an RDMA write from the other side.
  if (usage & RPMA_MR_USAGE_READ_DST) {
    access |= IBV_ACCESS_LOCAL_WRITE;
    if (iwarp) access |= IBV_ACCESS_REMOTE_WRITE;
  }
  // librpma gives the source of a write local write access too.
  if (usage & RPMA_MR_USAGE_WRITE_SRC) access |= IBV_ACCESS_LOCAL_WRITE;
  // Being written remotely; verbs requires local write access along with remote write.
  if (usage & RPMA_MR_USAGE_WRITE_DST) {
    access |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  }
  // A receive buffer is written by the local NIC.
  if (usage & RPMA_MR_USAGE_RECV) access |= IBV_ACCESS_LOCAL_WRITE;
  // SEND needs no flag: every region may be read by the local NIC.
  return access;
}

struct FlushScratch {
  Backend* backend = nullptr;
  ibv_mr* mr = nullptr;
  alignas(8) uint8_t bytes[kFlushScratchSize] = {};
};

int FlushScratchNew(const rpma_peer* peer, FlushScratch** scratch_ptr) {
  FlushScratch* scratch = New<FlushScratch>();
  if (scratch == nullptr) return RPMA_E_NOMEM;
  scratch->backend = PeerBackend(peer);
  // Registered as the destination of a read, as an RDMA READ target.
  int ret = PeerRegMr(peer, scratch->bytes, sizeof(scratch->bytes), RPMA_MR_USAGE_READ_DST,
                      &scratch->mr);
  if (ret != 0) {
    Delete(scratch);
    return ret;
  }
  *scratch_ptr = scratch;
  return 0;
}

int FlushScratchDelete(FlushScratch** scratch_ptr) {
  FlushScratch* scratch = *scratch_ptr;
  if (scratch == nullptr) return 0;
  int ret = 0;
  int err = scratch->backend->IbvDeregMr(scratch->mr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_dereg_mr");
    ret = RpmaErrorFromBackend(err);
  }
  Delete(scratch);
  *scratch_ptr = nullptr;
  return ret;
}

ibv_sge FlushScratchSge(const FlushScratch* scratch, uint32_t len) {
  ibv_sge sge;
  sge.addr = reinterpret_cast<uint64_t>(scratch->bytes);
  sge.length = len;
  sge.lkey = scratch->mr->lkey;
  return sge;
}

}  // namespace softrpma::api

extern "C" {

int rpma_mr_reg(struct rpma_peer* peer, void* ptr, size_t size, int usage,
                struct rpma_mr_local** mr_ptr) {
  softrpma::api::TracedCall call("rpma_mr_reg", "size=%zu usage=0x%x", size, usage);
  if (peer == nullptr || ptr == nullptr || mr_ptr == nullptr || size == 0) {
    return call.Return(RPMA_E_INVAL);
  }
  if (usage == 0) {
    RPMA_LOG_ERROR("usage is 0: name at least one RPMA_MR_USAGE_* bit");
    return call.Return(RPMA_E_INVAL);
  }
  // As librpma (mr.c): a bit that is no RPMA_MR_USAGE_* value is an invalid argument.
  if ((usage & ~kAllUsages) != 0) {
    RPMA_LOG_ERROR("usage 0x%x has bits that are no RPMA_MR_USAGE_* value", usage);
    return call.Return(RPMA_E_INVAL);
  }
  rpma_mr_local* mr = softrpma::New<rpma_mr_local>();
  if (mr == nullptr) return call.Return(RPMA_E_NOMEM);
  softrpma::Backend* backend = softrpma::api::PeerBackend(peer);
  ibv_mr* ibv_mr = nullptr;
  int ret = softrpma::api::PeerRegMr(peer, ptr, size, usage, &ibv_mr);
  if (ret != 0) {
    softrpma::Delete(mr);
    return call.Return(ret);
  }
  *mr = rpma_mr_local{backend, ibv_mr, ptr, size, usage};
  *mr_ptr = mr;
  return call.Return(0);
}

int rpma_mr_dereg(struct rpma_mr_local** mr_ptr) {
  softrpma::api::TracedCall call("rpma_mr_dereg");
  if (mr_ptr == nullptr) return call.Return(RPMA_E_INVAL);
  rpma_mr_local* mr = *mr_ptr;
  if (mr == nullptr) return call.Return(0);
  // As librpma: the object is released and *mr_ptr cleared even when the provider fails.
  int ret = 0;
  int err = mr->backend->IbvDeregMr(mr->mr);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_dereg_mr");
    ret = softrpma::api::RpmaErrorFromBackend(err);
  }
  softrpma::Delete(mr);
  *mr_ptr = nullptr;
  return call.Return(ret);
}

int rpma_mr_get_descriptor(const struct rpma_mr_local* mr, void* desc) {
  if (mr == nullptr || desc == nullptr) return RPMA_E_INVAL;
  uint8_t out[kMrDescriptorSize];
  PutLittleEndian(out, reinterpret_cast<uint64_t>(mr->ptr), 8);
  PutLittleEndian(out + 8, mr->size, 8);
  PutLittleEndian(out + 16, mr->mr->rkey, 4);
  out[20] = static_cast<uint8_t>(mr->usage);
  std::memcpy(desc, out, kMrDescriptorSize);
  return 0;
}

int rpma_mr_get_descriptor_size(const struct rpma_mr_local* mr, size_t* desc_size) {
  if (mr == nullptr || desc_size == nullptr) return RPMA_E_INVAL;
  *desc_size = kMrDescriptorSize;
  return 0;
}

int rpma_mr_remote_from_descriptor(const void* desc, size_t desc_size,
                                   struct rpma_mr_remote** mr_ptr) {
  if (desc == nullptr || mr_ptr == nullptr) return RPMA_E_INVAL;
  // At least the descriptor, as librpma takes it: programs pass the length of the private data
  // that carried it, which the provider may pad (56 bytes on IB/RoCE); the rest is ignored.
  if (desc_size < kMrDescriptorSize) {
    RPMA_LOG_ERROR("incompatible memory region descriptor size: %zu bytes, expected at least %zu",
                   desc_size, kMrDescriptorSize);
    return RPMA_E_INVAL;
  }
  uint8_t in[kMrDescriptorSize];
  std::memcpy(in, desc, kMrDescriptorSize);
  const int usage = in[20];
  if ((usage & kAllUsages) == 0 || (usage & ~kAllUsages) != 0) {
    RPMA_LOG_ERROR("the descriptor's usage 0x%x is not a valid memory region usage", usage);
    return RPMA_E_NOSUPP;
  }
  rpma_mr_remote* mr = softrpma::New<rpma_mr_remote>();
  if (mr == nullptr) return RPMA_E_NOMEM;
  mr->raddr = GetLittleEndian(in, 8);
  mr->size = GetLittleEndian(in + 8, 8);
  mr->rkey = static_cast<uint32_t>(GetLittleEndian(in + 16, 4));
  mr->usage = usage;
  *mr_ptr = mr;
  RPMA_LOG_INFO("remote memory region: address 0x%" PRIx64 ", size %" PRIu64 ", rkey 0x%" PRIx32
                ", usage 0x%x",
                mr->raddr, mr->size, mr->rkey, usage);
  return 0;
}

int rpma_mr_get_ptr(const struct rpma_mr_local* mr, void** ptr) {
  if (mr == nullptr || ptr == nullptr) return RPMA_E_INVAL;
  *ptr = mr->ptr;
  return 0;
}

int rpma_mr_get_size(const struct rpma_mr_local* mr, size_t* size) {
  if (mr == nullptr || size == nullptr) return RPMA_E_INVAL;
  *size = mr->size;
  return 0;
}

int rpma_mr_remote_get_size(const struct rpma_mr_remote* mr, size_t* size) {
  if (mr == nullptr || size == nullptr) return RPMA_E_INVAL;
  *size = mr->size;
  return 0;
}

int rpma_mr_remote_get_flush_type(const struct rpma_mr_remote* mr, int* flush_type) {
  if (mr == nullptr || flush_type == nullptr) return RPMA_E_INVAL;
  *flush_type = mr->usage & kFlushUsages;
  return 0;
}

int rpma_mr_remote_delete(struct rpma_mr_remote** mr_ptr) {
  if (mr_ptr == nullptr) return RPMA_E_INVAL;
  softrpma::Delete(*mr_ptr);
  *mr_ptr = nullptr;
  return 0;
}

int rpma_mr_advise(struct rpma_mr_local* mr, size_t offset, size_t len, int advice,
                   uint32_t flags) {
  softrpma::api::TracedCall call("rpma_mr_advise", "offset=%zu len=%zu advice=%d flags=0x%x",
                                 offset, len, advice, flags);
  // A NULL mr is beyond the man page's list; it is an invalid argument like the others.
  if (mr == nullptr) return call.Return(RPMA_E_INVAL);
  if (offset > mr->size || len > mr->size - offset) {
    RPMA_LOG_ERROR("range [%zu, %zu + %zu) is out of the memory registration (%zu bytes)", offset,
                   offset, len, mr->size);
    return call.Return(RPMA_E_INVAL);
  }
  // (A len above kMaxSgeLength is rejected by MrLocalSge below, before the provider is asked.)
  if ((flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) != 0) {
    RPMA_LOG_ERROR("invalid flags 0x%x (only IBV_ADVISE_MR_FLAG_FLUSH is valid)", flags);
    return call.Return(RPMA_E_INVAL);
  }
  switch (advice) {
    case IBV_ADVISE_MR_ADVICE_PREFETCH:
    case IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT:
      break;
    case IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE:
      // Prefetching for write needs a region the local NIC may write (IBV_ACCESS_LOCAL_WRITE).
      // (The transport changes only remote access: LOCAL_WRITE is the same on every device.)
      if ((softrpma::api::MrUsageToAccess(mr->usage, /*iwarp=*/false) &
           IBV_ACCESS_LOCAL_WRITE) == 0) {
        RPMA_LOG_ERROR("the memory registration usage 0x%x does not allow "
                       "IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE (it is not writable)",
                       mr->usage);
        return call.Return(RPMA_E_INVAL);
      }
      break;
    default:
      RPMA_LOG_ERROR("unknown advice %d", advice);
      return call.Return(RPMA_E_INVAL);
  }
  ibv_sge sge;
  int ret = softrpma::api::MrLocalSge(mr, offset, len, &sge);
  if (ret != 0) return call.Return(ret);
  int err = mr->backend->IbvAdviseMr(mr->mr->pd, static_cast<ibv_advise_mr_advice>(advice), flags,
                                     &sge, 1);
  if (err != 0) {
    RPMA_LOG_PROVIDER_ERROR(err, "ibv_advise_mr");
    softrpma::api::ErrorMapping mapping;
    mapping.eopnotsupp_is_nosupp = true;
    mapping.efault_einval_is_inval = true;
    return call.Return(softrpma::api::RpmaErrorFromBackend(err, mapping));
  }
  return call.Return(0);
}

}  // extern "C"
