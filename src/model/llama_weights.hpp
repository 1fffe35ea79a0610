// The weights one tensor-parallel rank holds: its slices of every matrix (see shard_plan.hpp),
// copied out of the memory-mapped checkpoint once at load, in the checkpoint's dtype or converted
// to a requested one. Norm weights and biases are kept in f32.
#pragma once

#include "core/aligned_buffer.hpp"
#include "core/dtype.hpp"
#include "kernels/cpu/matmul.hpp"
#include "model/model_config.hpp"
#include "model/safetensors.hpp"
#include "model/shard_plan.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace selfspec {

struct Matrix {
  DType dtype = DType::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  AlignedBuffer<std::byte> data;

  kernels::cpu::WeightView view() const { return {dtype, data.data(), rows, cols}; }
  std::uint64_t bytes() const {
    return static_cast<std::uint64_t>(rows * cols) * dtype_size(dtype);
  }
};

struct LayerWeights {
  std::vector<float> attention_norm;
  std::vector<float> mlp_norm;
  Matrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;  // empty unless attention_bias (this rank's slices)
  std::vector<float> bo;          // o_proj bias (LLaMA with attention_bias): full, added once
                                  // after the all-reduce
  Matrix w_gate, w_up, w_down;
};

struct LlamaWeights {
  Matrix embedding;  // vocab rows of this rank
  Matrix lm_head;    // vocab rows of this rank; empty when tied (use embedding)
  bool tied = false;
  std::vector<float> final_norm;
  std::vector<LayerWeights> layers;

  const Matrix& output_matrix() const { return tied ? embedding : lm_head; }
  // Bytes of this rank's weights in memory.
  std::uint64_t bytes() const;
  std::uint64_t layer_bytes(std::size_t layer) const;

  // Checks every tensor name and shape of the checkpoint against the config (errors name the
  // tensor and file), then loads this rank's slices. convert_to = nullopt keeps stored dtypes.
  static LlamaWeights load(const Checkpoint& checkpoint, const ModelConfig& config,
                           const ShardPlan& plan, std::optional<DType> convert_to);
};

// The HF tensor names of a LLaMA-family checkpoint and their expected shapes under `config`.
struct ExpectedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  bool required = true;
};
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

// Validates names and shapes of a checkpoint against a config without loading anything.
void validate_checkpoint(const Checkpoint& checkpoint, const ModelConfig& config);

}  // namespace selfspec
