// The weights one tensor-parallel rank holds: its slices of every matrix (see shard_plan.hpp),
// read out of the memory-mapped checkpoint once at load into a host staging buffer and handed to
// the backend, which keeps them in its memory and layout (Backend::make_weight). Each matrix is
// in the checkpoint's encoding or converted to a requested dtype: with no dtype requested, a
// GGUF's quantized tensors stay quantized where the backend runs their format ("native" weights;
// a slice that does not fall on 32-column boundaries, or a backend that cannot run the format,
// gets bf16 instead, with a notice). Norm weights and biases are kept in f32.
#pragma once

#include "backend/backend.hpp"
#include "core/dtype.hpp"
#include "core/weight_format.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_config.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/tensor_source.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

struct Matrix {
  WeightFormat format = WeightFormat::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  DeviceBuffer data;  // the backend's layout for the format

  BackendWeight view() const { return {format, data.data(), rows, cols}; }
  // Bytes the backend holds (what a forward that uses the matrix streams).
  std::uint64_t bytes() const { return data.bytes(); }
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
// layer suffixes), checked against the config's shapes by the source. convert_to: nullopt keeps
// the stored encoding, a dense format converts, a quantized format quantizes each slice at load
// (ggml_quantize.hpp; a K format over a slice that is not whole super-blocks is made q8_0, and a
// backend that runs neither gets bf16, with a notice).
LayerWeights load_layer_weights(const TensorSource& source,
                                const std::function<std::string(std::string_view)>& name_of,
                                const ModelConfig& config, const ShardPlan& plan,
                                std::optional<WeightFormat> convert_to, Backend& backend);
// One matrix or vector out of `source` outside a model layer (a feature head's replicated fc): the
// rows and columns given, in `convert_to` as load_layer_weights takes it; vectors in f32.
Matrix load_matrix_slice(const TensorSource& source, const std::string& name, IndexRange rows,
                         IndexRange cols, std::optional<WeightFormat> convert_to, Backend& backend);
Vector load_vector_slice(const TensorSource& source, const std::string& name, IndexRange range,
                         Backend& backend);
// Bytes of one layer's weights in memory.
std::uint64_t layer_weight_bytes(const LayerWeights& layer);

// This rank's vocabulary rows of the output projection: lm_head.weight, or the embedding when the
// config ties them, in `convert_to` as load_layer_weights takes it.
Matrix load_output_matrix(const TensorSource& source, const ModelConfig& config,
                          const ShardPlan& plan, std::optional<WeightFormat> convert_to,
                          Backend& backend);

// The model drafting as itself in fewer bits (beyond the seeds; cf. QSpec, QuantSpec): a second
// copy of this rank's layer matrices and output projection, quantized (or converted) to `format`
// at load, which draft forwards read in place of the target's (ForwardArgs::draft_weights).
// Verification keeps the target's weights, so the output is unchanged. The embedding lookup, the
// norms and the biases stay the target's (a copy of the norms and biases rides along in `layers`;
// they are a few KB).
struct DraftWeights {
  WeightFormat format = WeightFormat::kQ8_0;  // as requested (a slice may fall back: notices)
  std::vector<LayerWeights> layers;
  Matrix output;

  // Bytes of the copy in memory (what plan adds for it).
  std::uint64_t bytes() const;
};

DraftWeights load_draft_weights(const TensorSource& source, const ModelConfig& config,
                                const ShardPlan& plan, WeightFormat format, Backend& backend);

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
  // Bytes of this rank's matrices per format ("q4_k" -> bytes), norms and biases as "f32".
  std::map<std::string, std::uint64_t> bytes_by_format() const;

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
