#include "model/memory_plan.hpp"

#include "model/kv_cache.hpp"

namespace selfspec {

LayerWeightBytes plan_layer_weight_bytes(const ModelConfig& config, const ShardPlan& shard,
                                         DType weight_dtype) {
  const auto w = static_cast<std::uint64_t>(dtype_size(weight_dtype));
  const auto hidden = static_cast<std::uint64_t>(config.hidden_size);
  const auto hd = static_cast<std::uint64_t>(config.head_dim);
  const auto q = static_cast<std::uint64_t>(shard.q_heads.size()) * hd;
  const auto kv = static_cast<std::uint64_t>(shard.kv_heads.size()) * hd;
  const auto inter = static_cast<std::uint64_t>(shard.intermediate.size());

  LayerWeightBytes bytes;
  bytes.attention = (q * hidden + 2 * kv * hidden + hidden * q) * w + hidden * sizeof(float);
  if (config.attention_bias) bytes.attention += (q + 2 * kv) * sizeof(float);
  if (config.o_proj_bias()) bytes.attention += hidden * sizeof(float);
  bytes.mlp = 3 * inter * hidden * w + hidden * sizeof(float);
  return bytes;
}

RankMemory plan_rank_memory(const ModelConfig& config, const ShardPlan& shard, DType weight_dtype,
                            std::int64_t context) {
  const auto w = static_cast<std::uint64_t>(dtype_size(weight_dtype));
  const auto hidden = static_cast<std::uint64_t>(config.hidden_size);
  const auto vocab = static_cast<std::uint64_t>(shard.vocab.size());

  const LayerWeightBytes layer = plan_layer_weight_bytes(config, shard, weight_dtype);
  const std::uint64_t layers =
      (layer.attention + layer.mlp) * static_cast<std::uint64_t>(config.num_layers);
  const std::uint64_t table = vocab * hidden * w;
  const std::uint64_t final_norm = hidden * sizeof(float);

  RankMemory memory;
  memory.weight_bytes = layers + table + (config.tie_word_embeddings ? 0 : table) + final_norm;
  memory.decode_weight_bytes = layers + table + final_norm;
  memory.kv_cache_bytes =
      KvCache::bytes_for(config.num_layers, shard.kv_heads.size(), config.head_dim, context);
  return memory;
}

std::uint64_t plan_workspace_bytes(const ModelConfig& config, const ShardPlan& shard,
                                   std::int64_t tokens, std::int64_t logit_rows) {
  // The buffers LlamaModel::forward sizes per call (llama_model.cpp): x, h, o (hidden each); q and
  // the attention output (local query heads); k, v (local KV heads); gate, up (local
  // intermediate); and the logits of the requested rows over the local vocabulary.
  const auto t = static_cast<std::uint64_t>(tokens);
  const auto hd = static_cast<std::uint64_t>(config.head_dim);
  const std::uint64_t per_token = 3 * static_cast<std::uint64_t>(config.hidden_size) +
                                  2 * static_cast<std::uint64_t>(shard.q_heads.size()) * hd +
                                  2 * static_cast<std::uint64_t>(shard.kv_heads.size()) * hd +
                                  2 * static_cast<std::uint64_t>(shard.intermediate.size());
  const std::uint64_t logits =
      static_cast<std::uint64_t>(logit_rows) * static_cast<std::uint64_t>(shard.vocab.size());
  return (t * per_token + logits) * sizeof(float);
}

}  // namespace selfspec
