// How a weight matrix's values are encoded: a dense dtype (f32, bf16, f16) or one of ggml's
// quantized block formats, run as stored ("native" GGUF weights). The encoding says nothing of
// the layout in memory, which is the backend's business: the CPU backend keeps f32/f16 row-major
// and bf16 and quantized matrices in row panels (kernels/cpu/packed_weights.hpp); the CUDA
// backend runs dense dtypes only.
#pragma once

#include "core/dtype.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

enum class WeightFormat : std::uint8_t {
  kF32,
  kBF16,
  kF16,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_0,
  kQ4_K,
  kQ5_K,
  kQ6_K,
};

// Every quantized format, in the order above.
inline constexpr WeightFormat kQuantizedFormats[] = {
    WeightFormat::kQ4_0, WeightFormat::kQ4_1, WeightFormat::kQ5_0, WeightFormat::kQ5_1,
    WeightFormat::kQ8_0, WeightFormat::kQ4_K, WeightFormat::kQ5_K, WeightFormat::kQ6_K,
};

constexpr bool is_quantized(WeightFormat format) {
  return format != WeightFormat::kF32 && format != WeightFormat::kBF16 &&
         format != WeightFormat::kF16;
}

constexpr WeightFormat dense_format(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return WeightFormat::kF32;
    case DType::kBF16:
      return WeightFormat::kBF16;
    case DType::kF16:
      return WeightFormat::kF16;
  }
  return WeightFormat::kF32;
}

// The dtype of a dense format; nullopt for a quantized one.
constexpr std::optional<DType> dense_dtype(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
      return DType::kF32;
    case WeightFormat::kBF16:
      return DType::kBF16;
    case WeightFormat::kF16:
      return DType::kF16;
    default:
      return std::nullopt;
  }
}

// "f32", "bf16", "f16", "q4_0", ..., "q6_k" (JSON and the command line).
std::string_view weight_format_name(WeightFormat format);
// The format of such a name; nullopt for any other text.
std::optional<WeightFormat> parse_weight_format(std::string_view name);
// `first` (an option's own word, e.g. "auto" or "none"), then every format's name: the dense
// ones, then the quantized ones (the choices of options that take a format).
std::vector<std::string> weight_format_choices(std::string_view first);

}  // namespace selfspec
