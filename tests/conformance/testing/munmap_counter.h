// munmap_counter.h: MunmapCounter, which counts the munmap(2) calls made while it is alive.
//
// The binary that links this target defines munmap() itself (forwarding to the next
// definition, libc's or a sanitizer's), so every munmap call that softrpma's code makes, which
// is linked into the same executable, goes through the counter. For the ERRORS line
// "rpma_conn_delete: RPMA_E_INVAL - munmap() failed": the test shows that deleting a connection
// calls no munmap, so that cause cannot occur. (Calls libc makes internally, e.g. free() of a
// large block, bypass the symbol and are not counted: they are not softrpma's.)
//
// Thread-safe; one counter alive at a time.

#ifndef SOFTRPMA_TESTS_CONFORMANCE_TESTING_MUNMAP_COUNTER_H_
#define SOFTRPMA_TESTS_CONFORMANCE_TESTING_MUNMAP_COUNTER_H_

#include <cstdint>

namespace softrpma::conformance {

class MunmapCounter final {
 public:
  MunmapCounter();  // starts counting from 0
  MunmapCounter(const MunmapCounter&) = delete;
  MunmapCounter& operator=(const MunmapCounter&) = delete;
  ~MunmapCounter();  // stops counting

  // munmap calls since construction.
  uint64_t calls() const;
};

}  // namespace softrpma::conformance

#endif  // SOFTRPMA_TESTS_CONFORMANCE_TESTING_MUNMAP_COUNTER_H_
