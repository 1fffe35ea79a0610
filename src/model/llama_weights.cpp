#include "model/llama_weights.hpp"

#include "core/aligned_buffer.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "model_io/checkpoint_layout.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <string_view>

namespace selfspec {
namespace {

DType storage_dtype(const TensorSource& source, const std::string& name,
                    std::optional<DType> convert_to) {
  return convert_to ? *convert_to : source.dtype(name);
}

// Reads a slice into backend memory: straight in when the backend's memory is host memory,
// through a host staging buffer otherwise.
DeviceBuffer read_to_backend(Backend& backend, const TensorSource& source, const std::string& name,
                             const TensorSlice& slice, DType dtype, std::size_t bytes) {
  DeviceBuffer buffer = backend.allocate(bytes);
  if (backend.host_memory()) {
    source.read(name, slice, dtype, buffer.data());
  } else {
    AlignedBuffer<std::byte> staging(bytes);
    source.read(name, slice, dtype, staging.data());
    backend.upload(buffer.data(), staging.data(), bytes);
  }
  return buffer;
}

Matrix load_matrix(Backend& backend, const TensorSource& source, const std::string& name,
                   IndexRange rows, IndexRange cols, std::optional<DType> convert_to) {
  Matrix matrix;
  matrix.dtype = storage_dtype(source, name, convert_to);
  matrix.rows = rows.size();
  matrix.cols = cols.size();
  matrix.data = read_to_backend(backend, source, name, {rows.begin, rows.end, cols.begin, cols.end},
                                matrix.dtype, static_cast<std::size_t>(matrix.bytes()));
  return matrix;
}

Vector load_vector(Backend& backend, const TensorSource& source, const std::string& name,
                   IndexRange range) {
  Vector vector;
  vector.size = range.size();
  vector.data = read_to_backend(backend, source, name, {range.begin, range.end, 0, 0}, DType::kF32,
                                static_cast<std::size_t>(vector.bytes()));
  return vector;
}

}  // namespace

std::uint64_t layer_weight_bytes(const LayerWeights& layer) {
  std::uint64_t bytes = 0;
  for (const Matrix* m :
       {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down}) {
    bytes += m->bytes();
  }
  for (const Vector* v :
       {&layer.attention_norm, &layer.mlp_norm, &layer.bq, &layer.bk, &layer.bv, &layer.bo}) {
    bytes += v->bytes();
  }
  return bytes;
}

std::uint64_t LlamaWeights::layer_bytes(std::size_t index) const {
  return layer_weight_bytes(layers[index]);
}

LayerWeights load_layer_weights(const TensorSource& source,
                                const std::function<std::string(std::string_view)>& name_of,
                                const ModelConfig& config, const ShardPlan& plan,
                                std::optional<DType> convert_to, Backend& backend) {
  const std::int64_t hd = config.head_dim;
  const IndexRange all_hidden{0, config.hidden_size};
  const IndexRange q_rows{plan.q_heads.begin * hd, plan.q_heads.end * hd};
  const IndexRange kv_rows{plan.kv_heads.begin * hd, plan.kv_heads.end * hd};
  LayerWeights layer;
  layer.attention_norm =
      load_vector(backend, source, name_of("input_layernorm.weight"), all_hidden);
  layer.mlp_norm =
      load_vector(backend, source, name_of("post_attention_layernorm.weight"), all_hidden);
  layer.wq = load_matrix(backend, source, name_of("self_attn.q_proj.weight"), q_rows, all_hidden,
                         convert_to);
  layer.wk = load_matrix(backend, source, name_of("self_attn.k_proj.weight"), kv_rows, all_hidden,
                         convert_to);
  layer.wv = load_matrix(backend, source, name_of("self_attn.v_proj.weight"), kv_rows, all_hidden,
                         convert_to);
  layer.wo = load_matrix(backend, source, name_of("self_attn.o_proj.weight"), all_hidden, q_rows,
                         convert_to);
  if (config.attention_bias) {
    layer.bq = load_vector(backend, source, name_of("self_attn.q_proj.bias"), q_rows);
    layer.bk = load_vector(backend, source, name_of("self_attn.k_proj.bias"), kv_rows);
    layer.bv = load_vector(backend, source, name_of("self_attn.v_proj.bias"), kv_rows);
  }
  if (config.o_proj_bias()) {
    layer.bo = load_vector(backend, source, name_of("self_attn.o_proj.bias"), all_hidden);
  }
  layer.w_gate = load_matrix(backend, source, name_of("mlp.gate_proj.weight"), plan.intermediate,
                             all_hidden, convert_to);
  layer.w_up = load_matrix(backend, source, name_of("mlp.up_proj.weight"), plan.intermediate,
                           all_hidden, convert_to);
  layer.w_down = load_matrix(backend, source, name_of("mlp.down_proj.weight"), all_hidden,
                             plan.intermediate, convert_to);
  return layer;
}

std::uint64_t LlamaWeights::bytes() const {
  std::uint64_t total = embedding.bytes() + (tied ? 0 : lm_head.bytes()) + final_norm.bytes();
  for (std::size_t l = 0; l < layers.size(); ++l) total += layer_bytes(l);
  return total;
}

LlamaWeights LlamaWeights::load(const TensorSource& source, const ModelConfig& config,
                                const ShardPlan& plan, std::optional<DType> convert_to,
                                Backend& backend) {
  source.validate(config);
  const IndexRange all_hidden{0, config.hidden_size};

  LlamaWeights weights;
  weights.tied = config.tie_word_embeddings;
  log::Progress progress("loading weights (layers)", config.num_layers);
  weights.embedding =
      load_matrix(backend, source, "model.embed_tokens.weight", plan.vocab, all_hidden, convert_to);
  weights.layers.resize(static_cast<std::size_t>(config.num_layers));
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    weights.layers[static_cast<std::size_t>(l)] = load_layer_weights(
        source, [l](std::string_view suffix) { return layer_tensor_name(l, suffix); }, config, plan,
        convert_to, backend);
    progress.update(l + 1);
  }
  weights.final_norm = load_vector(backend, source, "model.norm.weight", all_hidden);
  if (!weights.tied) {
    weights.lm_head =
        load_matrix(backend, source, "lm_head.weight", plan.vocab, all_hidden, convert_to);
  }
  progress.finish();
  return weights;
}

}  // namespace selfspec
