#include "model/memory_plan.hpp"

#include "kernels/cpu/ggml_dequantize.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "model/kv_cache.hpp"
#include "model_io/checkpoint_layout.hpp"

#include <optional>

namespace selfspec {
namespace {

// Accumulates matrix and vector bytes, in total and by format.
struct ByteCount {
  std::uint64_t total = 0;
  std::map<std::string, std::uint64_t>* by_format = nullptr;
  // Set: every matrix is requantized to this format at load (a draft copy), whatever format_of
  // says.
  std::optional<WeightFormat> requantized;

  void matrix(WeightFormat format, std::int64_t rows, std::int64_t cols, std::int64_t col_begin) {
    if (requantized) format = requantized_slice_format(*requantized, cols);
    const std::uint64_t bytes = matrix_slice_bytes(format, rows, cols, col_begin);
    total += bytes;
    if (by_format != nullptr) (*by_format)[std::string(weight_format_name(format))] += bytes;
  }
  void vector(std::int64_t size) {
    const auto bytes = static_cast<std::uint64_t>(size) * sizeof(float);
    total += bytes;
    if (by_format != nullptr) (*by_format)["f32"] += bytes;
  }
};

LayerWeightBytes layer_bytes(const ModelConfig& config, const ShardPlan& shard,
                             const WeightFormatOf& format_of, std::int64_t layer,
                             std::map<std::string, std::uint64_t>* by_format,
                             std::optional<WeightFormat> requantized = std::nullopt) {
  const std::int64_t hidden = config.hidden_size;
  const std::int64_t hd = config.head_dim;
  const std::int64_t q = shard.q_heads.size() * hd;
  const std::int64_t kv = shard.kv_heads.size() * hd;
  const std::int64_t inter = shard.intermediate.size();
  const auto format = [&](std::string_view suffix) {
    return format_of(layer_tensor_name(layer, suffix));
  };
  ByteCount attention{0, by_format, requantized};
  attention.matrix(format("self_attn.q_proj.weight"), q, hidden, 0);
  attention.matrix(format("self_attn.k_proj.weight"), kv, hidden, 0);
  attention.matrix(format("self_attn.v_proj.weight"), kv, hidden, 0);
  attention.matrix(format("self_attn.o_proj.weight"), hidden, q, shard.q_heads.begin * hd);
  attention.vector(hidden);
  if (config.attention_bias) attention.vector(q + 2 * kv);
  if (config.o_proj_bias()) attention.vector(hidden);
  ByteCount mlp{0, by_format, requantized};
  mlp.matrix(format("mlp.gate_proj.weight"), inter, hidden, 0);
  mlp.matrix(format("mlp.up_proj.weight"), inter, hidden, 0);
  mlp.matrix(format("mlp.down_proj.weight"), hidden, inter, shard.intermediate.begin);
  mlp.vector(hidden);
  return {attention.total, mlp.total};
}

}  // namespace

WeightFormat requantized_slice_format(WeightFormat format, std::int64_t cols) {
  if (!is_quantized(format)) return format;
  const auto block = [](WeightFormat f) {
    return ggml_block_elements(kernels::cpu::ggml_type_of(f));
  };
  if (cols % block(format) == 0) return format;
  if (cols % block(WeightFormat::kQ8_0) == 0) return WeightFormat::kQ8_0;
  return WeightFormat::kBF16;
}

std::vector<LayerWeightBytes> plan_draft_layer_weight_bytes(const ModelConfig& config,
                                                            const ShardPlan& shard,
                                                            WeightFormat format) {
  const WeightFormatOf as_requested = [format](const std::string&) { return format; };
  std::vector<LayerWeightBytes> layers;
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    layers.push_back(layer_bytes(config, shard, as_requested, l, nullptr, format));
  }
  return layers;
}

std::uint64_t plan_draft_weight_bytes(const ModelConfig& config, const ShardPlan& shard,
                                      WeightFormat format) {
  std::uint64_t total = 0;
  for (const LayerWeightBytes& b : plan_draft_layer_weight_bytes(config, shard, format)) {
    total += b.attention + b.mlp;
  }
  ByteCount output{0, nullptr, format};
  output.matrix(format, shard.vocab.size(), config.hidden_size, 0);
  return total + output.total;
}

WeightFormatOf uniform_format(DType dtype) {
  return [format = dense_format(dtype)](const std::string&) { return format; };
}

std::uint64_t matrix_slice_bytes(WeightFormat format, std::int64_t rows, std::int64_t cols,
                                 std::int64_t col_begin) {
  if (rows <= 0 || cols <= 0) return 0;
  if (is_quantized(format)) {
    const bool k_quant = kernels::cpu::quant_layout(format).k_quant;
    const std::int64_t skip = k_quant ? col_begin % 256 : 0;
    return static_cast<std::uint64_t>(kernels::cpu::packed_quant_bytes(format, rows, cols, skip));
  }
  return static_cast<std::uint64_t>(rows * cols) * dtype_size(*dense_dtype(format));
}

std::vector<LayerWeightBytes> plan_layer_weight_bytes(const ModelConfig& config,
                                                      const ShardPlan& shard,
                                                      const WeightFormatOf& format_of) {
  std::vector<LayerWeightBytes> layers;
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    layers.push_back(layer_bytes(config, shard, format_of, l, nullptr));
  }
  return layers;
}

RankMemory plan_rank_memory(const ModelConfig& config, const ShardPlan& shard,
                            const WeightFormatOf& format_of, std::int64_t context, DType kv_dtype) {
  RankMemory memory;
  std::uint64_t layers = 0;
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    const LayerWeightBytes b =
        layer_bytes(config, shard, format_of, l, &memory.weight_bytes_by_format);
    layers += b.attention + b.mlp;
  }
  const std::int64_t hidden = config.hidden_size;
  const std::int64_t vocab = shard.vocab.size();
  ByteCount table{0, &memory.weight_bytes_by_format, std::nullopt};
  table.matrix(format_of("model.embed_tokens.weight"), vocab, hidden, 0);
  ByteCount head{0, &memory.weight_bytes_by_format, std::nullopt};
  if (!config.tie_word_embeddings) head.matrix(format_of("lm_head.weight"), vocab, hidden, 0);
  ByteCount final_norm{0, &memory.weight_bytes_by_format, std::nullopt};
  final_norm.vector(hidden);
  memory.weight_bytes = layers + table.total + head.total + final_norm.total;
  // A decode step reads every layer, the final norm and the LM head in full (of the table, one
  // row: left out).
  const std::uint64_t read_head = config.tie_word_embeddings ? table.total : head.total;
  memory.decode_weight_bytes = layers + read_head + final_norm.total;
  memory.kv_cache_bytes = KvCache::bytes_for(config.num_layers, shard.kv_heads.size(),
                                             config.head_dim, context, kv_dtype);
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
