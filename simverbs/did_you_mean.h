// did_you_mean.h: the candidate a mistyped word most likely meant, for error messages ("unknown
// subcommand \"swep\" (did you mean \"sweep\"?)").
//
// Thread-safety: thread-safe (keeps no state).

#ifndef SOFTRPMA_SIMVERBS_DID_YOU_MEAN_H_
#define SOFTRPMA_SIMVERBS_DID_YOU_MEAN_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace softrpma {

// The candidate closest to `word` by edit distance (insertions, deletions, substitutions and
// swaps of two neighbouring letters, case-insensitive), when it is close enough to be a typo: at
// most a third of the word's length, and at least 1. "" when none is, when `word` is itself a
// candidate, or when two candidates are equally close.
std::string DidYouMean(absl::string_view word, const std::vector<std::string>& candidates);

// " (did you mean \"<candidate>\"?)", or "" when DidYouMean has none.
std::string DidYouMeanSuffix(absl::string_view word, const std::vector<std::string>& candidates);

}  // namespace softrpma

#endif  // SOFTRPMA_SIMVERBS_DID_YOU_MEAN_H_
