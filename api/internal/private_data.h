// internal/private_data.h: a copy of rdma_cm private data (at most 255 bytes), kept by a
// connection request and a connection so that rpma_conn_req_get_private_data(3) and
// rpma_conn_get_private_data(3) stay valid after the CM event that carried it is acknowledged.

#ifndef SOFTRPMA_API_INTERNAL_PRIVATE_DATA_H_
#define SOFTRPMA_API_INTERNAL_PRIVATE_DATA_H_

#include <cstdint>

#include "librpma.h"

namespace softrpma::api {

struct PrivateData {
  uint8_t len = 0;
  uint8_t bytes[UINT8_MAX] = {};
};

// Copies `len` bytes at `ptr` into a new PrivateData (allocated through simverbs/alloc.h) in
// *copy; *copy is nullptr when there is nothing to copy (ptr nullptr or len 0).
// Returns 0 or RPMA_E_NOMEM (then *copy is untouched).
int PrivateDataCopy(const void* ptr, uint8_t len, PrivateData** copy);

// Frees a copy (nullptr is fine).
void PrivateDataDelete(PrivateData* copy);

// The public view of a copy: {nullptr, 0} for nullptr.
rpma_conn_private_data PrivateDataView(PrivateData* copy);

}  // namespace softrpma::api

#endif  // SOFTRPMA_API_INTERNAL_PRIVATE_DATA_H_
