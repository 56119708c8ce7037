// srq_cfg.cc: the shared RQ configuration object (rpma_srq_cfg_*(3)).
//
// Thread-safe: every setting is an atomic.

#include <atomic>
#include <cstdint>

#include "api/internal/srq_cfg.h"
#include "librpma.h"
#include "simverbs/alloc.h"

struct rpma_srq_cfg {
  std::atomic<uint32_t> rq_size{softrpma::api::kDefaultSrqRqSize};
  std::atomic<uint32_t> rcq_size{softrpma::api::kDefaultSrqRcqSize};
};

namespace softrpma::api {

SrqCfgValues GetSrqCfgValues(const rpma_srq_cfg* cfg) {
  SrqCfgValues values;
  if (cfg == nullptr) return values;
  values.rq_size = cfg->rq_size.load(std::memory_order_relaxed);
  values.rcq_size = cfg->rcq_size.load(std::memory_order_relaxed);
  return values;
}

}  // namespace softrpma::api

extern "C" {

int rpma_srq_cfg_new(struct rpma_srq_cfg** cfg_ptr) {
  if (cfg_ptr == nullptr) return RPMA_E_INVAL;
  rpma_srq_cfg* cfg = softrpma::New<rpma_srq_cfg>();
  if (cfg == nullptr) return RPMA_E_NOMEM;
  *cfg_ptr = cfg;
  return 0;
}

int rpma_srq_cfg_delete(struct rpma_srq_cfg** cfg_ptr) {
  if (cfg_ptr == nullptr) return RPMA_E_INVAL;
  softrpma::Delete(*cfg_ptr);
  *cfg_ptr = nullptr;
  return 0;
}

int rpma_srq_cfg_set_rq_size(struct rpma_srq_cfg* cfg, uint32_t rq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  cfg->rq_size.store(rq_size, std::memory_order_relaxed);
  return 0;
}

int rpma_srq_cfg_get_rq_size(const struct rpma_srq_cfg* cfg, uint32_t* rq_size) {
  if (cfg == nullptr || rq_size == nullptr) return RPMA_E_INVAL;
  *rq_size = cfg->rq_size.load(std::memory_order_relaxed);
  return 0;
}

int rpma_srq_cfg_set_rcq_size(struct rpma_srq_cfg* cfg, uint32_t rcq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  cfg->rcq_size.store(rcq_size, std::memory_order_relaxed);
  return 0;
}

int rpma_srq_cfg_get_rcq_size(const struct rpma_srq_cfg* cfg, uint32_t* rcq_size) {
  if (cfg == nullptr || rcq_size == nullptr) return RPMA_E_INVAL;
  *rcq_size = cfg->rcq_size.load(std::memory_order_relaxed);
  return 0;
}

}  // extern "C"
