// Tests of the four verbs error conventions' conversion into the Backend's (verbs_errors.h).

#include "simverbs/ibverbs/verbs_errors.h"

#include <netdb.h>

#include <cerrno>

#include "gtest/gtest.h"
#include "simverbs/backend.h"

namespace softrpma::ibverbs::internal {
namespace {

int object;  // Something for a create-style call to return.

TEST(ConvertNullErrno, Success_WritesObjectAndReturnsZero) {
  int* out = nullptr;
  EXPECT_EQ(ConvertNullErrno([] { return &object; }, &out), 0);
  EXPECT_EQ(out, &object);
}

TEST(ConvertNullErrno, SuccessWithStaleErrno_ReturnsZero) {
  int* out = nullptr;
  EXPECT_EQ(ConvertNullErrno(
                [] {
                  errno = EINVAL;  // A call may leave errno set and still succeed.
                  return &object;
                },
                &out),
            0);
  EXPECT_EQ(out, &object);
}

TEST(ConvertNullErrno, NullWithErrno_ReturnsErrnoAndLeavesOut) {
  int sentinel = 0;
  int* out = &sentinel;
  EXPECT_EQ(ConvertNullErrno(
                []() -> int* {
                  errno = ENOMEM;
                  return nullptr;
                },
                &out),
            ENOMEM);
  EXPECT_EQ(out, &sentinel);
}

TEST(ConvertNullErrno, NullWithoutErrno_ReturnsNoErrno) {
  errno = EBUSY;  // Stale: set before the call, so not the call's.
  int* out = nullptr;
  EXPECT_EQ(ConvertNullErrno([]() -> int* { return nullptr; }, &out), kNoErrno);
  EXPECT_EQ(out, nullptr);
}

TEST(ConvertReturnedErrno, Zero_ReturnsZero) { EXPECT_EQ(ConvertReturnedErrno(0), 0); }

TEST(ConvertReturnedErrno, Errno_ReturnsIt) {
  EXPECT_EQ(ConvertReturnedErrno(EBUSY), EBUSY);
  EXPECT_EQ(ConvertReturnedErrno(ENOMEM), ENOMEM);
}

TEST(ConvertReturnedErrno, Negative_ReturnsNoErrno) {
  EXPECT_EQ(ConvertReturnedErrno(-EINVAL), kNoErrno);
  EXPECT_EQ(ConvertReturnedErrno(-1), kNoErrno);
}

TEST(ConvertMinusOneErrno, Zero_ReturnsZero) {
  errno = EAGAIN;  // Stale.
  EXPECT_EQ(ConvertMinusOneErrno([] { return 0; }), 0);
}

TEST(ConvertMinusOneErrno, MinusOneWithErrno_ReturnsErrno) {
  EXPECT_EQ(ConvertMinusOneErrno([] {
              errno = EADDRINUSE;
              return -1;
            }),
            EADDRINUSE);
}

TEST(ConvertMinusOneErrno, MinusOneWithoutErrno_ReturnsNoErrno) {
  errno = EAGAIN;  // Stale: must not be reported.
  EXPECT_EQ(ConvertMinusOneErrno([] { return -1; }), kNoErrno);
}

// rdma_getaddrinfo reports a failed name resolution as -1 with an EAI_* code (negative) in errno.
TEST(ConvertMinusOneErrno, MinusOneWithNegativeEaiCode_ReturnsNoErrno) {
  EXPECT_EQ(ConvertMinusOneErrno([] {
              errno = EAI_NONAME;
              return -1;
            }),
            kNoErrno);
}

TEST(ConvertGetaddrinfo, MinusOneWithNegativeEaiCode_ReturnsGaiError) {
  const int err = ConvertGetaddrinfo([] {
    errno = EAI_NONAME;
    return -1;
  });
  EXPECT_TRUE(IsGaiError(err));
  EXPECT_EQ(GaiCode(err), EAI_NONAME);
}

TEST(ConvertGetaddrinfo, MinusOneWithErrno_ReturnsIt) {
  EXPECT_EQ(ConvertGetaddrinfo([] {
              errno = ENOMEM;
              return -1;
            }),
            ENOMEM);
  EXPECT_EQ(ConvertGetaddrinfo([] { return 0; }), 0);
  errno = EAGAIN;  // stale
  EXPECT_EQ(ConvertGetaddrinfo([] { return -1; }), kNoErrno);
}

TEST(ConvertNegativeCount, Count_WritesItAndReturnsZero) {
  int count = -7;
  EXPECT_EQ(ConvertNegativeCount(3, &count), 0);
  EXPECT_EQ(count, 3);
}

TEST(ConvertNegativeCount, ZeroCount_IsNotAFailure) {
  int count = -7;
  EXPECT_EQ(ConvertNegativeCount(0, &count), 0);
  EXPECT_EQ(count, 0);
}

TEST(ConvertNegativeCount, Negative_ReturnsNoErrnoAndLeavesCount) {
  int count = -7;
  EXPECT_EQ(ConvertNegativeCount(-2, &count), kNoErrno);
  EXPECT_EQ(count, -7);
}

}  // namespace
}  // namespace softrpma::ibverbs::internal
