// What a draft forward reads besides its tokens, as one value (Draft & Verify §3.1's skipped
// sublayers, EESD §3.1's early exit, the model in fewer bits, a pruned LM head): the layer plan,
// whether it exits after the plan's first N layers into the attached exit head, whether it reads
// the attached quantized copy of the weights, and the draft vocabulary. DraftForward{} is the full
// model: every sublayer, no exit, the target's weights, the full head. A run's GenerationOptions
// carries the weights and the vocabulary; each round's plan and exit come from the drafter's
// DraftPlan, and the loop puts the four together in ForwardArgs::draft.
#pragma once

namespace selfspec {

class DraftVocabulary;
class LayerPlan;

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
};

}  // namespace selfspec
