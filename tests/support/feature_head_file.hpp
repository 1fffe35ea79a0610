// Feature-level head files (model/feature_head.hpp's format) made by the tests themselves: fc =
// [I | r] with r and the bias seeded uniform in ±spread, and the model's last layer's weights (the
// trainer's starting point), all F32. Options spoil the file for the loader's error tests. And the
// two forwards the head's tests compare: the target's rows the head reads, the head's logits.
#pragma once

#include "model/llama_model.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace selfspec::testing {

struct FeatureHeadFile {
  std::uint64_t seed = 1;
  double spread = 0.1;
  // Metadata set after the defaults (format, version, model_identity, hidden_size, num_layers).
  std::map<std::string, std::string> metadata;
  std::string omit;          // a tensor left out
  std::int64_t fc_cols = 0;  // 0: 2H
};

struct FeatureHeadValues {
  std::filesystem::path path;
  std::vector<float> fc;    // [H × 2H], row-major
  std::vector<float> bias;  // [H]
};

// Writes the head for the tiny checkpoint in `checkpoint_dir` (a model of `config`) to `path`.
FeatureHeadValues write_feature_head(const std::filesystem::path& checkpoint_dir,
                                     const ModelConfig& config, const std::filesystem::path& path,
                                     const FeatureHeadFile& options = {});

// The target's final residual rows [T × H] ("final_residual") of `tokens`, in a fresh cache.
std::vector<float> final_residual_rows(LlamaModel& model, std::span<const std::int32_t> tokens);

// The logits [T × V_local] of every row of a feature forward (ForwardArgs::draft.features) of
// `tokens` at positions first, first + 1, ... reading `features` [T × H], over `kv` from slot
// `first`.
std::vector<float> feature_forward_logits(LlamaModel& model, KvCache& kv,
                                          std::span<const float> features,
                                          std::span<const std::int32_t> tokens, std::int64_t first);

// Writes <dir>/feature_head.safetensors and attaches it (f32) to the model loaded from `dir`.
FeatureHeadValues attach_feature_head(LlamaModel& model, const std::filesystem::path& dir,
                                      std::uint64_t seed = 1);

}  // namespace selfspec::testing
