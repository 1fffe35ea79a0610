#include "draft/sourced_drafter.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cstring>

namespace selfspec {
namespace {

// Rank 0's proposal, as it travels to every rank: which source, its tokens (at most
// DraftContext::draft_room, so no deeper than a path may reach), and the most nodes the round's
// draft may hold (DraftContext::node_room, known on rank 0 only).
struct SourceProposal {
  std::int32_t source = -1;  // -1: no source proposed; the model drafts
  std::int32_t count = 0;
  std::int32_t node_room = 0;
  std::array<std::int32_t, DraftSource::kMaxTokens> tokens{};
};

}  // namespace

void SourcedDrafterOptions::validate() const {
  SELFSPEC_CHECK(min_reach >= 0.0 && min_reach <= 1.0,
                 "--lookup-min-reach must be in [0, 1] (got {})", min_reach);
}

double SourcedDrafter::Counts::reach(int depth) const {
  double chance = 1.0;
  for (int d = 0; d <= depth; ++d) {
    const auto i = static_cast<std::size_t>(d);
    chance *= static_cast<double>(taken[i] + 1) / static_cast<double>(offered[i] + 2);
  }
  return chance;
}

SourcedDrafter::SourcedDrafter(std::vector<std::unique_ptr<DraftSource>> sources,
                               std::unique_ptr<Drafter> model_drafter,
                               SourcedDrafterOptions options)
    : sources_(std::move(sources)), model_drafter_(std::move(model_drafter)), options_(options) {
  SELFSPEC_CHECK(model_drafter_ != nullptr,
                 "a sourced drafter needs the model's drafter for rounds no source drafts");
  options_.validate();
  for (const auto& source : sources_) {
    SELFSPEC_CHECK(source != nullptr, "a draft source is null");
    name_ += std::string(source->name()) + "+";
  }
  name_ += std::string(model_drafter_->name());
  counts_.resize(sources_.size());
}

int SourcedDrafter::reachable(int source, int proposed) const {
  if (options_.min_reach <= 0.0) return proposed;
  const Counts& counts = counts_[static_cast<std::size_t>(source)];
  int kept = 0;
  while (kept < proposed && counts.reach(kept) >= options_.min_reach) ++kept;
  return kept;
}

void SourcedDrafter::propose(DraftContext& context, Draft& draft) {
  SourceProposal proposal;
  if (context.is_root() && !sources_.empty()) {
    context.history(history_);
    const int room = std::min(context.draft_room(), DraftSource::kMaxTokens);
    proposal.node_room = context.node_room();
    for (std::size_t i = 0; i < sources_.size() && proposal.count == 0; ++i) {
      const std::vector<std::int32_t> tokens = sources_[i]->propose(history_, room);
      SELFSPEC_CHECK(static_cast<int>(tokens.size()) <= room,
                     "draft source '{}' proposed {} tokens with room for {}", sources_[i]->name(),
                     tokens.size(), room);
      const int kept = reachable(static_cast<int>(i), static_cast<int>(tokens.size()));
      if (kept == 0) continue;
      proposal.source = static_cast<std::int32_t>(i);
      proposal.count = static_cast<std::int32_t>(kept);
      std::copy_n(tokens.begin(), kept, proposal.tokens.begin());
    }
  }
  if (!sources_.empty()) context.share(std::as_writable_bytes(std::span(&proposal, 1)));
  SELFSPEC_CHECK(proposal.count >= 0 && proposal.count <= DraftSource::kMaxTokens &&
                     proposal.source < static_cast<std::int32_t>(sources_.size()),
                 "source draft: {} tokens of source {} from rank 0", proposal.count,
                 proposal.source);
  last_source_ = proposal.count > 0 ? proposal.source : -1;
  proposed_.assign(proposal.tokens.begin(), proposal.tokens.begin() + proposal.count);
  placed_ = 0;
  model_nodes_ = 0;
  if (proposal.count == 0 || options_.tree) model_drafter_->propose(context, draft);
  if (proposal.count == 0) return;
  model_nodes_ = draft.size();
  if (!draft.empty()) {
    placed_ = graft(draft, proposal.node_room);
    return;
  }
  // The source drafts the round alone: a chain, with no draft forward.
  int parent = Draft::kRoot;
  for (const std::int32_t token : proposed_) parent = draft.add(token, parent, 1.0);
  placed_ = proposal.count;
  draft.mark_lookup();
}

int SourcedDrafter::graft(Draft& draft, int node_room) const {
  // The proposal follows the model's nodes while they carry its tokens; from the first it does
  // not find there on, its tokens are sourced nodes, as many as the round's room leaves (its
  // length already keeps every token within a path's reach).
  int node = Draft::kRoot;
  int placed = 0;
  for (const std::int32_t token : proposed_) {
    const int child = draft.child_with(node, token);
    if (child != Draft::kRoot) {
      node = child;
    } else if (draft.size() < node_room) {
      node = draft.add_sourced(token, node);
    } else {
      break;
    }
    ++placed;
  }
  return placed;
}

void SourcedDrafter::observe(const Draft& draft, const Verdict& verdict) {
  if (last_source_ >= 0) count_source_round(draft, verdict);
  if (draft.from_lookup()) return;
  if (last_source_ < 0 || draft.sourced() == 0) {
    model_drafter_->observe(draft, verdict);
    return;
  }
  // The model's drafter sees its own nodes (they come first) and the target's token after the
  // last of them that was accepted.
  Verdict own;
  std::size_t i = 0;
  for (; i < verdict.accepted.size() && verdict.accepted[i] < model_nodes_; ++i) {
    own.accepted.push_back(verdict.accepted[i]);
  }
  own.next_token =
      i < verdict.accepted.size() ? draft.token(verdict.accepted[i]) : verdict.next_token;
  own.kv_length = verdict.kv_length;
  model_drafter_->observe(draft.prefix(model_nodes_), own);
}

void SourcedDrafter::count_source_round(const Draft& draft, const Verdict& verdict) {
  // The committed tokens: the accepted path, then the target's own token.
  std::vector<std::int32_t> committed;
  for (const int node : verdict.accepted) committed.push_back(draft.token(node));
  committed.push_back(verdict.next_token);
  Counts& counts = counts_[static_cast<std::size_t>(last_source_)];
  ++counts.rounds;
  counts.tree_rounds += draft.from_lookup() ? 0 : 1;
  counts.drafted += placed_;
  counts.sourced += draft.sourced();
  for (const int node : verdict.accepted) counts.sourced_accepted += draft.is_sourced(node) ? 1 : 0;
  for (int d = 0; d < placed_; ++d) {
    const auto j = static_cast<std::size_t>(d);
    ++counts.offered[j];
    if (j >= committed.size() || committed[j] != proposed_[j]) break;
    ++counts.taken[j];
    ++counts.accepted;
  }
}

nlohmann::json SourcedDrafter::state() const {
  nlohmann::json out = {{"fallback", model_drafter_->state()}};
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    nlohmann::json entry = sources_[i]->settings();
    const Counts& counts = counts_[i];
    entry["rounds"] = counts.rounds;
    entry["drafted"] = counts.drafted;
    entry["accepted"] = counts.accepted;
    entry["tree"] = options_.tree;
    entry["tree_rounds"] = counts.tree_rounds;
    entry["sourced_nodes"] = counts.sourced;
    entry["sourced_accepted"] = counts.sourced_accepted;
    entry["min_reach"] = options_.min_reach;
    nlohmann::json reach = nlohmann::json::array();
    for (int d = 0; d < DraftSource::kMaxTokens && counts.offered[static_cast<std::size_t>(d)] > 0;
         ++d) {
      reach.push_back(counts.reach(d));
    }
    entry["reach"] = std::move(reach);
    out[std::string(sources_[i]->name())] = std::move(entry);
  }
  return out;
}

}  // namespace selfspec
