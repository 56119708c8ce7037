// peer_cfg_from_descriptor_fuzz: rpma_peer_cfg_from_descriptor(3) on any bytes (the descriptor
// comes from the peer). Either it fails with RPMA_E_INVAL, or the configuration it makes says
// what the descriptor's first byte says and serialises back to one byte that parses to the
// same configuration (the round trip), and is deleted.

#include <cstddef>
#include <cstdint>

#include "librpma.h"
#include "tools/fuzz/check.h"
#include "tools/fuzz/rpma_env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  softrpma::fuzz::SilenceRpmaLog();
  rpma_peer_cfg* pcfg = nullptr;
  const int ret = rpma_peer_cfg_from_descriptor(data, size, &pcfg);
  if (ret != 0) {
    FUZZ_CHECK(ret == RPMA_E_INVAL && size == 0);
    FUZZ_CHECK(pcfg == nullptr);
    return 0;
  }
  FUZZ_CHECK(pcfg != nullptr && size >= 1);
  bool direct_write = false;
  FUZZ_CHECK(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &direct_write) == 0);
  FUZZ_CHECK(direct_write == (data[0] != 0));

  size_t desc_size = 0;
  FUZZ_CHECK(rpma_peer_cfg_get_descriptor_size(pcfg, &desc_size) == 0);
  FUZZ_CHECK(desc_size == 1);
  uint8_t desc[1] = {0xff};
  FUZZ_CHECK(rpma_peer_cfg_get_descriptor(pcfg, desc) == 0);
  rpma_peer_cfg* again = nullptr;
  FUZZ_CHECK(rpma_peer_cfg_from_descriptor(desc, desc_size, &again) == 0);
  bool direct_write_again = !direct_write;
  FUZZ_CHECK(rpma_peer_cfg_get_direct_write_to_pmem(again, &direct_write_again) == 0);
  FUZZ_CHECK(direct_write_again == direct_write);
  FUZZ_CHECK(rpma_peer_cfg_delete(&again) == 0);
  FUZZ_CHECK(rpma_peer_cfg_delete(&pcfg) == 0 && pcfg == nullptr);
  return 0;
}
