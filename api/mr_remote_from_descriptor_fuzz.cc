// mr_remote_from_descriptor_fuzz: rpma_mr_remote_from_descriptor(3) on any bytes (a descriptor
// comes from the peer, in private data). Either it fails with RPMA_E_INVAL / RPMA_E_NOSUPP, or
// the remote region it makes answers rpma_mr_remote_get_size / get_flush_type with what the
// descriptor's layout (mr.cc) says, and is deleted.

#include <cstddef>
#include <cstdint>

#include "librpma.h"
#include "tools/fuzz/check.h"
#include "tools/fuzz/rpma_env.h"

namespace {

uint64_t LittleEndian(const uint8_t* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  softrpma::fuzz::SilenceRpmaLog();
  rpma_mr_remote* mr = nullptr;
  const int ret = rpma_mr_remote_from_descriptor(data, size, &mr);
  if (ret != 0) {
    FUZZ_CHECK(ret == RPMA_E_INVAL || ret == RPMA_E_NOSUPP);
    FUZZ_CHECK(mr == nullptr);
    return 0;
  }
  FUZZ_CHECK(mr != nullptr);
  FUZZ_CHECK(size >= 21);
  size_t mr_size = 0;
  FUZZ_CHECK(rpma_mr_remote_get_size(mr, &mr_size) == 0);
  FUZZ_CHECK(mr_size == LittleEndian(data + 8, 8));
  int flush_type = -1;
  FUZZ_CHECK(rpma_mr_remote_get_flush_type(mr, &flush_type) == 0);
  FUZZ_CHECK((flush_type & ~(RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                             RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT)) == 0);
  FUZZ_CHECK(flush_type == (data[20] & (RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                                        RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT)));
  FUZZ_CHECK(rpma_mr_remote_delete(&mr) == 0);
  FUZZ_CHECK(mr == nullptr);
  return 0;
}
