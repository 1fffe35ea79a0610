// GgufTensorSource (see gguf_tensor_source.hpp).
#include "model_io/gguf_tensor_source.hpp"

#include "core/error.hpp"
#include "model_io/checkpoint_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <set>
#include <utility>
#include <vector>

namespace selfspec {
namespace {

// HF suffix after "model.layers.N." -> GGUF suffix after "blk.N.".
constexpr std::array<std::pair<std::string_view, std::string_view>, 13> kLayerNames = {{
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
}};

constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kGlobalNames = {{
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
}};

constexpr std::string_view kLayerPrefix = "model.layers.";

// Converts n f32 values into dst (of dst_dtype) at element offset `at`.
void store(std::span<const float> values, DType dst_dtype, void* dst, std::size_t at) {
  switch (dst_dtype) {
    case DType::kF32:
      std::memcpy(static_cast<float*>(dst) + at, values.data(), values.size_bytes());
      return;
    case DType::kBF16: {
      auto* out = static_cast<std::uint16_t*>(dst) + at;
      for (std::size_t i = 0; i < values.size(); ++i) out[i] = f32_to_bf16(values[i]);
      return;
    }
    case DType::kF16: {
      auto* out = static_cast<std::uint16_t*>(dst) + at;
      for (std::size_t i = 0; i < values.size(); ++i) out[i] = f32_to_f16(values[i]);
      return;
    }
  }
}

std::string format_shape(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// HF shape (outer first) of a GGUF tensor (ggml order, inner first).
std::vector<std::int64_t> hf_shape(const GgufTensorInfo& info) {
  return {info.dims.rbegin(), info.dims.rend()};
}

}  // namespace

std::string gguf_tensor_name(const std::string& hf_name) {
  for (const auto& [hf, gguf] : kGlobalNames) {
    if (hf_name == hf) return std::string(gguf);
  }
  if (hf_name.starts_with(kLayerPrefix)) {
    const std::string_view rest = std::string_view(hf_name).substr(kLayerPrefix.size());
    const std::size_t dot = rest.find('.');
    const std::string_view layer = rest.substr(0, dot);
    if (dot != std::string_view::npos && !layer.empty() &&
        std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const std::string_view suffix = rest.substr(dot + 1);
      for (const auto& [hf, gguf] : kLayerNames) {
        if (suffix == hf) return fmt::format("blk.{}.{}", layer, gguf);
      }
    }
  }
  fail("tensor '{}' has no GGUF counterpart", hf_name);
}

GgufTensorSource::GgufTensorSource(const GgufFile& file, const ModelConfig& config)
    : file_(file), config_(config), permuted_qk_(config.model_type == "llama") {}

void GgufTensorSource::validate(const ModelConfig& config) const {
  std::set<std::string, std::less<>> used;
  for (const ExpectedTensor& expected : expected_tensors(config)) {
    const std::string name = gguf_tensor_name(expected.name);
    if (!file_.contains(name)) {
      SELFSPEC_CHECK(!expected.required, "{}: tensor '{}' ({} in HF naming) is missing",
                     file_.source(), name, expected.name);
      continue;
    }
    const GgufTensorInfo& info = file_.tensor(name);
    SELFSPEC_CHECK(hf_shape(info) == expected.shape,
                   "{}: tensor '{}' has shape {} (GGUF dims {}), expected {} for {}",
                   file_.source(), name, format_shape(hf_shape(info)), format_shape(info.dims),
                   format_shape(expected.shape), expected.name);
    used.insert(name);
  }
  for (const GgufTensorInfo& info : file_.tensors()) {
    SELFSPEC_CHECK(used.contains(info.name),
                   "{}: tensor '{}' is not part of a {} model with this geometry (selfspec would "
                   "ignore it; refusing rather than run a different model)",
                   file_.source(), info.name, config.model_type);
  }
}

DType GgufTensorSource::dtype(const std::string& name) const {
  switch (file_.tensor(gguf_tensor_name(name)).type) {
    case GgmlType::kF16:
      return DType::kF16;
    case GgmlType::kBF16:
      return DType::kBF16;
    default:
      return DType::kF32;
  }
}

std::int64_t GgufTensorSource::source_row(const std::string& hf_name, std::int64_t row) const {
  if (!permuted_qk_) return row;
  std::int64_t heads = 0;
  if (hf_name.ends_with("self_attn.q_proj.weight") || hf_name.ends_with("self_attn.q_proj.bias")) {
    heads = config_.num_heads;
  } else if (hf_name.ends_with("self_attn.k_proj.weight") ||
             hf_name.ends_with("self_attn.k_proj.bias")) {
    heads = config_.num_kv_heads;
  }
  if (heads == 0) return row;
  const std::int64_t head_dim = config_.head_dim;
  const std::int64_t half = head_dim / 2;
  const std::int64_t head = row / head_dim;
  const std::int64_t within = row % head_dim;
  return head * head_dim + 2 * (within % half) + within / half;
}

void GgufTensorSource::read(const std::string& name, const TensorSlice& slice, DType dst_dtype,
                            void* dst) const {
  const GgufTensorInfo& info = file_.tensor(gguf_tensor_name(name));
  SELFSPEC_CHECK(info.dims.size() <= 2, "{}: tensor '{}' has {} dimensions (expected 1 or 2)",
                 file_.source(), info.name, info.dims.size());
  if (info.dims.size() == 1) {
    read_vector(info, name, slice, dst_dtype, dst);
  } else {
    read_rows(info, name, slice, dst_dtype, dst);
  }
}

void GgufTensorSource::read_vector(const GgufTensorInfo& info, const std::string& hf_name,
                                   const TensorSlice& slice, DType dst_dtype, void* dst) const {
  SELFSPEC_CHECK(
      0 <= slice.row_begin && slice.row_begin <= slice.row_end && slice.row_end <= info.cols(),
      "{}: slice [{}, {}) of tensor '{}' ({} elements) is out of range", file_.source(),
      slice.row_begin, slice.row_end, info.name, info.cols());
  std::vector<float> values(static_cast<std::size_t>(info.cols()));
  dequantize_ggml(info.type, file_.row_bytes(info, 0), values);
  std::vector<float> picked;
  picked.reserve(static_cast<std::size_t>(slice.row_end - slice.row_begin));
  for (std::int64_t i = slice.row_begin; i < slice.row_end; ++i) {
    picked.push_back(values[static_cast<std::size_t>(source_row(hf_name, i))]);
  }
  store(picked, dst_dtype, dst, 0);
}

void GgufTensorSource::read_rows(const GgufTensorInfo& info, const std::string& hf_name,
                                 const TensorSlice& slice, DType dst_dtype, void* dst) const {
  SELFSPEC_CHECK(0 <= slice.row_begin && slice.row_begin <= slice.row_end &&
                     slice.row_end <= info.rows() && 0 <= slice.col_begin &&
                     slice.col_begin <= slice.col_end && slice.col_end <= info.cols(),
                 "{}: slice rows [{}, {}) x cols [{}, {}) of tensor '{}' {} is out of range",
                 file_.source(), slice.row_begin, slice.row_end, slice.col_begin, slice.col_end,
                 info.name, format_shape(hf_shape(info)));
  // A rank's column slice need not fall on block boundaries (Qwen2.5-1.5B's ffn_down has 8960
  // columns of 256-element blocks: TP 2 gives 4480 each). Dequantization is per block, so the
  // blocks covering the slice are dequantized whole and only the slice's columns are kept: the
  // values are the ones a whole-row read gives, bit for bit.
  const std::int64_t block = ggml_block_elements(info.type);
  const std::int64_t first = slice.col_begin / block * block;
  const std::int64_t last = std::min(info.cols(), (slice.col_end + block - 1) / block * block);
  const std::int64_t cols = slice.col_end - slice.col_begin;
  const std::int64_t skip = slice.col_begin - first;
  const std::uint64_t byte_begin = ggml_row_bytes(info.type, first);
  const std::uint64_t byte_count = ggml_row_bytes(info.type, last - first);
  const std::int64_t rows = slice.row_end - slice.row_begin;
  // Rows dequantize independently: spread them over the cores (the load is this loop). An
  // exception may not leave an OpenMP region: the first one is kept and rethrown after it.
  std::exception_ptr error;
#pragma omp parallel
  {
    std::vector<float> values(static_cast<std::size_t>(last - first));
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      try {
        const std::span<const std::byte> row =
            file_.row_bytes(info, source_row(hf_name, slice.row_begin + r));
        dequantize_ggml(info.type, row.subspan(byte_begin, byte_count), values);
        store(std::span<const float>(values).subspan(static_cast<std::size_t>(skip),
                                                     static_cast<std::size_t>(cols)),
              dst_dtype, dst, static_cast<std::size_t>(r * cols));
      } catch (...) {
#pragma omp critical(gguf_read_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

std::optional<WeightFormat> GgufTensorSource::quantized_format(const std::string& name) const {
  switch (file_.tensor(gguf_tensor_name(name)).type) {
    case GgmlType::kQ4_0:
      return WeightFormat::kQ4_0;
    case GgmlType::kQ4_1:
      return WeightFormat::kQ4_1;
    case GgmlType::kQ5_0:
      return WeightFormat::kQ5_0;
    case GgmlType::kQ5_1:
      return WeightFormat::kQ5_1;
    case GgmlType::kQ8_0:
      return WeightFormat::kQ8_0;
    case GgmlType::kQ4_K:
      return WeightFormat::kQ4_K;
    case GgmlType::kQ5_K:
      return WeightFormat::kQ5_K;
    case GgmlType::kQ6_K:
      return WeightFormat::kQ6_K;
    default:
      return std::nullopt;
  }
}

std::optional<std::string> GgufTensorSource::dequantized_only_type(const std::string& name) const {
  const GgmlType type = file_.tensor(gguf_tensor_name(name)).type;
  const bool dense = type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
  if (dense || quantized_format(name)) return std::nullopt;
  return std::string(ggml_type_name(type));
}

QuantizedSlice GgufTensorSource::read_quantized(const std::string& name,
                                                const TensorSlice& slice) const {
  const GgufTensorInfo& info = file_.tensor(gguf_tensor_name(name));
  const std::optional<WeightFormat> format = quantized_format(name);
  SELFSPEC_CHECK(format.has_value() && info.dims.size() == 2,
                 "{}: tensor '{}' ({}) is not a quantized matrix", file_.source(), info.name,
                 ggml_type_name(info.type));
  SELFSPEC_CHECK(0 <= slice.row_begin && slice.row_begin < slice.row_end &&
                     slice.row_end <= info.rows() && 0 <= slice.col_begin &&
                     slice.col_begin < slice.col_end && slice.col_end <= info.cols() &&
                     slice.col_begin % 32 == 0 && slice.col_end % 32 == 0,
                 "{}: slice rows [{}, {}) x cols [{}, {}) of tensor '{}' {} is out of range or "
                 "not at 32-column boundaries",
                 file_.source(), slice.row_begin, slice.row_end, slice.col_begin, slice.col_end,
                 info.name, format_shape(hf_shape(info)));
  const std::int64_t block = ggml_block_elements(info.type);
  const std::int64_t first = slice.col_begin / block * block;
  const std::int64_t last = (slice.col_end + block - 1) / block * block;
  const std::uint64_t byte_begin = ggml_row_bytes(info.type, first);
  const std::uint64_t byte_count = ggml_row_bytes(info.type, last - first);
  QuantizedSlice out;
  out.format = *format;
  out.rows = slice.row_end - slice.row_begin;
  out.cols = slice.col_end - slice.col_begin;
  out.row_stride = static_cast<std::int64_t>(byte_count);
  out.skip = slice.col_begin - first;
  out.data.resize(static_cast<std::size_t>(out.rows) * byte_count);
  for (std::int64_t r = 0; r < out.rows; ++r) {
    const std::span<const std::byte> row =
        file_.row_bytes(info, source_row(name, slice.row_begin + r));
    std::memcpy(out.data.data() + static_cast<std::size_t>(r) * byte_count, row.data() + byte_begin,
                byte_count);
  }
  return out;
}

std::string GgufTensorSource::describe() const {
  return fmt::format("GGUF {} (v{}, {} tensors)", file_.source(), file_.version(),
                     file_.tensors().size());
}

}  // namespace selfspec
