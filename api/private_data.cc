// private_data.cc: copies of rdma_cm private data (internal/private_data.h).

#include <cstring>

#include "api/internal/private_data.h"
#include "simverbs/alloc.h"

namespace softrpma::api {

int PrivateDataCopy(const void* ptr, uint8_t len, PrivateData** copy) {
  if (ptr == nullptr || len == 0) {
    *copy = nullptr;
    return 0;
  }
  PrivateData* data = New<PrivateData>();
  if (data == nullptr) return RPMA_E_NOMEM;
  data->len = len;
  std::memcpy(data->bytes, ptr, len);
  *copy = data;
  return 0;
}

void PrivateDataDelete(PrivateData* copy) { Delete(copy); }

rpma_conn_private_data PrivateDataView(PrivateData* copy) {
  rpma_conn_private_data view;
  view.ptr = copy != nullptr ? copy->bytes : nullptr;
  view.len = copy != nullptr ? copy->len : 0;
  return view;
}

}  // namespace softrpma::api
