// check.h: FUZZ_CHECK(condition), an invariant of a fuzz target. A failure prints the condition
// and where, then aborts: libFuzzer saves the input as a crash, and a corpus test fails.

#ifndef SOFTRPMA_TOOLS_FUZZ_CHECK_H_
#define SOFTRPMA_TOOLS_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                      \
  do {                                                                             \
    if (!(condition)) {                                                            \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__,   \
                   #condition);                                                    \
      std::abort();                                                                \
    }                                                                              \
  } while (0)

#endif  // SOFTRPMA_TOOLS_FUZZ_CHECK_H_
