// internal/srq_cfg.h: the settings of an rpma_srq_cfg as one plain value, with the defaults of
// rpma_srq_cfg_new(3) for a NULL configuration. The struct is private to srq_cfg.cc.

#ifndef SOFTRPMA_API_INTERNAL_SRQ_CFG_H_
#define SOFTRPMA_API_INTERNAL_SRQ_CFG_H_

#include <cstdint>

#include "librpma.h"

namespace softrpma::api {

inline constexpr uint32_t kDefaultSrqRqSize = 100;
inline constexpr uint32_t kDefaultSrqRcqSize = 100;

struct SrqCfgValues {
  uint32_t rq_size = kDefaultSrqRqSize;
  uint32_t rcq_size = kDefaultSrqRcqSize;  // 0: no shared receive CQ
};

// A snapshot of `cfg`'s settings; the defaults when cfg is nullptr. Thread-safe.
SrqCfgValues GetSrqCfgValues(const rpma_srq_cfg* cfg);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_SRQ_CFG_H_
