// SWIFT's on-the-fly skip-set search (Xia et al., ICLR 2025, §4.1 "optimization phase", App. B.2):
// no offline search. During generation, before each drafting round, one optimisation step scores
// a candidate skip set by matchness (§4.1 eq. 3) — one parallel forward of the candidate plan over
// the last γ tokens the target produced, compared with those tokens
// (DraftContext::score_plan) — and the best-scoring set so far drafts from the next round on.
// Candidates keep the skip ratio r fixed: random sets, with a Gaussian-process Bayesian step every
// β steps (optim/binary_bayes_optimizer.hpp, fed every step's score: the "Gaussian update" of
// Fig. 4). The search starts from uniform skipping at ratio r (§4.1) and stops for good when the
// best matchness reaches the stop score, after S steps, after `patience` steps without
// improvement (App. B.2: 300), or when every set of that size has been scored; then drafting
// continues with the best set ("acceleration phase"). The drafter keeps its state across requests,
// as SWIFT's layer set carries over between instances of a task.
//
// Tensor parallelism: rank 0 runs the optimiser; at each step it shares {search or stop,
// candidate mask} with every rank through the context, every rank runs the scoring forward, and
// the chosen plan travels in the control message like any round's plan. Drafts are chains.
#pragma once

#include "draft/drafter.hpp"
#include "draft/skip_search_space.hpp"
#include "optim/binary_bayes_optimizer.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace selfspec {

struct SwiftOptions {
  double skip_ratio = 0.45;      // r: share of the 2L sublayers a draft skips (App. B.2, 13B)
  int window = 32;               // γ: tokens matchness is scored over
  int bayes_every = 25;          // β: a Bayesian step every β optimisation steps
  int max_steps = 1000;          // S
  int patience = 300;            // steps without improvement before the search stops
  double stop_matchness = 0.93;  // the search stops once the best set scores this much
  int min_window = 8;            // no step before the target has produced this many tokens
  std::uint64_t seed = 0;

  // Throws selfspec::Error naming the option (--swift-...) for a value out of range.
  void validate() const;
};

class SwiftDrafter final : public Drafter {
 public:
  // Throws for fewer than 3 layers, or a ratio that skips no searchable sublayer.
  SwiftDrafter(int num_layers, SwiftOptions options);

  std::string_view name() const override { return "swift"; }
  DraftPlan next_plan() override { return {best_plan_}; }
  void propose(DraftContext& context, Draft& draft) override;

  // Rank 0: the search's progress, for reports.
  nlohmann::json state() const override;
  bool searching() const { return searching_; }
  const LayerPlan& best_plan() const { return best_plan_; }
  double best_matchness() const { return best_score_; }

 private:
  // Collective: one optimisation step (or the step that ends the search).
  void optimisation_step(DraftContext& context);
  // Rank 0: why the search should stop now, or "" to go on.
  std::string stop_reason() const;

  SwiftOptions options_;
  SkipSearchSpace space_;
  BinaryBayesOptimizer optimizer_;
  bool searching_ = true;
  LayerPlan best_plan_;
  double best_score_ = -1.0;
  int since_improvement_ = 0;
  std::vector<MaskObservation> history_;  // rank 0
  std::string stopped_because_;
};

}  // namespace selfspec
