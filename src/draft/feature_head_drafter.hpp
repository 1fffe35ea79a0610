// Feature-level drafting (EAGLE, arXiv 2401.15077 §3; beyond the seeds): a trained head
// (model/feature_head.hpp) drafts from the target's own final hidden states instead of running
// any of its layers. Row i of the head reads h_i, the final residual stream at position i, and the
// token x_{i+1}; its output o_i estimates h_{i+1}, whose LM head gives the draft of x_{i+2}. So:
//
//   committed rows  the target's h_i of every committed position, captured from the prefill and
//                   each verification forward ("final_residual": the verdict's accepted rows,
//                   on every rank), wait in `pending` until the next round's first draft step
//                   writes them into the head's KV cache layer, at their positions, in one
//                   forward (chunked like a prefill) whose last row — (h_{n-1}, root x_n) —
//                   drafts x_{n+1}
//   deeper steps    each reads the head's own previous output o and the token it drafted
//                   (EAGLE's feature autoregression) at the next position; those cache rows are
//                   draft rows, rewritten by the next round's committed rows
//
// A round's tree is its drawn chain with each step's alternatives as siblings (the default
// propose's shape). Every rank keeps the same state: the rows it sees are the replicated residual
// stream, and the tokens are rank 0's (the draft, the verdict), so all ranks run the same
// forwards. Verification is unchanged, so greedy output stays token-identical and sampled output
// keeps the target's distribution.
#pragma once

#include "draft/drafter.hpp"
#include "model/layer_plan.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace selfspec {

class FeatureHeadDrafter final : public Drafter {
 public:
  // num_layers / hidden_size: the model's; head: the head's file, for reports.
  FeatureHeadDrafter(int num_layers, std::int64_t hidden_size, std::string head);
  FeatureHeadDrafter(const FeatureHeadDrafter&) = delete;
  FeatureHeadDrafter& operator=(const FeatureHeadDrafter&) = delete;

  std::string_view name() const override { return "feature-head"; }
  const ForwardObserver* begin_request(std::int64_t prompt_tokens) override;
  DraftPlan next_plan() override { return {plan_, -1}; }
  void propose(DraftContext& context, Draft& draft) override;
  const ForwardObserver* verification_observer() override { return &keep_verification_; }
  void verified(const Draft& draft, const Verdict& verdict) override;
  nlohmann::json state() const override;

 private:
  // Appends rows [first, first + count) of `rows` ([n × hidden]) to pending_.
  void add_pending(std::span<const float> rows, std::int64_t first, std::int64_t count);
  // Adds one drafted step (its token and alternatives) under `parent`; returns the new node.
  static int add_step(Draft& draft, const DraftStep& step, int parent);

  std::int64_t hidden_;
  LayerPlan plan_;
  std::string head_;
  std::int64_t head_length_ = 0;     // committed positions whose rows are in the head's cache
  std::vector<float> pending_;       // h of positions [head_length_, ...), row-major
  std::vector<float> verification_;  // the last verification forward's final residual rows
  std::vector<float> output_;        // the head's last output row (o), which the next step reads
  std::vector<float> input_;         // the row the current deeper step reads
  std::vector<std::int32_t> history_, tokens_, positions_;
  std::int64_t rounds_ = 0;  // drafted rounds, and rows of committed features the head read
  std::int64_t committed_rows_ = 0;
  ForwardObserver keep_prompt_, keep_verification_, keep_output_;
};

}  // namespace selfspec
