// Layer-skip drafting with one fixed skip set (Draft & Verify §3.1: the draft is the target model
// with a subset of its 2L attention/MLP sublayers bypassed; the set comes from a file, CLI lists or
// the uniform generator, draft/skip_set.hpp). Drafts are chains.
#pragma once

#include "draft/drafter.hpp"
#include "model/layer_plan.hpp"

#include <string>
#include <utility>

namespace selfspec {

class LayerSkipDrafter final : public Drafter {
 public:
  LayerSkipDrafter(LayerPlan plan, std::string name)
      : plan_(std::move(plan)), name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  DraftPlan next_plan() override { return {plan_}; }

 private:
  LayerPlan plan_;
  std::string name_;
};

}  // namespace selfspec
