// PlainStepDrafter: drafts nothing. Each of its rounds is one plain decode step (an empty draft:
// the verification forward over the last committed token alone), so behind draft sources
// (SourcedDrafter; --spec lookup) the only drafts are the sources', and a round without one costs
// exactly what plain decoding costs.
#pragma once

#include "draft/drafter.hpp"

namespace selfspec {

class PlainStepDrafter final : public Drafter {
 public:
  explicit PlainStepDrafter(int num_layers) : plan_{LayerPlan::full(num_layers), -1} {}
  std::string_view name() const override { return "plain"; }
  DraftPlan next_plan() override { return plan_; }
  void propose(DraftContext& context, Draft& draft) override {
    (void)context;
    (void)draft;
  }

 private:
  DraftPlan plan_;
};

}  // namespace selfspec
