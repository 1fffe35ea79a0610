#include "draft/ngram_lookup.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace selfspec {

void NgramLookupOptions::validate() const {
  SELFSPEC_CHECK(min_ngram >= 1 && max_ngram >= min_ngram,
                 "n-gram lookup: n-gram sizes [{}, {}] are not a range of sizes >= 1", min_ngram,
                 max_ngram);
  SELFSPEC_CHECK(max_tokens >= 0, "n-gram lookup: max_tokens {} is negative", max_tokens);
}

std::vector<std::int32_t> ngram_lookup(std::span<const std::int32_t> history,
                                       const NgramLookupOptions& options) {
  options.validate();
  const auto size = static_cast<std::ptrdiff_t>(history.size());
  if (options.max_tokens == 0) return {};
  for (int n = std::min<std::ptrdiff_t>(options.max_ngram, size - 1); n >= options.min_ngram; --n) {
    const std::span<const std::int32_t> suffix = history.last(static_cast<std::size_t>(n));
    // Occurrences ending before the last token (so at least one token follows), latest first.
    for (std::ptrdiff_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + start)) continue;
      const std::ptrdiff_t from = start + n;
      const std::ptrdiff_t to = std::min<std::ptrdiff_t>(size, from + options.max_tokens);
      return {history.begin() + from, history.begin() + to};
    }
  }
  return {};
}

}  // namespace selfspec
