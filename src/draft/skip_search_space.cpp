// The search space of a skip-set search: see skip_search_space.hpp.
#include "draft/skip_search_space.hpp"

#include "core/error.hpp"

namespace selfspec {

SkipSearchSpace::SkipSearchSpace(int num_layers) : num_layers_(num_layers) {
  SELFSPEC_CHECK(num_layers >= 3 && num_layers <= LayerPlan::kMaxLayers,
                 "a skip-set search needs 3 to {} layers (the first and last always run), the "
                 "model has {}",
                 LayerPlan::kMaxLayers, num_layers);
}

LayerPlan SkipSearchSpace::plan(const BinaryMask& mask) const {
  SELFSPEC_CHECK(static_cast<int>(mask.size()) == dims(), "skip mask has {} entries, expected {}",
                 mask.size(), dims());
  LayerPlan plan = LayerPlan::full(num_layers_);
  const int interior = num_layers_ - 2;
  for (int i = 0; i < interior; ++i) {
    if (mask[static_cast<std::size_t>(i)] != 0) plan.set_attention(i + 1, false);
    if (mask[static_cast<std::size_t>(interior + i)] != 0) plan.set_mlp(i + 1, false);
  }
  return plan;
}

BinaryMask SkipSearchSpace::mask(const LayerPlan& plan) const {
  SELFSPEC_CHECK(plan.num_layers() == num_layers_, "plan has {} layers, the search {}",
                 plan.num_layers(), num_layers_);
  for (int l : {0, num_layers_ - 1}) {
    SELFSPEC_CHECK(plan.runs_attention(l) && plan.runs_mlp(l),
                   "the plan skips a sublayer of layer {}, which the search keeps", l);
  }
  const int interior = num_layers_ - 2;
  BinaryMask mask(static_cast<std::size_t>(dims()), 0);
  for (int i = 0; i < interior; ++i) {
    mask[static_cast<std::size_t>(i)] = plan.runs_attention(i + 1) ? 0 : 1;
    mask[static_cast<std::size_t>(interior + i)] = plan.runs_mlp(i + 1) ? 0 : 1;
  }
  return mask;
}

}  // namespace selfspec
