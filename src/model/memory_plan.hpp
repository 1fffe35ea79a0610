// What one tensor-parallel rank needs in memory, computed from the config and the weights' formats
// alone (no weights read): its weight slices, its KV cache at a context length, and the bytes a
// decode step reads.
#pragma once

#include "core/dtype.hpp"
#include "core/weight_format.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_config.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace selfspec {

// The format a weight matrix is held in, by its HF tensor name ("model.layers.3.mlp.down_proj.
// weight"): one dense dtype for every matrix, or per tensor as a GGUF file stores it.
using WeightFormatOf = std::function<WeightFormat(const std::string& hf_name)>;
WeightFormatOf uniform_format(DType dtype);

// Bytes of a rank's slice [rows × cols] of a matrix held in `format`: dense formats row-major
// (the CPU backend's bf16 panels add a 64-byte header and pad the rows to 16, which this leaves
// out), quantized formats in the CPU backend's panels (kernels/cpu/packed_weights.hpp, headers
// and padding included); `col_begin` is where the slice starts in the full matrix (a quantized
// slice's segments follow it).
std::uint64_t matrix_slice_bytes(WeightFormat format, std::int64_t rows, std::int64_t cols,
                                 std::int64_t col_begin);

// The format a matrix slice of `cols` columns asked for in quantized `format` is made in at load
// (llama_weights.hpp's load_layer_weights, before it asks whether the backend runs it): the
// request where the columns are whole blocks of it, else q8_0 where they are whole blocks of 32,
// else bf16.
WeightFormat requantized_slice_format(WeightFormat format, std::int64_t cols);

struct RankMemory {
  std::uint64_t weight_bytes = 0;    // every slice this rank holds
  std::uint64_t kv_cache_bytes = 0;  // KV cache (in its dtype) at the given context length
  // Weight bytes one decode step reads: everything except the embedding table, of which only one
  // row per token is read (the LM head is read in full; with tied embeddings it is the same
  // matrix, read once by the LM head).
  std::uint64_t decode_weight_bytes = 0;
  // weight_bytes by format ("q4_k", "bf16"; norms and biases as "f32").
  std::map<std::string, std::uint64_t> weight_bytes_by_format;
};

// kv_dtype: the KV cache's element type (f32 or bf16).
RankMemory plan_rank_memory(const ModelConfig& config, const ShardPlan& shard,
                            const WeightFormatOf& format_of, std::int64_t context,
                            DType kv_dtype = DType::kF32);

// Bytes of one rank's draft copy of the weights in `format` (llama_weights.hpp's DraftWeights:
// every layer's matrices, each slice in requantized_slice_format, its norms and biases, and the
// output projection), which --draft-weights adds to the rank's memory.
std::uint64_t plan_draft_weight_bytes(const ModelConfig& config, const ShardPlan& shard,
                                      WeightFormat format);

// Weight bytes of one layer's sublayers on one rank: what a forward that runs the sublayer reads
// and a draft that skips it does not (each with its RMSNorm weight, f32, and its biases).
struct LayerWeightBytes {
  // wq, wk, wv, wo (this rank's heads), the attention norm, q/k/v/o biases
  std::uint64_t attention = 0;
  // gate, up, down (this rank's intermediate features), the MLP norm
  std::uint64_t mlp = 0;
};

// Every layer's (layers can differ: a Q4_K_M file keeps some down_proj in Q6_K).
std::vector<LayerWeightBytes> plan_layer_weight_bytes(const ModelConfig& config,
                                                      const ShardPlan& shard,
                                                      const WeightFormatOf& format_of);
// The same for the layers of a draft copy in `format` (plan_draft_weight_bytes).
std::vector<LayerWeightBytes> plan_draft_layer_weight_bytes(const ModelConfig& config,
                                                            const ShardPlan& shard,
                                                            WeightFormat format);

// Bytes of the forward's activation buffers on one rank (LlamaModel's workspace, f32) for
// forwards of up to `tokens` tokens (the prefill chunk, or K + 1 for verification) that produce
// logits for up to `logit_rows` positions.
std::uint64_t plan_workspace_bytes(const ModelConfig& config, const ShardPlan& shard,
                                   std::int64_t tokens, std::int64_t logit_rows);

}  // namespace selfspec
