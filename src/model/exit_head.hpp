// An early-exit head (EESD, seed 002 §3.1): one extra transformer layer, the model's own layer
// architecture with its own weights, that turns the residual stream after the model's first N
// layers into a draft (then the model's final norm and shared LM head). The draft of a token costs
// N + 1 layers. Trained by scripts/train_exit_head.py on data from `selfspec collect-exit-data`;
// the file format is a single .safetensors (tensors "exit_layer.<HF layer suffix>", metadata
// format / model_identity / exit_layer / hidden_size / num_layers; docs/ARCHITECTURE.md).
//
// load_exit_head checks the file against the model (identity, sizes, N in [1, L-1], every tensor's
// presence and shape) and loads this rank's slices, sharded like any layer, in the requested
// format (load_layer_weights: a quantized one quantizes the trained f32 layer at load).
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

struct ExitHead {
  std::filesystem::path path;
  int exit_layer = 0;  // N: the head follows the model's layers [0, N)
  std::map<std::string, std::string> metadata;
  LayerWeights weights;
};

// What the file says, without loading weights (every rank may call it).
struct ExitHeadInfo {
  int exit_layer = 0;
  std::string model_identity;
  std::map<std::string, std::string> metadata;
};
ExitHeadInfo read_exit_head_info(const std::filesystem::path& path);

// Throws selfspec::Error naming the file and the field or tensor when the head does not fit the
// model (`identity`: model_io/model_identity.hpp's).
ExitHead load_exit_head(const std::filesystem::path& path, const ModelConfig& config,
                        const std::string& identity, const ShardPlan& plan,
                        std::optional<WeightFormat> convert_to, Backend& backend);

}  // namespace selfspec
