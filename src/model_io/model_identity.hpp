// A model's identity for files made for one model only (early-exit heads and their training
// data): a 64-bit FNV-1a hash of the architecture (model type, sizes, RoPE θ, RMSNorm ε, biases,
// tied embeddings), of the final RMSNorm's weights and of the first and last embedding rows, read
// as f32, as 16 hex digits. These weights tell apart fine-tunes of one architecture; reading them
// costs 3 × hidden_size values, so the identity is cheap even for a 70B checkpoint. Equal for every
// rank and every format that carries the same values (a GGUF file and the safetensors it came from
// share it when the norm weights are stored exactly).
#pragma once

#include "model_io/model_config.hpp"
#include "model_io/tensor_source.hpp"

#include <string>

namespace selfspec {

std::string model_identity(const TensorSource& source, const ModelConfig& config);

}  // namespace selfspec
