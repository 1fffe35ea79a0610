#include "draft/attention_cosine.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>

namespace selfspec {

double cosine_similarity(std::span<const float> x, std::span<const float> y) {
  double dot = 0.0;
  double xx = 0.0;
  double yy = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    dot += static_cast<double>(x[i]) * y[i];
    xx += static_cast<double>(x[i]) * x[i];
    yy += static_cast<double>(y[i]) * y[i];
  }
  if (xx == 0.0 || yy == 0.0) return xx == yy ? 1.0 : 0.0;
  return dot / (std::sqrt(xx) * std::sqrt(yy));
}

void AttentionCosineAccumulator::reset(int num_layers) {
  sums_.assign(static_cast<std::size_t>(num_layers), 0.0);
  counts_.assign(static_cast<std::size_t>(num_layers), 0);
  input_.clear();
  input_layer_ = -1;
}

void AttentionCosineAccumulator::observe(std::string_view name, int layer,
                                         std::span<const float> data, std::int64_t n_tokens) {
  const int layers = static_cast<int>(sums_.size());
  if (name == "embed" || name == "mlp_out") {
    // The residual entering the next layer's attention (none after the last layer).
    input_layer_ = layer + 1;
    if (input_layer_ < layers) input_.assign(data.begin(), data.end());
    return;
  }
  if (name != "attn_out") return;
  SELFSPEC_CHECK(layer >= 0 && layer < layers,
                 "attention cosine: layer {} outside the model's {} layers", layer, layers);
  SELFSPEC_CHECK(input_layer_ == layer && input_.size() == data.size() && n_tokens > 0,
                 "attention cosine: layer {}'s attention output ({} values) arrived without its "
                 "input ({} values of layer {})",
                 layer, data.size(), input_.size(), input_layer_);
  const std::size_t hidden = data.size() / static_cast<std::size_t>(n_tokens);
  const std::span<const float> input(input_);
  double& sum = sums_[static_cast<std::size_t>(layer)];  // token by token: chunking-invariant
  for (std::size_t t = 0; t < static_cast<std::size_t>(n_tokens); ++t) {
    sum += cosine_similarity(input.subspan(t * hidden, hidden), data.subspan(t * hidden, hidden));
  }
  counts_[static_cast<std::size_t>(layer)] += n_tokens;
  input_layer_ = -1;
}

std::int64_t AttentionCosineAccumulator::tokens() const {
  if (counts_.empty()) return 0;
  return *std::min_element(counts_.begin(), counts_.end());
}

std::vector<double> AttentionCosineAccumulator::averages() const {
  SELFSPEC_CHECK(tokens() > 0, "attention cosine: no prompt token was observed");
  std::vector<double> averages(sums_.size());
  for (std::size_t l = 0; l < sums_.size(); ++l) {
    averages[l] = sums_[l] / static_cast<double>(counts_[l]);
  }
  return averages;
}

}  // namespace selfspec
