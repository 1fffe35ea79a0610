// What a draft forward reads besides its tokens, as one value (Draft & Verify §3.1's skipped
// sublayers, EESD §3.1's early exit, the model in fewer bits, a pruned LM head): the layer plan,
// whether it exits after the plan's first N layers into the attached exit head, whether it reads
// the attached quantized copy of the weights, and the draft vocabulary. DraftForward{} is the full
// model: every sublayer, no exit, the target's weights, the full head. A run's GenerationOptions
// carries the weights and the vocabulary; each round's plan and exit come from the drafter's
// DraftPlan, and the loop puts the four together in ForwardArgs::draft. A feature-level draft
// (EAGLE §3) runs no model layer at all: the attached feature head on the target's features
// (FeatureRows).
#pragma once

#include <cstdint>
#include <span>

namespace selfspec {

class DraftVocabulary;
class LayerPlan;

// The rows a feature-level draft forward reads (model/feature_head.hpp): for each of its tokens,
// the final residual stream h of the row before (the target's, or the head's own last output),
// [tokens × hidden] in host memory. The head writes its K/V at slots [first_slot, first_slot + T)
// of its cache layer, which for one sequence are the rows' positions (committed slot = position).
struct FeatureRows {
  std::span<const float> rows;
  std::int64_t first_slot = 0;
};

struct DraftForward {
  const LayerPlan* plan = nullptr;  // nullptr: every sublayer
  // The model's layers [0, N) under `plan`, then the attached exit head's layer, the final norm
  // and the LM head. Needs an attached head and a KV cache made with its layer.
  bool early_exit = false;
  // The attached quantized copy (LlamaModel::attach_draft_weights) in place of the layer matrices
  // and output projection; the exit head and a pruned head keep their own weights.
  bool draft_weights = false;
  // nullptr: the full LM head. Otherwise the logits of the kept ids only, -inf elsewhere (the
  // vocabulary must have been built for this model).
  const DraftVocabulary* vocabulary = nullptr;
  // Not null: the attached feature head instead of the model's layers (FeatureRows above): the
  // forward leaves the KV cache's length alone; `plan` and `early_exit` must be unset.
  const FeatureRows* features = nullptr;
};

}  // namespace selfspec
