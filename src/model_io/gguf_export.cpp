// add_model_to_gguf / export_gguf (see gguf_export.hpp).
#include "model_io/gguf_export.hpp"

#include "core/error.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/gguf_tensor_source.hpp"

#include <fmt/format.h>

#include <algorithm>
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

}  // namespace

void add_model_to_gguf(GgufWriter& writer, const TensorSource& source, const ModelConfig& config,
                       GgmlType matrix_type) {
  SELFSPEC_CHECK(matrix_type == GgmlType::kF32 || matrix_type == GgmlType::kF16 ||
                     matrix_type == GgmlType::kBF16,
                 "GGUF export: weights can be written as F32, F16 or BF16 (not {})",
                 ggml_type_name(matrix_type));
  add_geometry(writer, config);
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
    writer.add_f32_tensor(gguf_tensor_name(expected.name), dims, values,
                          is_matrix ? matrix_type : GgmlType::kF32);
  }
}

void export_gguf(const TensorSource& source, const ModelConfig& config,
                 const std::filesystem::path& path, GgmlType matrix_type) {
  GgufWriter writer;
  add_model_to_gguf(writer, source, config, matrix_type);
  writer.write(path);
}

}  // namespace selfspec
