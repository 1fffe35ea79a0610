#include "model/attention_mask.hpp"

#include "core/error.hpp"

namespace selfspec {

AttentionMask AttentionMask::tree(std::int64_t n_tokens, std::vector<std::uint8_t> ancestors) {
  SELFSPEC_CHECK(n_tokens > 0 && static_cast<std::int64_t>(ancestors.size()) == n_tokens * n_tokens,
                 "tree mask: expected {} x {} entries, got {}", n_tokens, n_tokens,
                 ancestors.size());
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    SELFSPEC_CHECK(ancestors[static_cast<std::size_t>(t * n_tokens + t)] == 1,
                   "tree mask: token {} must see itself", t);
    for (std::int64_t j = t + 1; j < n_tokens; ++j) {
      SELFSPEC_CHECK(ancestors[static_cast<std::size_t>(t * n_tokens + j)] == 0,
                     "tree mask: token {} may not see the later token {}", t, j);
    }
  }
  AttentionMask mask;
  mask.n_tokens_ = n_tokens;
  mask.ancestors_ = std::move(ancestors);
  return mask;
}

}  // namespace selfspec
