// A feature-level draft head (EAGLE, arXiv 2401.15077 §3; beyond the seeds): it drafts from the
// target's own top-layer features instead of an early layer's. Row i reads the final residual
// stream h_i (the target's, or the head's own previous output while drafting) and the embedding
// of the token after it:
//   u_i = fc_feature · n(h_i) + fc_embedding · E(x_{i+1}) + fc_bias     (n: the final RMSNorm)
//   o_i = Layer(u_i)          (one transformer layer of the model's architecture, at position i,
//                              attending over the head's own KV cache)
// and o_i estimates h_{i+1}: the model's final norm and LM head on it give the draft of x_{i+2}.
// Trained by scripts/train_feature_head.py on data collected at --exit-layer L; the file is one
// .safetensors: "feature_head.fc.weight" [H, 2H], "feature_head.fc.bias" [H] and
// "feature_head.layer.<HF layer suffix>", metadata format "selfspec-feature-head", version 1,
// model_identity, hidden_size, num_layers.
//
// load_feature_head checks the file against the model and loads fc whole on every rank (it is
// H × 2H, replicated: every rank computes the same u) and the layer sharded like any layer.
#pragma once

#include "backend/backend.hpp"
#include "model/llama_weights.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_config.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace selfspec {

struct FeatureHead {
  std::filesystem::path path;
  std::map<std::string, std::string> metadata;
  Matrix fc_feature;    // [H, H]: fc's columns [0, H), over n(h)
  Matrix fc_embedding;  // [H, H]: fc's columns [H, 2H), over E(x)
  Vector fc_bias;       // [H]
  LayerWeights layer;   // this rank's slices

  // Bytes of this rank's copy in memory.
  std::uint64_t bytes() const;
};

// What the file says, without loading weights (every rank may call it): its metadata, checked
// for the format and version.
std::map<std::string, std::string> read_feature_head_metadata(const std::filesystem::path& path);

// Throws selfspec::Error naming the file and the field or tensor when the head does not fit the
// model (`identity`: model_io/model_identity.hpp's).
FeatureHead load_feature_head(const std::filesystem::path& path, const ModelConfig& config,
                              const std::string& identity, const ShardPlan& plan,
                              std::optional<WeightFormat> convert_to, Backend& backend);

}  // namespace selfspec
