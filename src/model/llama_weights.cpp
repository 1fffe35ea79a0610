#include "model/llama_weights.hpp"

#include "core/aligned_buffer.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "kernels/cpu/ggml_quantize.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "model/memory_plan.hpp"
#include "model_io/checkpoint_layout.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace selfspec {
namespace {

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

// Why a quantized tensor cannot stay quantized on this rank, or nullopt when it can.
std::optional<std::string> not_native_reason(const Backend& backend, WeightFormat format,
                                             const TensorSlice& slice) {
  if (!backend.runs_format(format)) {
    return fmt::format("the {} backend does not run it", device_kind_name(backend.kind()));
  }
  if (slice.col_begin % 32 != 0 || slice.col_end % 32 != 0) {
    return "this rank's column slice does not fall on 32-column boundaries";
  }
  return std::nullopt;
}

// Logs `text` the first time `key` is seen in this process (the loaders' notices: one per kind of
// fallback, naming the first tensor it applies to).
void notice_once(const std::string& key, const std::string& text) {
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::lock_guard lock(mutex);
  if (said.insert(key).second) log::info("{}", text);
}

void notice_dequantized(const std::string& name, std::string_view type, const std::string& reason) {
  notice_once(
      fmt::format("dequantized {} {}", type, reason),
      fmt::format("{} tensors are dequantized to bf16 ({}; from {} on)", type, reason, name));
}

void notice_requantized(const std::string& name, WeightFormat requested, WeightFormat made,
                        const std::string& reason) {
  const std::string_view want = weight_format_name(requested);
  const std::string_view got = weight_format_name(made);
  notice_once(fmt::format("requantized {} {} {}", want, got, reason),
              fmt::format("{} was requested; {} tensors are made {} instead ({}; from {} on)", want,
                          want, got, reason, name));
}

// The dtype a tensor is read in when it is not kept quantized: the requested one, else as stored
// (quantized tensors that cannot stay quantized: bf16, the former GGUF default).
DType dense_load_dtype(const TensorSource& source, const std::string& name,
                       std::optional<DType> convert_to) {
  if (convert_to) return *convert_to;
  if (source.quantized_format(name)) return DType::kBF16;
  if (const std::optional<std::string> type = source.dequantized_only_type(name)) {
    notice_dequantized(name, *type, "no kernel runs it as stored");
    return DType::kBF16;
  }
  return source.dtype(name);
}

// The quantized format a tensor is kept in on this rank, or nullopt when it is read dense: none
// requested (convert_to empty), stored in a format with a kernel, and a slice the backend can run
// as stored (else a notice, once per format and reason).
std::optional<WeightFormat> native_format(const Backend& backend, const TensorSource& source,
                                          const std::string& name, const TensorSlice& slice,
                                          std::optional<DType> convert_to) {
  if (convert_to) return std::nullopt;
  const std::optional<WeightFormat> quantized = source.quantized_format(name);
  if (!quantized) return std::nullopt;
  if (const std::optional<std::string> reason = not_native_reason(backend, *quantized, slice)) {
    notice_dequantized(name, weight_format_name(*quantized), *reason);
    return std::nullopt;
  }
  return quantized;
}

// The slice's blocks as stored, packed by the backend; a malformed block names the tensor.
DeviceBuffer load_quantized(Backend& backend, const TensorSource& source, const std::string& name,
                            const TensorSlice& slice) {
  const QuantizedSlice stored = source.read_quantized(name, slice);
  try {
    return backend.make_weight({stored.format, stored.rows, stored.cols, stored.data.data(),
                                stored.row_stride, stored.skip});
  } catch (const Error& error) {
    fail("{}: tensor '{}' rows [{}, {}) columns [{}, {}): {}", source.describe(), name,
         slice.row_begin, slice.row_end, slice.col_begin, slice.col_end, error.what());
  }
}

// The slice read as `dtype` (row-major) into a host staging buffer, then made a backend weight.
DeviceBuffer load_dense(Backend& backend, const TensorSource& source, const std::string& name,
                        const TensorSlice& slice, DType dtype) {
  const std::int64_t rows = slice.row_end - slice.row_begin;
  const std::int64_t cols = slice.col_end - slice.col_begin;
  AlignedBuffer<std::byte> staging(static_cast<std::size_t>(rows * cols) * dtype_size(dtype));
  source.read(name, slice, dtype, staging.data());
  return backend.make_weight({dense_format(dtype), rows, cols, staging.data(), 0, 0});
}

// The format a tensor requested in quantized `format` is made in on this rank: the request where
// the backend runs it and every row is whole blocks of it; a K format (super-blocks of 256) over
// a slice that is not falls back to q8_0; a backend that runs neither gets bf16 (a notice each).
WeightFormat requantized_format(const Backend& backend, const std::string& name,
                                WeightFormat format, std::int64_t cols) {
  const WeightFormat made = requantized_slice_format(format, cols);
  if (made != format) {
    const GgmlType type = kernels::cpu::ggml_type_of(format);
    notice_requantized(name, format, made,
                       fmt::format("this rank's {} columns are not whole blocks of {}", cols,
                                   ggml_block_elements(type)));
  }
  if (is_quantized(made) && !backend.runs_format(made)) {
    notice_requantized(
        name, made, WeightFormat::kBF16,
        fmt::format("the {} backend does not run it", device_kind_name(backend.kind())));
    return WeightFormat::kBF16;
  }
  return made;
}

// The slice read as f32 and quantized row by row into `format`'s blocks (ggml_quantize.hpp), then
// made a backend weight; a value the format cannot hold names the tensor.
DeviceBuffer load_requantized(Backend& backend, const TensorSource& source, const std::string& name,
                              const TensorSlice& slice, WeightFormat format) {
  const std::int64_t rows = slice.row_end - slice.row_begin;
  const std::int64_t cols = slice.col_end - slice.col_begin;
  AlignedBuffer<float> values(static_cast<std::size_t>(rows * cols));
  source.read(name, slice, DType::kF32, values.data());
  const GgmlType type = kernels::cpu::ggml_type_of(format);
  const auto row_bytes = static_cast<std::size_t>(ggml_row_bytes(type, cols));
  std::vector<std::byte> blocks(static_cast<std::size_t>(rows) * row_bytes);
  try {
    for (std::int64_t r = 0; r < rows; ++r) {
      quantize_ggml(
          type, std::span<const float>(values.data() + r * cols, static_cast<std::size_t>(cols)),
          std::span(blocks.data() + static_cast<std::size_t>(r) * row_bytes, row_bytes));
    }
  } catch (const Error& error) {
    throw Error(fmt::format("tensor {}: cannot be quantized to {}: {}", name,
                            weight_format_name(format), error.what()));
  }
  return backend.make_weight(
      {format, rows, cols, blocks.data(), static_cast<std::int64_t>(row_bytes), 0});
}

// One matrix slice in the requested format: nullopt keeps the stored encoding (quantized where
// the backend runs it), a dense format converts, a quantized one quantizes at load.
Matrix load_matrix(Backend& backend, const TensorSource& source, const std::string& name,
                   IndexRange rows, IndexRange cols, std::optional<WeightFormat> convert_to) {
  Matrix matrix;
  matrix.rows = rows.size();
  matrix.cols = cols.size();
  const TensorSlice slice{rows.begin, rows.end, cols.begin, cols.end};
  if (convert_to && is_quantized(*convert_to)) {
    matrix.format = requantized_format(backend, name, *convert_to, matrix.cols);
    matrix.data = is_quantized(matrix.format)
                      ? load_requantized(backend, source, name, slice, matrix.format)
                      : load_dense(backend, source, name, slice, DType::kBF16);
    return matrix;
  }
  const std::optional<DType> dense = convert_to ? dense_dtype(*convert_to) : std::nullopt;
  if (const std::optional<WeightFormat> native =
          native_format(backend, source, name, slice, dense)) {
    matrix.format = *native;
    matrix.data = load_quantized(backend, source, name, slice);
    return matrix;
  }
  const DType dtype = dense_load_dtype(source, name, dense);
  matrix.format = dense_format(dtype);
  matrix.data = load_dense(backend, source, name, slice, dtype);
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

Matrix load_matrix_slice(const TensorSource& source, const std::string& name, IndexRange rows,
                         IndexRange cols, std::optional<WeightFormat> convert_to,
                         Backend& backend) {
  return load_matrix(backend, source, name, rows, cols, convert_to);
}

Vector load_vector_slice(const TensorSource& source, const std::string& name, IndexRange range,
                         Backend& backend) {
  return load_vector(backend, source, name, range);
}

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
                                std::optional<WeightFormat> convert_to, Backend& backend) {
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

std::map<std::string, std::uint64_t> LlamaWeights::bytes_by_format() const {
  std::map<std::string, std::uint64_t> out;
  const auto add_matrix = [&](const Matrix& m) {
    if (!m.data.empty()) out[std::string(weight_format_name(m.format))] += m.bytes();
  };
  const auto add_vector = [&](const Vector& v) {
    if (!v.empty()) out["f32"] += v.bytes();
  };
  add_matrix(embedding);
  if (!tied) add_matrix(lm_head);
  add_vector(final_norm);
  for (const LayerWeights& layer : layers) {
    for (const Matrix* m :
         {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down}) {
      add_matrix(*m);
    }
    for (const Vector* v :
         {&layer.attention_norm, &layer.mlp_norm, &layer.bq, &layer.bk, &layer.bv, &layer.bo}) {
      add_vector(*v);
    }
  }
  return out;
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
  const std::optional<WeightFormat> format =
      convert_to ? std::optional(dense_format(*convert_to)) : std::nullopt;

  LlamaWeights weights;
  weights.tied = config.tie_word_embeddings;
  log::Progress progress("loading weights (layers)", config.num_layers);
  weights.embedding =
      load_matrix(backend, source, "model.embed_tokens.weight", plan.vocab, all_hidden, format);
  weights.layers.resize(static_cast<std::size_t>(config.num_layers));
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    weights.layers[static_cast<std::size_t>(l)] = load_layer_weights(
        source, [l](std::string_view suffix) { return layer_tensor_name(l, suffix); }, config, plan,
        format, backend);
    progress.update(l + 1);
  }
  weights.final_norm = load_vector(backend, source, "model.norm.weight", all_hidden);
  if (!weights.tied) weights.lm_head = load_output_matrix(source, config, plan, format, backend);
  progress.finish();
  return weights;
}

Matrix load_output_matrix(const TensorSource& source, const ModelConfig& config,
                          const ShardPlan& plan, std::optional<WeightFormat> convert_to,
                          Backend& backend) {
  return load_matrix(backend, source,
                     config.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight",
                     plan.vocab, {0, config.hidden_size}, convert_to);
}

std::uint64_t DraftWeights::bytes() const {
  std::uint64_t total = output.bytes();
  for (const LayerWeights& layer : layers) total += layer_weight_bytes(layer);
  return total;
}

DraftWeights load_draft_weights(const TensorSource& source, const ModelConfig& config,
                                const ShardPlan& plan, WeightFormat format, Backend& backend) {
  source.validate(config);
  DraftWeights draft;
  draft.format = format;
  log::Progress progress(
      fmt::format("making the {} draft copy (layers)", weight_format_name(format)),
      config.num_layers);
  draft.layers.resize(static_cast<std::size_t>(config.num_layers));
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    draft.layers[static_cast<std::size_t>(l)] = load_layer_weights(
        source, [l](std::string_view suffix) { return layer_tensor_name(l, suffix); }, config, plan,
        format, backend);
    progress.update(l + 1);
  }
  draft.output = load_output_matrix(source, config, plan, format, backend);
  progress.finish();
  return draft;
}

}  // namespace selfspec
