// add_model_to_gguf / export_gguf (see gguf_export.hpp).
#include "model_io/gguf_export.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "kernels/cpu/ggml_quantize.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/gguf_tensor_source.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace selfspec {
namespace {

void add_geometry(GgufWriter& writer, const ModelConfig& config) {
  const std::string& arch = config.model_type;
  SELFSPEC_CHECK(arch == "llama" || arch == "qwen2",
                 "GGUF export: model_type '{}' has no GGUF architecture here (llama, qwen2)", arch);
  SELFSPEC_CHECK(config.rope_scaling.type != RopeScalingType::kLlama3,
                 "GGUF export: llama3 rope scaling is not supported");
  const auto key = [&](std::string_view suffix) { return fmt::format("{}.{}", arch, suffix); };
  const auto u32 = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
  writer.set_string("general.architecture", arch);
  writer.set_string("general.name", fmt::format("selfspec export ({})", arch));
  writer.set_u32(key("block_count"), u32(config.num_layers));
  writer.set_u32(key("context_length"), u32(config.max_position_embeddings));
  writer.set_u32(key("embedding_length"), u32(config.hidden_size));
  writer.set_u32(key("feed_forward_length"), u32(config.intermediate_size));
  writer.set_u32(key("attention.head_count"), u32(config.num_heads));
  writer.set_u32(key("attention.head_count_kv"), u32(config.num_kv_heads));
  writer.set_u32(key("attention.key_length"), u32(config.head_dim));
  writer.set_u32(key("attention.value_length"), u32(config.head_dim));
  writer.set_u32(key("rope.dimension_count"), u32(config.head_dim));
  writer.set_u32(key("vocab_size"), u32(config.vocab_size));
  writer.set_f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(config.rms_norm_eps));
  writer.set_f32(key("rope.freq_base"), static_cast<float>(config.rope_theta));
  if (config.rope_scaling.type == RopeScalingType::kLinear) {
    writer.set_string(key("rope.scaling.type"), "linear");
    writer.set_f32(key("rope.scaling.factor"), static_cast<float>(config.rope_scaling.factor));
  }
  if (config.bos_token_id) writer.set_u32("tokenizer.ggml.bos_token_id", u32(*config.bos_token_id));
  if (!config.eos_token_ids.empty()) {
    writer.set_u32("tokenizer.ggml.eos_token_id", u32(config.eos_token_ids.front()));
  }
}

// Heads of the Q/K permutation for `name` in a llama model; 0 when the tensor is not permuted.
std::int64_t permuted_heads(const ModelConfig& config, const std::string& name) {
  if (config.model_type != "llama") return 0;
  if (name.find("self_attn.q_proj.") != std::string::npos) return config.num_heads;
  if (name.find("self_attn.k_proj.") != std::string::npos) return config.num_kv_heads;
  return 0;
}

// Rows (or elements of a vector) in GGUF order: GGUF row h*d + 2k + i holds HF row h*d + i*d/2 + k.
std::vector<float> permute_rows(const std::vector<float>& values, std::int64_t rows,
                                std::int64_t cols, std::int64_t head_dim) {
  std::vector<float> out(values.size());
  const std::int64_t half = head_dim / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t head = r / head_dim;
    const std::int64_t within = r % head_dim;
    const std::int64_t gguf_row = head * head_dim + 2 * (within % half) + within / half;
    std::copy_n(values.begin() + r * cols, cols, out.begin() + gguf_row * cols);
  }
  return out;
}

// The type a matrix whose rows have `cols` elements is written as: `wanted` when the rows are whole
// blocks of it; else llama.cpp's quantize fallback (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
// blocks of 32), and F16 when the rows are not whole blocks of 32 either.
GgmlType fitting_type(GgmlType wanted, std::int64_t cols) {
  if (cols % ggml_block_elements(wanted) == 0) return wanted;
  GgmlType fallback = GgmlType::kF16;
  if (wanted == GgmlType::kQ4_K) fallback = GgmlType::kQ5_0;
  if (wanted == GgmlType::kQ5_K) fallback = GgmlType::kQ5_1;
  if (wanted == GgmlType::kQ6_K) fallback = GgmlType::kQ8_0;
  return cols % ggml_block_elements(fallback) == 0 ? fallback : GgmlType::kF16;
}

// `rows` rows of `cols` values (row-major, GGUF row order) in `type`'s layout, row by row.
std::vector<std::byte> encode_rows(GgmlType type, std::span<const float> values, std::int64_t rows,
                                   std::int64_t cols) {
  const std::uint64_t row_bytes = ggml_row_bytes(type, cols);
  std::vector<std::byte> data(row_bytes * static_cast<std::uint64_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    quantize_ggml(
        type, values.subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols)),
        std::span(data).subspan(static_cast<std::size_t>(r) * row_bytes, row_bytes));
  }
  return data;
}

}  // namespace

void add_model_to_gguf(GgufWriter& writer, const TensorSource& source, const ModelConfig& config,
                       GgmlType matrix_type) {
  SELFSPEC_CHECK(ggml_quantize_supported(matrix_type),
                 "GGUF export: weights can be written as F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, "
                 "Q8_0, Q4_K, Q5_K or Q6_K (not {})",
                 ggml_type_name(matrix_type));
  add_geometry(writer, config);
  std::vector<std::string> fallbacks;  // "name (cols: type)" of matrices written in another type
  for (const ExpectedTensor& expected : expected_tensors(config)) {
    if (!expected.required) continue;  // a tied lm_head: GGUF files leave output.weight out
    const bool is_matrix = expected.shape.size() == 2;
    const std::int64_t rows = expected.shape[0];
    const std::int64_t cols = is_matrix ? expected.shape[1] : 1;
    std::vector<float> values(static_cast<std::size_t>(rows * cols));
    const TensorSlice all = is_matrix ? TensorSlice{0, rows, 0, cols} : TensorSlice{0, rows, 0, 0};
    source.read(expected.name, all, DType::kF32, values.data());
    if (const std::int64_t heads = permuted_heads(config, expected.name); heads > 0) {
      values = permute_rows(values, rows, cols, config.head_dim);
    }
    const std::vector<std::int64_t> dims =
        is_matrix ? std::vector<std::int64_t>{cols, rows} : std::vector<std::int64_t>{rows};
    const std::string name = gguf_tensor_name(expected.name);
    if (!is_matrix) {
      writer.add_f32_tensor(name, dims, values);
      continue;
    }
    // Rows are quantized whole, after the Q/K permutation (which moves whole rows).
    const GgmlType type = fitting_type(matrix_type, cols);
    if (type != matrix_type) {
      fallbacks.push_back(fmt::format("{} ({} columns: {})", name, cols, ggml_type_name(type)));
    }
    writer.add_tensor(name, type, dims, encode_rows(type, values, rows, cols));
  }
  if (!fallbacks.empty()) {
    constexpr std::size_t kNamed = 4;
    log::warn(
        "GGUF export: {} matrices have rows that are not whole {} blocks and use a fallback "
        "type: {}{}",
        fallbacks.size(), ggml_type_name(matrix_type),
        fmt::join(
            fallbacks.begin(),
            fallbacks.begin() + static_cast<std::ptrdiff_t>(std::min(kNamed, fallbacks.size())),
            ", "),
        fallbacks.size() > kNamed ? ", ..." : "");
  }
}

void export_gguf(const TensorSource& source, const ModelConfig& config,
                 const std::filesystem::path& path, GgmlType matrix_type) {
  GgufWriter writer;
  add_model_to_gguf(writer, source, config, matrix_type);
  writer.write(path);
}

}  // namespace selfspec
