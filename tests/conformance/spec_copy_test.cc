// The committed tests/conformance/rpma-errors.tsv is identical to the team's
// shared/spec/rpma-errors.tsv (when that exists on this machine), so that the conformance
// report is about the current spec.

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace {

constexpr char kCopy[] = "tests/conformance/rpma-errors.tsv";  // in the runfiles
constexpr char kShared[] = "/work/shared/spec/rpma-errors.tsv";

bool ReadFile(const char* path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream out;
  out << in.rdbuf();
  *contents = out.str();
  return true;
}

TEST(SpecCopyTest, CommittedCopy_MatchesSharedSpec) {
  std::string copy;
  ASSERT_TRUE(ReadFile(kCopy, &copy)) << "cannot read " << kCopy;
  std::string shared;
  if (!ReadFile(kShared, &shared)) GTEST_SKIP() << kShared << " is not on this machine";
  EXPECT_TRUE(copy == shared) << kCopy << " differs from " << kShared << "; copy it again: cp "
                              << kShared << " " << kCopy;
}

TEST(SpecCopyTest, CommittedCopy_HasHeaderAndThreeColumnsPerRow) {
  std::string copy;
  ASSERT_TRUE(ReadFile(kCopy, &copy)) << "cannot read " << kCopy;
  std::istringstream in(copy);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "function\terror\ttrigger");
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    int tabs = 0;
    for (char c : line) tabs += c == '\t';
    EXPECT_EQ(tabs, 2) << "row " << rows << ": " << line;
  }
  EXPECT_GT(rows, 0);
}

}  // namespace
