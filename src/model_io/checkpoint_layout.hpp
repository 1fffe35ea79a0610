// The tensor layout of a LLaMA-family HuggingFace checkpoint: the tensor names and the shapes a
// config implies, and the check of a checkpoint against them (every expected tensor present with
// its shape, nothing unexpected but computed buffers such as rotary_emb.inv_freq). Used before
// any weight is read, by the loader, `selfspec info` and the synthetic weights.
#pragma once

#include "model_io/model_config.hpp"
#include "model_io/safetensors.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

// "model.layers.<layer>.<suffix>".
std::string layer_tensor_name(std::int64_t layer, std::string_view suffix);

// The HF tensor names of a LLaMA-family checkpoint and their expected shapes under `config`.
struct ExpectedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  bool required = true;
};
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

// Validates names and shapes of a checkpoint against a config without loading anything. Errors
// name the tensor and the file.
void validate_checkpoint(const Checkpoint& checkpoint, const ModelConfig& config);

}  // namespace selfspec
