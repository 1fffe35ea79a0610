// The model files an early-exit trainer starts from, written beside the training data (issue 11's
// formats): init_layer.safetensors — layer N's weights in F32 under the exit head's names
// ("exit_layer." + the HF layer suffix) with an exit head's metadata, the untrained head (for
// N = L, a feature-level head's data, the last layer's weights) — and frozen.safetensors — the
// final RMSNorm ("model.norm.weight", F32) and the LM head ("lm_head.weight", BF16; the embedding
// when tied), which the draft shares with the model, and with `with_embedding` an untied model's
// token embedding ("model.embed_tokens.weight", BF16; a feature-level head reads it).
// Whole tensors are read from the model's TensorSource (Engine::with_tensor_source), on rank 0.
#pragma once

#include "model_io/model_config.hpp"
#include "model_io/tensor_source.hpp"

#include <filesystem>
#include <string>

namespace selfspec {

// The exit head's layer suffixes a model with `config` has, in the format's order (biases only
// when the architecture has them).
std::vector<std::string> exit_layer_suffixes(const ModelConfig& config);

void write_init_layer(const TensorSource& source, const ModelConfig& config, int exit_layer,
                      const std::string& model_identity, const std::filesystem::path& path);

void write_frozen_tensors(const TensorSource& source, const ModelConfig& config,
                          const std::filesystem::path& path, bool with_embedding = false);

}  // namespace selfspec
