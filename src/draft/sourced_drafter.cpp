#include "draft/sourced_drafter.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace selfspec {
namespace {

// Rank 0's proposal, as it travels to every rank: which source, and its tokens.
struct SourceProposal {
  std::int32_t source = -1;  // -1: no source proposed; the model drafts
  std::int32_t count = 0;
  std::array<std::int32_t, DraftSource::kMaxTokens> tokens{};
};

}  // namespace

SourcedDrafter::SourcedDrafter(std::vector<std::unique_ptr<DraftSource>> sources,
                               std::unique_ptr<Drafter> model_drafter)
    : sources_(std::move(sources)), model_drafter_(std::move(model_drafter)) {
  SELFSPEC_CHECK(model_drafter_ != nullptr,
                 "a sourced drafter needs the model's drafter for rounds no source drafts");
  for (const auto& source : sources_) {
    SELFSPEC_CHECK(source != nullptr, "a draft source is null");
    name_ += std::string(source->name()) + "+";
  }
  name_ += std::string(model_drafter_->name());
  counts_.resize(sources_.size());
}

void SourcedDrafter::propose(DraftContext& context, Draft& draft) {
  SourceProposal proposal;
  if (context.is_root() && !sources_.empty()) {
    context.history(history_);
    const int room = std::min(context.draft_room(), DraftSource::kMaxTokens);
    for (std::size_t i = 0; i < sources_.size() && proposal.count == 0; ++i) {
      const std::vector<std::int32_t> tokens = sources_[i]->propose(history_, room);
      SELFSPEC_CHECK(static_cast<int>(tokens.size()) <= room,
                     "draft source '{}' proposed {} tokens with room for {}", sources_[i]->name(),
                     tokens.size(), room);
      if (tokens.empty()) continue;
      proposal.source = static_cast<std::int32_t>(i);
      proposal.count = static_cast<std::int32_t>(tokens.size());
      std::copy(tokens.begin(), tokens.end(), proposal.tokens.begin());
    }
  }
  if (!sources_.empty()) context.share(std::as_writable_bytes(std::span(&proposal, 1)));
  SELFSPEC_CHECK(proposal.count >= 0 && proposal.count <= DraftSource::kMaxTokens &&
                     proposal.source < static_cast<std::int32_t>(sources_.size()),
                 "source draft: {} tokens of source {} from rank 0", proposal.count,
                 proposal.source);
  last_source_ = proposal.count > 0 ? proposal.source : -1;
  if (proposal.count == 0) {
    model_drafter_->propose(context, draft);
    return;
  }
  int parent = Draft::kRoot;
  for (std::int32_t i = 0; i < proposal.count; ++i) {
    parent = draft.add(proposal.tokens[static_cast<std::size_t>(i)], parent, 1.0);
  }
  draft.mark_lookup();
}

void SourcedDrafter::observe(const Draft& draft, const Verdict& verdict) {
  if (!draft.from_lookup()) {
    model_drafter_->observe(draft, verdict);
    return;
  }
  SELFSPEC_CHECK(last_source_ >= 0, "a source's draft observed without its source");
  Counts& counts = counts_[static_cast<std::size_t>(last_source_)];
  ++counts.rounds;
  counts.drafted += draft.size();
  counts.accepted += verdict.accepted_count();
}

nlohmann::json SourcedDrafter::state() const {
  nlohmann::json out = {{"fallback", model_drafter_->state()}};
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    nlohmann::json entry = sources_[i]->settings();
    entry["rounds"] = counts_[i].rounds;
    entry["drafted"] = counts_[i].drafted;
    entry["accepted"] = counts_[i].accepted;
    out[std::string(sources_[i]->name())] = std::move(entry);
  }
  return out;
}

}  // namespace selfspec
