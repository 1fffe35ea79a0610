// What one tensor-parallel rank needs in memory, computed from the config alone (no weights
// read): its weight slices, its KV cache at a context length, and the bytes a decode step reads.
#pragma once

#include "core/dtype.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_config.hpp"

#include <cstdint>

namespace selfspec {

struct RankMemory {
  std::uint64_t weight_bytes = 0;    // every slice this rank holds
  std::uint64_t kv_cache_bytes = 0;  // KV cache (f32) at the given context length
  // Weight bytes one decode step reads: everything except the embedding table, of which only one
  // row per token is read (the LM head is read in full; with tied embeddings it is the same
  // matrix, read once by the LM head).
  std::uint64_t decode_weight_bytes = 0;
};

RankMemory plan_rank_memory(const ModelConfig& config, const ShardPlan& shard, DType weight_dtype,
                            std::int64_t context);

// Weight bytes of one layer's sublayers on one rank: what a forward that runs the sublayer reads
// and a draft that skips it does not (each with its RMSNorm weight, f32, and its biases).
struct LayerWeightBytes {
  // wq, wk, wv, wo (this rank's heads), the attention norm, q/k/v/o biases
  std::uint64_t attention = 0;
  // gate, up, down (this rank's intermediate features), the MLP norm
  std::uint64_t mlp = 0;
};

LayerWeightBytes plan_layer_weight_bytes(const ModelConfig& config, const ShardPlan& shard,
                                         DType weight_dtype);

// Bytes of the forward's activation buffers on one rank (LlamaModel's workspace, f32) for
// forwards of up to `tokens` tokens (the prefill chunk, or K + 1 for verification) that produce
// logits for up to `logit_rows` positions.
std::uint64_t plan_workspace_bytes(const ModelConfig& config, const ShardPlan& shard,
                                   std::int64_t tokens, std::int64_t logit_rows);

}  // namespace selfspec
