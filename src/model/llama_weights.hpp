// The weights one tensor-parallel rank holds: its slices of every matrix (see shard_plan.hpp),
// copied out of the memory-mapped checkpoint once at load into the backend's memory (host for the
// CPU backend — read straight in —, device for CUDA — through a host staging buffer), in the
// checkpoint's dtype or converted to a requested one. Norm weights and biases are kept in f32.
#pragma once

#include "backend/backend.hpp"
#include "core/dtype.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_config.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/tensor_source.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

struct Matrix {
  DType dtype = DType::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  DeviceBuffer data;

  BackendWeight view() const { return {dtype, data.data(), rows, cols}; }
  std::uint64_t bytes() const {
    return static_cast<std::uint64_t>(rows * cols) * dtype_size(dtype);
  }
};

// An f32 vector in backend memory (norm weights, biases); empty when absent.
struct Vector {
  DeviceBuffer data;
  std::int64_t size = 0;
  const float* ptr() const { return data.as<const float>(); }
  bool empty() const { return size == 0; }
  std::uint64_t bytes() const { return static_cast<std::uint64_t>(size) * sizeof(float); }
};

struct LayerWeights {
  Vector attention_norm;
  Vector mlp_norm;
  Matrix wq, wk, wv, wo;
  Vector bq, bk, bv;  // empty unless attention_bias (this rank's slices)
  Vector bo;          // o_proj bias (LLaMA with attention_bias): full, added once after the
                      // all-reduce
  Matrix w_gate, w_up, w_down;
};

// One layer's slices for this rank, tensors named name_of("input_layernorm.weight") etc. (HF
// layer suffixes), checked against the config's shapes by the source.
LayerWeights load_layer_weights(const TensorSource& source,
                                const std::function<std::string(std::string_view)>& name_of,
                                const ModelConfig& config, const ShardPlan& plan,
                                std::optional<DType> convert_to, Backend& backend);
// Bytes of one layer's weights in memory.
std::uint64_t layer_weight_bytes(const LayerWeights& layer);

struct LlamaWeights {
  Matrix embedding;  // vocab rows of this rank
  Matrix lm_head;    // vocab rows of this rank; empty when tied (use embedding)
  bool tied = false;
  Vector final_norm;
  std::vector<LayerWeights> layers;

  const Matrix& output_matrix() const { return tied ? embedding : lm_head; }
  // Bytes of this rank's weights in memory.
  std::uint64_t bytes() const;
  std::uint64_t layer_bytes(std::size_t layer) const;

  // Checks every tensor name and shape of the source against the config (errors name the
  // tensor and file), then loads this rank's slices into `backend` memory. convert_to = nullopt
  // keeps stored dtypes.
  static LlamaWeights load(const TensorSource& source, const ModelConfig& config,
                           const ShardPlan& plan, std::optional<DType> convert_to,
                           Backend& backend);
  static LlamaWeights load(const Checkpoint& checkpoint, const ModelConfig& config,
                           const ShardPlan& plan, std::optional<DType> convert_to,
                           Backend& backend) {
    return load(CheckpointSource(checkpoint), config, plan, convert_to, backend);
  }
};

}  // namespace selfspec
