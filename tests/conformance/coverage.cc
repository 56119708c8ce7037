#include "tests/conformance/coverage.h"

namespace softrpma::conformance {
namespace {

std::vector<Coverage>& MutableCoverage() {
  static auto* coverage = new std::vector<Coverage>();  // never destroyed: read until exit
  return *coverage;
}

}  // namespace

const std::vector<Coverage>& AllCoverage() { return MutableCoverage(); }

CoverageRegistrar::CoverageRegistrar(const char* test, std::initializer_list<CoveredRow> rows,
                                     const char* file, int line) {
  for (const CoveredRow& row : rows) MutableCoverage().push_back({test, row, file, line});
}

}  // namespace softrpma::conformance
