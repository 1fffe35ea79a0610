#include "draft/lookup_drafter.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace selfspec {
namespace {

// Rank 0's lookup, as it travels to every rank.
struct LookupProposal {
  std::int32_t count = 0;
  std::array<std::int32_t, LookupDrafter::kMaxTokens> tokens{};
};

}  // namespace

LookupDrafter::LookupDrafter(std::unique_ptr<Drafter> fallback, NgramLookupOptions options)
    : fallback_(std::move(fallback)), options_(options) {
  SELFSPEC_CHECK(fallback_ != nullptr, "a lookup drafter needs a drafter for rounds without match");
  SELFSPEC_CHECK(options_.max_tokens >= 1 && options_.max_tokens <= kMaxTokens,
                 "--lookup-max-draft {} is outside [1, {}]", options_.max_tokens, kMaxTokens);
  options_.validate();
  name_ = "lookup+" + std::string(fallback_->name());
}

void LookupDrafter::propose(DraftContext& context, Draft& draft) {
  LookupProposal proposal;
  if (context.is_root()) {
    NgramLookupOptions options = options_;
    options.max_tokens = std::min(options.max_tokens, context.draft_room());
    context.history(history_);
    const std::vector<std::int32_t> tokens = ngram_lookup(history_, options);
    proposal.count = static_cast<std::int32_t>(tokens.size());
    std::copy(tokens.begin(), tokens.end(), proposal.tokens.begin());
  }
  context.share(std::as_writable_bytes(std::span(&proposal, 1)));
  SELFSPEC_CHECK(proposal.count >= 0 && proposal.count <= kMaxTokens,
                 "lookup draft: {} tokens from rank 0", proposal.count);
  if (proposal.count == 0) {
    fallback_->propose(context, draft);
    return;
  }
  int parent = Draft::kRoot;
  for (std::int32_t i = 0; i < proposal.count; ++i) {
    parent = draft.add(proposal.tokens[static_cast<std::size_t>(i)], parent, 1.0);
  }
  draft.mark_lookup();
}

void LookupDrafter::observe(const Draft& draft, const Verdict& verdict) {
  if (!draft.from_lookup()) {
    fallback_->observe(draft, verdict);
    return;
  }
  ++rounds_;
  drafted_ += draft.size();
  accepted_ += verdict.accepted_count();
}

nlohmann::json LookupDrafter::state() const {
  return {{"lookup",
           {{"rounds", rounds_},
            {"drafted", drafted_},
            {"accepted", accepted_},
            {"max_ngram", options_.max_ngram},
            {"min_ngram", options_.min_ngram},
            {"max_tokens", options_.max_tokens}}},
          {"fallback", fallback_->state()}};
}

}  // namespace selfspec
