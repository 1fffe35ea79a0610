#include "model_io/synthetic_model.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/safetensors_writer.hpp"
#include "model_io/synthetic_quantized.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace selfspec {
namespace {

std::uint64_t fnv1a(std::string_view text, std::uint64_t seed) {
  std::uint64_t hash = 0xcbf29ce484222325ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// Standard deviation (and constant for norms) of a tensor from its name.
struct Init {
  bool constant = false;
  double value = 0.0;  // constant value, or standard deviation
};

// The layer index in "model.layers.<l>.…", or -1.
int layer_of(const std::string& name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!name.starts_with(kPrefix)) return -1;
  return std::stoi(name.substr(kPrefix.size()));
}

double planted_scale(const std::vector<double>& scales, int layer) {
  return layer >= 0 && static_cast<std::size_t>(layer) < scales.size()
             ? scales[static_cast<std::size_t>(layer)]
             : 1.0;
}

// splitmix64: a fast, well-mixed 64-bit hash (the counter-based generator's round function).
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A unit-variance, zero-mean deviate for (key, index): the sum of four 16-bit uniforms of one
// splitmix64 output (Irwin–Hall, n = 4), centred and scaled. Its shape is within a few percent of
// the normal's and its tails end at ±3.46σ, which is all synthetic weights need; it costs one hash
// per element, about 10× less than Box–Muller (log, sqrt and cos), and that decides how long a
// 70B-geometry model takes to appear.
float unit_deviate(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t bits = splitmix64(key ^ splitmix64(index));
  const auto sum = static_cast<float>((bits & 0xffff) + ((bits >> 16) & 0xffff) +
                                      ((bits >> 32) & 0xffff) + (bits >> 48));
  // Each 16-bit uniform has mean 65535/2 and variance (65536² - 1)/12 ≈ 65536²/12.
  constexpr float kMean = 2.0f * 65535.0f;
  constexpr float kScale = 1.7320508075688772f / 65536.0f;  // sqrt(12 / 4) / 65536
  return (sum - kMean) * kScale;
}

float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::kF32:
      return value;
    case DType::kBF16:
      return bf16_to_f32(f32_to_bf16(value));
    case DType::kF16:
      return f16_to_f32(f32_to_f16(value));
  }
  return value;
}

Init init_for(const SyntheticModelSpec& spec, const std::string& name) {
  const ModelConfig& config = spec.config;
  const double layers = static_cast<double>(config.num_layers);
  if (name.ends_with("norm.weight")) return {true, 1.0};
  if (name.ends_with(".bias")) return {false, 0.02};
  if (name == "model.embed_tokens.weight") return {false, 1.0};
  const double hidden = static_cast<double>(config.hidden_size);
  if (name == "lm_head.weight") return {false, spec.lm_head_scale / std::sqrt(hidden)};
  if (name.ends_with("o_proj.weight")) {
    return {false, planted_scale(spec.attention_scale, layer_of(name)) /
                       std::sqrt(static_cast<double>(config.q_dim())) / std::sqrt(2.0 * layers)};
  }
  if (name.ends_with("down_proj.weight")) {
    return {false, planted_scale(spec.mlp_scale, layer_of(name)) /
                       std::sqrt(static_cast<double>(config.intermediate_size)) /
                       std::sqrt(2.0 * layers)};
  }
  return {false, 1.0 / std::sqrt(hidden)};  // q, k, v, gate, up
}

}  // namespace

ModelConfig make_synthetic_config(std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                                  std::int64_t kv_heads, std::int64_t intermediate,
                                  std::int64_t vocab) {
  ModelConfig config;
  config.model_type = "llama";
  config.num_layers = layers;
  config.hidden_size = hidden;
  config.num_heads = heads;
  config.num_kv_heads = kv_heads;
  config.head_dim = heads > 0 ? hidden / heads : 0;
  config.intermediate_size = intermediate;
  config.vocab_size = vocab;
  config.max_position_embeddings = 2048;
  config.rms_norm_eps = 1e-5;
  config.rope_theta = 10000.0;
  config.bos_token_id = vocab > 1 ? std::optional<std::int32_t>(1) : std::nullopt;
  config.eos_token_ids = vocab > 2 ? std::vector<std::int32_t>{2} : std::vector<std::int32_t>{};
  return config;
}

void fill_synthetic_slice(const SyntheticModelSpec& spec, const std::string& name,
                          const std::vector<std::int64_t>& shape, const TensorSlice& slice,
                          DType dst_dtype, void* dst) {
  SELFSPEC_CHECK(shape.size() == 1 || shape.size() == 2, "synthetic tensor '{}' has rank {}", name,
                 shape.size());
  const bool matrix = shape.size() == 2;
  const std::int64_t cols = matrix ? shape[1] : 1;
  const std::int64_t col_begin = matrix ? slice.col_begin : 0;
  const std::int64_t col_end = matrix ? slice.col_end : 1;
  SELFSPEC_CHECK(slice.row_begin >= 0 && slice.row_end <= shape[0] &&
                     slice.row_begin <= slice.row_end && col_begin >= 0 && col_end <= cols &&
                     col_begin <= col_end,
                 "synthetic tensor '{}': slice outside its shape", name);
  const std::int64_t width = col_end - col_begin;
  const Init init = init_for(spec, name);
  const auto scale = static_cast<float>(init.value);
  const std::uint64_t key = fnv1a(name, spec.seed);
  const auto generate = [&](auto&& store) {
    parallel_for(slice.row_end - slice.row_begin,
                 std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(width, 1)),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t r = begin; r < end; ++r) {
                     const std::int64_t row = slice.row_begin + r;
                     const auto first = static_cast<std::uint64_t>(row * cols + col_begin);
                     const auto out = static_cast<std::size_t>(r * width);
                     for (std::int64_t c = 0; c < width; ++c) {
                       const auto i = static_cast<std::uint64_t>(c);
                       store(out + i, init.constant ? scale : scale * unit_deviate(key, first + i));
                     }
                   }
                 });
  };
  if (spec.dtype == DType::kBF16 && dst_dtype == DType::kBF16) {
    // The common case, without the per-element dtype switches (rounding twice to bf16 is once).
    auto* out = static_cast<std::uint16_t*>(dst);
    generate([out](std::size_t i, float value) { out[i] = f32_to_bf16(value); });
  } else {
    // The value the checkpoint stores (spec.dtype), then the requested dtype.
    generate([&](std::size_t i, float value) {
      store_from_f32(dst_dtype, dst, i, round_to(spec.dtype, value));
    });
  }
}

