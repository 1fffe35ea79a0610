#include "draft/lookup_source.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace selfspec {
namespace {

class LookupSource final : public DraftSource {
 public:
  explicit LookupSource(const NgramLookupOptions& options) : options_(options) {
    SELFSPEC_CHECK(options_.max_tokens >= 1 && options_.max_tokens <= kMaxTokens,
                   "--lookup-max-draft {} is outside [1, {}]", options_.max_tokens, kMaxTokens);
    options_.validate();
  }

  std::string_view name() const override { return "lookup"; }

  std::vector<std::int32_t> propose(std::span<const std::int32_t> history, int room) override {
    NgramLookupOptions options = options_;
    options.max_tokens = std::min(options.max_tokens, room);
    if (options.max_tokens < 1) return {};
    return ngram_lookup(history, options);
  }

  nlohmann::json settings() const override {
    return {{"max_ngram", options_.max_ngram},
            {"min_ngram", options_.min_ngram},
            {"max_tokens", options_.max_tokens}};
  }

 private:
  NgramLookupOptions options_;
};

}  // namespace

std::unique_ptr<DraftSource> make_lookup_source(const NgramLookupOptions& options) {
  return std::make_unique<LookupSource>(options);
}

}  // namespace selfspec
