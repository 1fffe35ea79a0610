// Seeded random checkpoints in the HuggingFace layout (config.json + safetensors), written by
// `selfspec make-model` for demos, benchmarks and tests. Every tensor's values depend only on the
// seed and the tensor's name (a per-tensor Boost.Random stream), so a checkpoint is reproducible
// bit for bit and its tensors can be generated in any order.
//
// Initialisation keeps a deep random network numerically tame: projections ~ N(0, 1/fan_in),
// output projections (o_proj, down_proj) further scaled by 1/sqrt(2 L) so the residual stream
// stays O(1), embeddings ~ N(0, 1), norm weights = 1, biases ~ N(0, 0.02²).
#pragma once

#include "core/dtype.hpp"
#include "model/model_config.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace selfspec {

struct SyntheticModelSpec {
  ModelConfig config;
  DType dtype = DType::kBF16;
  std::uint64_t seed = 0;
  std::uint64_t max_shard_bytes = 0;  // 0: a single model.safetensors
  // Per-layer multipliers of the attention output projection (o_proj) and the MLP output
  // projection (down_proj): a sublayer scaled towards zero barely changes the residual stream
  // (planted redundancy). Empty: 1 everywhere.
  std::vector<double> attention_scale;
  std::vector<double> mlp_scale;
  // Multiplier of the LM head: larger values give peakier next-token distributions.
  double lm_head_scale = 1.0;
};

// A llama ModelConfig with the given geometry and defaults for everything else.
ModelConfig make_synthetic_config(std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                                  std::int64_t kv_heads, std::int64_t intermediate,
                                  std::int64_t vocab);

// Writes config.json and the safetensors file(s) into `dir` (created if needed).
// Returns the bytes of weights written.
std::uint64_t write_synthetic_model(const SyntheticModelSpec& spec,
                                    const std::filesystem::path& dir);

// The f32 values of one tensor of a synthetic model (before rounding to the storage dtype).
std::vector<float> synthetic_tensor_values(const SyntheticModelSpec& spec, const std::string& name,
                                           std::int64_t numel);

}  // namespace selfspec
