// internal/conn_cfg.h: the settings of an rpma_conn_cfg as one plain value, with librpma's
// defaults for a NULL configuration. The struct rpma_conn_cfg is private to conn_cfg.cc.

#ifndef SOFTRPMA_API_INTERNAL_CONN_CFG_H_
#define SOFTRPMA_API_INTERNAL_CONN_CFG_H_

#include <cstdint>

#include "librpma.h"

namespace softrpma::api {

// The defaults rpma_conn_cfg_new(3) documents.
inline constexpr int kDefaultTimeoutMs = RPMA_DEFAULT_TIMEOUT_MS;
inline constexpr uint32_t kDefaultQueueSize = 10;  // CQ, SQ and RQ
inline constexpr uint32_t kDefaultRcqSize = 0;     // no receive CQ

struct ConnCfgValues {
  int timeout_ms = kDefaultTimeoutMs;
  uint32_t cq_size = kDefaultQueueSize;
  uint32_t rcq_size = kDefaultRcqSize;
  uint32_t sq_size = kDefaultQueueSize;
  uint32_t rq_size = kDefaultQueueSize;
  bool shared_comp_channel = false;
  rpma_srq* srq = nullptr;
};

// A snapshot of `cfg`'s settings; the defaults when cfg is nullptr. Thread-safe.
ConnCfgValues GetConnCfgValues(const rpma_conn_cfg* cfg);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_CONN_CFG_H_
