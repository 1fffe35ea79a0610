// The search space of a skip-set search (Draft & Verify §3.3: the 2L attention/MLP sublayers,
// each skipped or not): a 0/1 mask over the sublayers of the interior layers 1 … L−2 — the first
// and last layers always run (they matter most for the embedding and the logits, and every seed
// paper keeps them). Bit i < L−2 is layer i+1's attention, bit L−2+i is layer i+1's MLP.
#pragma once

#include "model/layer_plan.hpp"
#include "optim/binary_bayes_optimizer.hpp"

namespace selfspec {

class SkipSearchSpace {
 public:
  // Throws selfspec::Error unless 3 <= num_layers <= LayerPlan::kMaxLayers.
  explicit SkipSearchSpace(int num_layers);

  int num_layers() const { return num_layers_; }
  int dims() const { return 2 * (num_layers_ - 2); }
  LayerPlan plan(const BinaryMask& mask) const;
  // Throws when the plan skips a sublayer of the first or last layer or has another layer count.
  BinaryMask mask(const LayerPlan& plan) const;

 private:
  int num_layers_;
};

}  // namespace selfspec
