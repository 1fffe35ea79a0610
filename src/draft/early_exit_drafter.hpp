// Early-exit drafting (EESD, seed 002 §3.1): each draft token runs the model's first N layers, then
// the attached exit head's trained layer, then the shared final norm and LM head
// (model/exit_head.hpp; LlamaModel's early-exit forward). The drafter only tells the loop to draft
// that way: N travels to every rank in rank 0's control message (`exit_layer`), so all ranks run
// the same early-exit forward and their collectives stay matched. Chains or token trees, any
// controller, greedy or sampling: verification is unchanged, so the output is too.
#pragma once

#include "draft/drafter.hpp"
#include "model/layer_plan.hpp"

#include <string>

namespace selfspec {

class EarlyExitDrafter final : public Drafter {
 public:
  // num_layers: the model's; exit_layer: the head's N (1 <= N < num_layers).
  EarlyExitDrafter(int num_layers, int exit_layer, std::string head);
  std::string_view name() const override { return "early-exit"; }
  DraftPlan next_plan() override { return {plan_, exit_layer_}; }
  nlohmann::json state() const override;

 private:
  LayerPlan plan_;
  int exit_layer_;
  std::string head_;
};

}  // namespace selfspec
