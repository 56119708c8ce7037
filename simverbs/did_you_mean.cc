#include "simverbs/did_you_mean.h"

#include <algorithm>
#include <cstddef>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace softrpma {
namespace {

// Optimal string alignment distance, case-insensitive.
size_t Distance(absl::string_view a, absl::string_view b) {
  const size_t n = a.size();
  const size_t m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  auto same = [](char x, char y) { return absl::ascii_tolower(x) == absl::ascii_tolower(y); };
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = same(a[i - 1], b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

std::string DidYouMean(absl::string_view word, const std::vector<std::string>& candidates) {
  // Words longer than any name are not typos of one (and cost a quadratic table).
  if (word.empty() || word.size() > 256) return "";
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  size_t best = limit + 1;
  const std::string* found = nullptr;
  bool tie = false;
  for (const std::string& candidate : candidates) {
    if (candidate == word) return "";
    const size_t distance = Distance(word, candidate);
    if (distance < best) {
      best = distance;
      found = &candidate;
      tie = false;
    } else if (distance == best) {
      tie = true;
    }
  }
  return found != nullptr && !tie ? *found : "";
}

std::string DidYouMeanSuffix(absl::string_view word, const std::vector<std::string>& candidates) {
  const std::string match = DidYouMean(word, candidates);
  return match.empty() ? "" : absl::StrCat(" (did you mean \"", match, "\"?)");
}

}  // namespace softrpma
