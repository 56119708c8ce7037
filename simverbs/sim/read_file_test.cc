// ReadFileUpTo: a whole file within its limit; each refusal, with its message.

#include "simverbs/sim/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace softrpma::sim {
namespace {

std::string TempPath(const char* name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

TEST(ReadFileUpTo, WithinTheLimit_ReadsItWhole) {
  const std::string path = TempPath("small.txt");
  std::ofstream(path) << "seed 7\n";
  absl::StatusOr<std::string> text = ReadFileUpTo(path, 7, "scenario file");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "seed 7\n");
}

TEST(ReadFileUpTo, EndlessDevice_InvalidArgumentAtTheLimit) {
  absl::StatusOr<std::string> text = ReadFileUpTo("/dev/zero", 16 << 20, "scenario file");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(text.status().message(),
            "/dev/zero: cannot read scenario file: it "
            "is larger than 16 MiB, the most softrpma "
            "reads as one");
}

TEST(ReadFileUpTo, SparseFileOverTheLimit_InvalidArgumentFromItsSize) {
  const std::string path = TempPath("sparse.txt");
  const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t{1} << 40),
            0);  // 1 TiB of holes: reading it would take hours
  close(fd);
  absl::StatusOr<std::string> text = ReadFileUpTo(path, 1000, "sweep report");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(text.status().message(),
            absl::StrCat(path,
                         ": cannot read sweep report: it is larger "
                         "than 1000 bytes, the most softrpma reads as one"));
  unlink(path.c_str());
}

TEST(ReadFileUpTo, Directory_InvalidArgument) {
  absl::StatusOr<std::string> text = ReadFileUpTo("/", 100, "scenario file");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(text.status().message(), "/: cannot read scenario file: it is a directory");
}

TEST(ReadFileUpTo, Missing_NotFound) {
  absl::StatusOr<std::string> text = ReadFileUpTo("/nonexistent/x", 100, "scenario file");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(text.status().message(),
            "/nonexistent/x: cannot read scenario file: No such file or directory");
}

}  // namespace
}  // namespace softrpma::sim
