// The average cosine similarity (ACS) of each attention sublayer over a prompt (Draft on the Fly
// §3.2): with X^l_s and Y^l_s the residual stream of token s entering and leaving layer l's
// attention sublayer,
//   C_l = (1/S) Σ_s <X^l_s, Y^l_s> / (‖X^l_s‖₂ ‖Y^l_s‖₂).
// The accumulator is fed by a ForwardObserver (model/llama_model.hpp: "embed", then per layer
// "attn_out" and "mlp_out", each the residual after that sublayer): the input of layer l's
// attention is "embed" for l = 0 and layer l-1's "mlp_out" after that. It keeps one layer's input
// rows (the model updates the residual in place) and sums per-token cosines in double, token by
// token in prompt order, so a prompt prefilled in chunks gives the same sums as in one forward.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace selfspec {

class AttentionCosineAccumulator {
 public:
  // Forgets everything: a new prompt for a model of `num_layers` layers.
  void reset(int num_layers);
  // One observed intermediate, as a ForwardObserver receives it ([n_tokens × hidden] rows).
  // Throws selfspec::Error if an "attn_out" arrives without its input, or with another shape.
  void observe(std::string_view name, int layer, std::span<const float> data,
               std::int64_t n_tokens);

  // Tokens whose every attention sublayer has been seen (S).
  std::int64_t tokens() const;
  // C_l for every layer. Throws selfspec::Error before any token was seen.
  std::vector<double> averages() const;

 private:
  std::vector<double> sums_;          // Σ_s cos per layer
  std::vector<std::int64_t> counts_;  // tokens seen per layer
  std::vector<float> input_;          // the rows entering layer input_layer_'s attention
  int input_layer_ = -1;
};

// cos(x, y) in double; 1 when both vectors are zero (nothing changed), 0 when only one is.
double cosine_similarity(std::span<const float> x, std::span<const float> y);

}  // namespace selfspec
