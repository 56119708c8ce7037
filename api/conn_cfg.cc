// conn_cfg.cc: the connection configuration object (rpma_conn_cfg_*(3)).
//
// Thread-safe: every setting is an atomic, so a configuration may be read by one thread
// (rpma_conn_req_new) while another sets it.

#include <atomic>
#include <cstdint>

#include "api/internal/conn_cfg.h"
#include "librpma.h"
#include "simverbs/alloc.h"

struct rpma_conn_cfg {
  std::atomic<int> timeout_ms{softrpma::api::kDefaultTimeoutMs};
  std::atomic<uint32_t> cq_size{softrpma::api::kDefaultQueueSize};
  std::atomic<uint32_t> rcq_size{softrpma::api::kDefaultRcqSize};
  std::atomic<uint32_t> sq_size{softrpma::api::kDefaultQueueSize};
  std::atomic<uint32_t> rq_size{softrpma::api::kDefaultQueueSize};
  std::atomic<bool> shared_comp_channel{false};
  std::atomic<rpma_srq*> srq{nullptr};
};

namespace softrpma::api {

ConnCfgValues GetConnCfgValues(const rpma_conn_cfg* cfg) {
  ConnCfgValues values;
  if (cfg == nullptr) return values;
  values.timeout_ms = cfg->timeout_ms.load(std::memory_order_relaxed);
  values.cq_size = cfg->cq_size.load(std::memory_order_relaxed);
  values.rcq_size = cfg->rcq_size.load(std::memory_order_relaxed);
  values.sq_size = cfg->sq_size.load(std::memory_order_relaxed);
  values.rq_size = cfg->rq_size.load(std::memory_order_relaxed);
  values.shared_comp_channel = cfg->shared_comp_channel.load(std::memory_order_relaxed);
  values.srq = cfg->srq.load(std::memory_order_relaxed);
  return values;
}

}  // namespace softrpma::api

namespace {

// Setters and getters of one setting share these two shapes.
template <typename T, typename V>
int Set(std::atomic<T>* field, V value) {
  field->store(value, std::memory_order_relaxed);
  return 0;
}

template <typename T, typename Out>
int Get(const std::atomic<T>& field, Out* out) {
  if (out == nullptr) return RPMA_E_INVAL;
  *out = field.load(std::memory_order_relaxed);
  return 0;
}

}  // namespace

extern "C" {

int rpma_conn_cfg_new(struct rpma_conn_cfg** cfg_ptr) {
  if (cfg_ptr == nullptr) return RPMA_E_INVAL;
  rpma_conn_cfg* cfg = softrpma::New<rpma_conn_cfg>();
  if (cfg == nullptr) return RPMA_E_NOMEM;
  *cfg_ptr = cfg;
  return 0;
}

int rpma_conn_cfg_delete(struct rpma_conn_cfg** cfg_ptr) {
  if (cfg_ptr == nullptr) return RPMA_E_INVAL;
  softrpma::Delete(*cfg_ptr);
  *cfg_ptr = nullptr;
  return 0;
}

int rpma_conn_cfg_set_timeout(struct rpma_conn_cfg* cfg, int timeout_ms) {
  if (cfg == nullptr || timeout_ms < 0) return RPMA_E_INVAL;
  return Set(&cfg->timeout_ms, timeout_ms);
}

int rpma_conn_cfg_get_timeout(const struct rpma_conn_cfg* cfg, int* timeout_ms) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Get(cfg->timeout_ms, timeout_ms);
}

int rpma_conn_cfg_set_cq_size(struct rpma_conn_cfg* cfg, uint32_t cq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Set(&cfg->cq_size, cq_size);
}

int rpma_conn_cfg_get_cq_size(const struct rpma_conn_cfg* cfg, uint32_t* cq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Get(cfg->cq_size, cq_size);
}

int rpma_conn_cfg_set_rcq_size(struct rpma_conn_cfg* cfg, uint32_t rcq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Set(&cfg->rcq_size, rcq_size);
}

int rpma_conn_cfg_get_rcq_size(const struct rpma_conn_cfg* cfg, uint32_t* rcq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Get(cfg->rcq_size, rcq_size);
}

int rpma_conn_cfg_set_sq_size(struct rpma_conn_cfg* cfg, uint32_t sq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Set(&cfg->sq_size, sq_size);
}

int rpma_conn_cfg_get_sq_size(const struct rpma_conn_cfg* cfg, uint32_t* sq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Get(cfg->sq_size, sq_size);
}

int rpma_conn_cfg_set_rq_size(struct rpma_conn_cfg* cfg, uint32_t rq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Set(&cfg->rq_size, rq_size);
}

int rpma_conn_cfg_get_rq_size(const struct rpma_conn_cfg* cfg, uint32_t* rq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Get(cfg->rq_size, rq_size);
}

int rpma_conn_cfg_set_compl_channel(struct rpma_conn_cfg* cfg, bool shared) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Set(&cfg->shared_comp_channel, shared);
}

int rpma_conn_cfg_get_compl_channel(const struct rpma_conn_cfg* cfg, bool* shared) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Get(cfg->shared_comp_channel, shared);
}

int rpma_conn_cfg_set_srq(struct rpma_conn_cfg* cfg, struct rpma_srq* srq) {
  // A NULL srq too, as librpma (conn_cfg.c) rejects it where the man page is silent.
  if (cfg == nullptr || srq == nullptr) return RPMA_E_INVAL;
  return Set(&cfg->srq, srq);
}

int rpma_conn_cfg_get_srq(const struct rpma_conn_cfg* cfg, struct rpma_srq** srq_ptr) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  return Get(cfg->srq, srq_ptr);
}

}  // extern "C"
