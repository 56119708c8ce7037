// peer_cfg.cc: the peer configuration object (rpma_peer_cfg_*(3)): what a peer's platform
// supports, and its 1-byte network descriptor.
//
// Thread-safe: the one setting is an atomic.

#include <atomic>
#include <cstdint>
#include <cstring>

#include "api/internal/log.h"
#include "librpma.h"
#include "simverbs/alloc.h"

// Layout of the descriptor: one byte, 1 when direct write to PMem is supported, else 0.
namespace {
constexpr size_t kPeerCfgDescriptorSize = 1;
}  // namespace

struct rpma_peer_cfg {
  std::atomic<bool> direct_write_to_pmem{false};
};

extern "C" {

int rpma_peer_cfg_new(struct rpma_peer_cfg** pcfg_ptr) {
  if (pcfg_ptr == nullptr) return RPMA_E_INVAL;
  rpma_peer_cfg* pcfg = softrpma::New<rpma_peer_cfg>();
  if (pcfg == nullptr) return RPMA_E_NOMEM;
  *pcfg_ptr = pcfg;
  return 0;
}

int rpma_peer_cfg_delete(struct rpma_peer_cfg** pcfg_ptr) {
  if (pcfg_ptr == nullptr) return RPMA_E_INVAL;
  softrpma::Delete(*pcfg_ptr);
  *pcfg_ptr = nullptr;
  return 0;
}

int rpma_peer_cfg_set_direct_write_to_pmem(struct rpma_peer_cfg* pcfg, bool supported) {
  if (pcfg == nullptr) return RPMA_E_INVAL;
  pcfg->direct_write_to_pmem.store(supported, std::memory_order_relaxed);
  return 0;
}

int rpma_peer_cfg_get_direct_write_to_pmem(const struct rpma_peer_cfg* pcfg, bool* supported) {
  if (pcfg == nullptr || supported == nullptr) return RPMA_E_INVAL;
  *supported = pcfg->direct_write_to_pmem.load(std::memory_order_relaxed);
  return 0;
}

int rpma_peer_cfg_get_descriptor(const struct rpma_peer_cfg* pcfg, void* desc) {
  if (pcfg == nullptr || desc == nullptr) return RPMA_E_INVAL;
  const uint8_t byte = pcfg->direct_write_to_pmem.load(std::memory_order_relaxed) ? 1 : 0;
  std::memcpy(desc, &byte, kPeerCfgDescriptorSize);
  return 0;
}

int rpma_peer_cfg_get_descriptor_size(const struct rpma_peer_cfg* pcfg, size_t* desc_size) {
  if (pcfg == nullptr || desc_size == nullptr) return RPMA_E_INVAL;
  *desc_size = kPeerCfgDescriptorSize;
  return 0;
}

int rpma_peer_cfg_from_descriptor(const void* desc, size_t desc_size,
                                  struct rpma_peer_cfg** pcfg_ptr) {
  if (desc == nullptr || pcfg_ptr == nullptr) return RPMA_E_INVAL;
  if (desc_size < kPeerCfgDescriptorSize) {
    RPMA_LOG_ERROR("peer configuration descriptor too short: %zu bytes, expected %zu",
                   desc_size, kPeerCfgDescriptorSize);
    return RPMA_E_INVAL;
  }
  uint8_t byte = 0;
  std::memcpy(&byte, desc, kPeerCfgDescriptorSize);
  rpma_peer_cfg* pcfg = softrpma::New<rpma_peer_cfg>();
  if (pcfg == nullptr) return RPMA_E_NOMEM;
  pcfg->direct_write_to_pmem.store(byte != 0, std::memory_order_relaxed);
  *pcfg_ptr = pcfg;
  return 0;
}

}  // extern "C"
