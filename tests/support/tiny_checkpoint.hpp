// Tiny checkpoints written by the tests themselves (the suite downloads nothing): seeded random
// weights from the test's own generator (std::mt19937_64, uniform), rounded to the storage dtype,
// written as config.json + safetensors through the engine's writer, and returned as the
// ReferenceWeights the oracle uses (the exact stored values, in double).
#pragma once

#include "core/dtype.hpp"
#include "model_io/model_config.hpp"
#include "tests/support/reference_llama.hpp"

#include <cstdint>
#include <filesystem>
#include <string>

namespace selfspec::testing {

struct TinyModelSpec {
  std::string model_type = "llama";  // llama: attention_bias covers q/k/v/o; qwen2: q/k/v
  std::int64_t layers = 2;
  std::int64_t hidden = 32;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 4;
  std::int64_t head_dim = 0;  // 0: hidden / heads
  std::int64_t intermediate = 48;
  std::int64_t vocab = 64;
  std::int64_t max_position = 256;
  bool tie = false;
  bool attention_bias = false;
  RopeScaling rope_scaling;
  double rope_theta = 10000.0;
  DType dtype = DType::kF32;
  std::uint64_t seed = 1;
  std::uint64_t max_shard_bytes = 0;
  // Spread of the weights: larger values give peakier, less uniform next-token distributions.
  double scale = 1.0;
};

ModelConfig tiny_config(const TinyModelSpec& spec);

// Writes the checkpoint into dir and returns the weights it holds.
ReferenceWeights write_tiny_checkpoint(const TinyModelSpec& spec, const std::filesystem::path& dir);

}  // namespace selfspec::testing
