// Draft on the Fly (Metel et al., "Adaptive Self-Speculative Decoding", §3 and Algorithm 1): no
// search and no training — per request, the prompt's own prefill is the calibration set. While the
// prompt goes through the full model, the drafter measures each attention sublayer's average
// cosine similarity between the residual stream entering and leaving it (§3.2, C_l:
// draft/attention_cosine.hpp); once the prefill is done, Algorithm 1 (ADMG:
// draft/adaptive_draft_model.hpp) turns C into the skip set — attention sublayers with C_l ≥ α,
// every m-th whole layer, never the last n layers — and the request drafts chains with it to the
// end. Every rank observes the prefill (the residual stream is bit-identical on every rank), but
// only rank 0 decides: the plan travels in its control message like any drafter's.
#pragma once

#include "draft/adaptive_draft_model.hpp"
#include "draft/attention_cosine.hpp"
#include "draft/drafter.hpp"
#include "draft/skip_set.hpp"
#include "model/layer_plan.hpp"

#include <optional>
#include <vector>

namespace selfspec {

class CosineSkipDrafter final : public Drafter {
 public:
  // Throws selfspec::Error when `params` are invalid for `num_layers` layers.
  CosineSkipDrafter(int num_layers, AsdParams params);

  std::string_view name() const override { return "asd"; }
  // Every rank: forgets the last request and returns the observer that measures C_l.
  const ForwardObserver* begin_request(std::int64_t prompt_tokens) override;
  // Rank 0: the first call after the prefill applies Algorithm 1; later calls return that plan.
  DraftPlan next_plan() override;
  // {"alpha", "m", "n", "prompt_tokens", "acs": [C_l per layer], "skip_set": {...},
  //  "skipped_sublayers"}; null before the plan is decided.
  nlohmann::json state() const override;

  // The request's C_l and skip set, once next_plan() decided them.
  const std::vector<double>& acs() const { return acs_; }
  const std::optional<SkipSet>& skip_set() const { return skips_; }

 private:
  int num_layers_;
  AsdParams params_;
  AttentionCosineAccumulator accumulator_;
  ForwardObserver observer_;
  std::vector<double> acs_;
  std::optional<SkipSet> skips_;
  LayerPlan plan_;
};

}  // namespace selfspec
