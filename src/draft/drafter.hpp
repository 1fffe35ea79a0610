// A drafter decides, on rank 0, how the next self-speculative draft is computed: as a LayerPlan
// (which attention/MLP sublayers the draft forward runs) that travels to every rank in the
// control message, so all ranks skip the same sublayers and their collectives stay matched.
// One implementation per file: LayerSkipDrafter (a fixed skip set: Draft & Verify §3.1); later
// drafters (cosine-similarity selection, SWIFT's on-the-fly search) change the plan between rounds.
#pragma once

#include "model/layer_plan.hpp"

#include <string>
#include <string_view>

namespace selfspec {

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string_view name() const = 0;
  // The plan of the next drafting round.
  virtual const LayerPlan& next_plan() = 0;
  // Feedback after each verification: `drafted` tokens proposed, `accepted` accepted.
  virtual void observe(int drafted, int accepted) {
    (void)drafted;
    (void)accepted;
  }
};

// Drafts with one fixed layer-skip plan.
class LayerSkipDrafter final : public Drafter {
 public:
  LayerSkipDrafter(LayerPlan plan, std::string name)
      : plan_(std::move(plan)), name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  const LayerPlan& next_plan() override { return plan_; }

 private:
  LayerPlan plan_;
  std::string name_;
};

}  // namespace selfspec
