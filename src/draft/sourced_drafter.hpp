// SourcedDrafter: draft sources tried in order beside the model's own draft (llama.cpp's
// common_speculative implementations; LLMA §2.2 and prompt lookup decoding for lookups; beyond the
// seeds). Before each round rank 0 asks each source (draft/draft_source.hpp; lookup drafts are
// one) for a chain continuing the sequence; the first that proposes is the round's source. Rank 0
// decides and every rank receives the tokens (DraftContext::share), so all ranks verify the same
// draft. Two ways to use a proposal:
//   alone (the default): the source drafts the round, a chain verified like any other with no
//     draft forward at all, marked as such (Draft::mark_lookup); rounds without a proposal are
//     the model drafter's (a skip set, an early-exit or feature head, SWIFT, --draft-weights, or
//     plain steps), as it would draft alone.
//   tree (--lookup-tree; issue 36's "draft sources as branches of one tree", in the spirit of
//     SpecInfer's merged token trees, Miao et al. 2024 §3): the model drafter drafts every round,
//     and the proposal is grafted onto its draft as a branch of one token tree: its tokens follow
//     the model's nodes while they agree, and continue as sourced nodes (Draft::add_sourced, point
//     masses) from the first that differs. One verification forward checks both; a round whose
//     model draft is empty is the source's alone.
// The proposal's length follows the source's running acceptance (min_reach): rank 0 keeps, per
// source and depth d, how often the target accepted token d of a proposal once it had accepted
// the tokens before it, and proposes token d only while the estimated chance of accepting every
// token up to d (the product of those rates, each (accepted + 1) / (offered + 2)) is at least
// min_reach. The draft-length controller and the model's drafter learn only from the model's
// nodes.
#pragma once

#include "draft/draft_source.hpp"
#include "draft/drafter.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace selfspec {

// How a SourcedDrafter uses its sources' proposals (see the top comment).
struct SourcedDrafterOptions {
  bool tree = false;       // graft proposals onto the model's draft (false: they draft alone)
  double min_reach = 0.0;  // propose token d while its estimated chance of acceptance is this
  void validate() const;   // throws selfspec::Error unless min_reach is in [0, 1]
};

class SourcedDrafter final : public Drafter {
 public:
  SourcedDrafter(std::vector<std::unique_ptr<DraftSource>> sources,
                 std::unique_ptr<Drafter> model_drafter, SourcedDrafterOptions options = {});

  std::string_view name() const override { return name_; }
  const ForwardObserver* begin_request(std::int64_t prompt_tokens) override {
    return model_drafter_->begin_request(prompt_tokens);
  }
  DraftPlan next_plan() override { return model_drafter_->next_plan(); }
  // The model's drafter sees every verification, a source's rounds included (a feature head
  // reads the target's features of every committed token).
  const ForwardObserver* verification_observer() override {
    return model_drafter_->verification_observer();
  }
  void verified(const Draft& draft, const Verdict& verdict) override {
    model_drafter_->verified(draft, verdict);
  }
  void propose(DraftContext& context, Draft& draft) override;
  void observe(const Draft& draft, const Verdict& verdict) override;
  // Sources propose point masses (the verifier walks warped distributions under sampling).
  bool point_mass_drafts() const override { return !sources_.empty(); }
  // {"<source>": {"rounds", "drafted", "accepted", "tree_rounds", "sourced_nodes",
  //  "sourced_accepted" (its nodes that were not the model's, and those accepted), "reach": the
  //  estimated chance of accepting every token up to each depth, its settings...} per source,
  //  "fallback": the model drafter's state}.
  nlohmann::json state() const override;

 private:
  struct Counts {
    std::int64_t rounds = 0;    // rank 0: rounds the source proposed in, its tokens in the draft,
    std::int64_t drafted = 0;   // those the target accepted, and of the rounds those grafted
    std::int64_t accepted = 0;  // onto a model draft
    std::int64_t tree_rounds = 0;
    std::int64_t sourced = 0;  // its sourced nodes (tree rounds), and those accepted
    std::int64_t sourced_accepted = 0;
    // Per depth d: rounds whose draft held token d after accepted tokens 0..d-1, and those
    // accepting it.
    std::array<std::int64_t, DraftSource::kMaxTokens> offered{};
    std::array<std::int64_t, DraftSource::kMaxTokens> taken{};
    double reach(int depth) const;  // the estimated chance of accepting tokens 0..depth
  };
  // Rank 0: how many of `proposed` tokens source `source` may propose now (min_reach).
  int reachable(int source, int proposed) const;
  // Every rank: grafts the proposal onto the model's draft; returns the proposal tokens it holds.
  int graft(Draft& draft, int node_room) const;
  // Rank 0: a source's round's statistics, from the committed tokens.
  void count_source_round(const Draft& draft, const Verdict& verdict);

  std::vector<std::unique_ptr<DraftSource>> sources_;
  std::unique_ptr<Drafter> model_drafter_;
  SourcedDrafterOptions options_;
  std::string name_;
  std::vector<std::int32_t> history_;   // rank 0's scratch
  std::vector<Counts> counts_;          // one per source
  int last_source_ = -1;                // the source of the round being verified (-1: none)
  std::vector<std::int32_t> proposed_;  // its proposal, as every rank received it
  int placed_ = 0;                      // the proposal's tokens the draft holds
  int model_nodes_ = 0;                 // the draft's nodes the model drafted (tree rounds)
};

}  // namespace selfspec
