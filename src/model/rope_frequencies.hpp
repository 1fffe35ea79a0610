// RoPE inverse frequencies for a model, with rope_scaling applied, following HuggingFace's
// modeling_rope_utils: default (theta^(-2i/d)), "linear" (divided by factor) and "llama3"
// (low frequencies divided by factor, high frequencies kept, a smooth blend in between; the
// wavelength thresholds come from original_max_position_embeddings / {low,high}_freq_factor).
// Computed in double, stored as f32 (HF computes in f32; differences are below an f32 ulp of the
// angle for the positions we support).
#pragma once

#include "model_io/model_config.hpp"

#include <vector>

namespace selfspec {

std::vector<float> rope_inverse_frequencies(const ModelConfig& config);

}  // namespace selfspec
