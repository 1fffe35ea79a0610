#include "model/layer_plan.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace selfspec {

LayerPlan LayerPlan::full(int num_layers) {
  SELFSPEC_CHECK(num_layers >= 0 && num_layers <= kMaxLayers,
                 "a model with {} layers exceeds the supported maximum of {}", num_layers,
                 kMaxLayers);
  LayerPlan plan;
  plan.num_layers_ = num_layers;
  return plan;
}

LayerPlan LayerPlan::skipping(int num_layers, std::span<const int> attention,
                              std::span<const int> mlp) {
  LayerPlan plan = full(num_layers);
  for (int layer : attention) {
    SELFSPEC_CHECK(layer >= 0 && layer < num_layers,
                   "attention layer index {} to skip is outside [0, {})", layer, num_layers);
    plan.set_attention(layer, false);
  }
  for (int layer : mlp) {
    SELFSPEC_CHECK(layer >= 0 && layer < num_layers,
                   "MLP layer index {} to skip is outside [0, {})", layer, num_layers);
    plan.set_mlp(layer, false);
  }
  return plan;
}

void LayerPlan::check_layer(int layer) const {
  SELFSPEC_CHECK(layer >= 0 && layer < num_layers_, "layer {} is outside [0, {})", layer,
                 num_layers_);
}

void LayerPlan::set_attention(int layer, bool run) {
  check_layer(layer);
  skip_attention_[static_cast<std::size_t>(layer)] = !run;
}

void LayerPlan::set_mlp(int layer, bool run) {
  check_layer(layer);
  skip_mlp_[static_cast<std::size_t>(layer)] = !run;
}

int LayerPlan::skipped_count() const {
  return static_cast<int>(skip_attention_.count() + skip_mlp_.count());
}

std::vector<int> LayerPlan::skipped_attention() const {
  std::vector<int> layers;
  for (int l = 0; l < num_layers_; ++l) {
    if (!runs_attention(l)) layers.push_back(l);
  }
  return layers;
}

std::vector<int> LayerPlan::skipped_mlp() const {
  std::vector<int> layers;
  for (int l = 0; l < num_layers_; ++l) {
    if (!runs_mlp(l)) layers.push_back(l);
  }
  return layers;
}

std::string LayerPlan::describe() const {
  if (is_full()) return "full";
  return fmt::format("attn[{}] mlp[{}]", fmt::join(skipped_attention(), ","),
                     fmt::join(skipped_mlp(), ","));
}

void LayerPlan::to_mask(std::span<std::uint64_t, kMaskWords> words) const {
  for (auto& word : words) word = 0;
  for (int l = 0; l < num_layers_; ++l) {
    const auto bit = std::uint64_t{1} << (l % 64);
    if (!runs_attention(l)) words[static_cast<std::size_t>(l / 64)] |= bit;
    if (!runs_mlp(l)) words[static_cast<std::size_t>(kMaskWords / 2 + l / 64)] |= bit;
  }
}

LayerPlan LayerPlan::from_mask(int num_layers, std::span<const std::uint64_t, kMaskWords> words) {
  LayerPlan plan = full(num_layers);
  for (int l = 0; l < num_layers; ++l) {
    const auto bit = std::uint64_t{1} << (l % 64);
    if (words[static_cast<std::size_t>(l / 64)] & bit) plan.set_attention(l, false);
    if (words[static_cast<std::size_t>(kMaskWords / 2 + l / 64)] & bit) plan.set_mlp(l, false);
  }
  return plan;
}

}  // namespace selfspec