SyntheticSource::SyntheticSource(SyntheticModelSpec spec) : spec_(std::move(spec)) {
  for (const ExpectedTensor& tensor : expected_tensors(spec_.config)) {
    if (tensor.required) shapes_[tensor.name] = tensor.shape;
  }
}

void SyntheticSource::validate(const ModelConfig& config) const {
  SELFSPEC_CHECK(config.num_layers == spec_.config.num_layers &&
                     config.hidden_size == spec_.config.hidden_size &&
                     config.vocab_size == spec_.config.vocab_size,
                 "synthetic weights were made for a different geometry");
}

const std::vector<std::int64_t>& SyntheticSource::shape_of(const std::string& name) const {
  const auto it = shapes_.find(name);
  SELFSPEC_CHECK(it != shapes_.end(), "synthetic weights have no tensor '{}'", name);
  return it->second;
}

DType SyntheticSource::dtype(const std::string& name) const {
  shape_of(name);
  return spec_.dtype;
}

void SyntheticSource::read(const std::string& name, const TensorSlice& slice, DType dst_dtype,
                           void* dst) const {
  if (const std::optional<WeightFormat> format = quantized_format(name)) {
    const std::vector<std::int64_t>& shape = shape_of(name);
    synthetic_quantized_values(*format, fnv1a(name, spec_.seed), init_for(spec_, name).value,
                               shape[0], shape[1], slice, dst_dtype, dst);
    return;
  }
  fill_synthetic_slice(spec_, name, shape_of(name), slice, dst_dtype, dst);
}

std::string SyntheticSource::describe() const {
  if (spec_.matrix_format) {
    return fmt::format("synthetic weights (seed {}, matrices {}, the rest {})", spec_.seed,
                       weight_format_name(*spec_.matrix_format), dtype_name(spec_.dtype));
  }
  return fmt::format("synthetic weights (seed {}, {})", spec_.seed, dtype_name(spec_.dtype));
}

std::optional<WeightFormat> SyntheticSource::quantized_format(const std::string& name) const {
  if (!spec_.matrix_format) return std::nullopt;
  const std::vector<std::int64_t>& shape = shape_of(name);
  if (shape.size() != 2) return std::nullopt;
  const std::int64_t block = ggml_block_elements(kernels::cpu::ggml_type_of(*spec_.matrix_format));
  if (shape[1] % block != 0) return std::nullopt;  // not whole blocks: dense
  return spec_.matrix_format;
}

QuantizedSlice SyntheticSource::read_quantized(const std::string& name,
                                               const TensorSlice& slice) const {
  const std::optional<WeightFormat> format = quantized_format(name);
  SELFSPEC_CHECK(format.has_value(), "synthetic tensor '{}' is not stored quantized", name);
  const std::vector<std::int64_t>& shape = shape_of(name);
  return synthetic_quantized_slice(*format, fnv1a(name, spec_.seed), init_for(spec_, name).value,
                                   shape[0], shape[1], slice);
}

std::uint64_t write_synthetic_model(const SyntheticModelSpec& spec,
                                    const std::filesystem::path& dir) {
  spec.config.validate("make-model");
  std::filesystem::create_directories(dir);
  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  writer.set_metadata("generator", "selfspec make-model");
  writer.set_metadata("seed", std::to_string(spec.seed));
  std::uint64_t total = 0;
  const std::vector<ExpectedTensor> tensors = expected_tensors(spec.config);
  for (const ExpectedTensor& tensor : tensors) {
    if (!tensor.required) continue;
    std::int64_t numel = 1;
    for (std::int64_t d : tensor.shape) numel *= d;
    total += static_cast<std::uint64_t>(numel) * dtype_size(spec.dtype);
    writer.add(tensor.name, spec.dtype, tensor.shape,
               [&spec, name = tensor.name, shape = tensor.shape](std::span<std::byte> out) {
                 const TensorSlice all{0, shape[0], 0, shape.size() == 2 ? shape[1] : 0};
                 fill_synthetic_slice(spec, name, shape, all, spec.dtype, out.data());
               });
  }
  ModelConfig config = spec.config;
  config.torch_dtype = spec.dtype;
  {
    std::ofstream out(dir / "config.json");
    SELFSPEC_CHECK(out.good(), "cannot write {}", (dir / "config.json").string());
    out << config.to_json().dump(2) << "\n";
  }
  writer.write(dir, spec.max_shard_bytes);
  return total;
}

}  // namespace selfspec
