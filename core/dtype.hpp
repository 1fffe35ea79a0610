// Storage dtypes of weights (activations are always f32 on the CPU backend) and exact scalar
// conversions between them. The conversions are written by hand because they must be bit-exact
// (round-to-nearest-even, NaN/Inf/subnormal preserving) and usable from kernels and tests alike;
// no packaged library provides bf16.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace selfspec {

enum class DType : std::uint8_t { kF32, kBF16, kF16 };

constexpr std::size_t dtype_size(DType dtype) {
  return dtype == DType::kF32 ? 4 : 2;
}

// Lower-case name used on the command line and in JSON: "f32", "bf16", "f16".
std::string_view dtype_name(DType dtype);
// Name as used in safetensors headers: "F32", "BF16", "F16".
std::string_view dtype_safetensors_name(DType dtype);
// Parses "f32"/"float32"/"bf16"/"bfloat16"/"f16"/"float16" (any case) and safetensors names.
std::optional<DType> parse_dtype(std::string_view text);

inline float bf16_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

inline std::uint16_t f32_to_bf16(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN, keep sign
  }
  const std::uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding_bias) >> 16);
}

float f16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_f16(float value);

// Reads element i of a buffer of the given dtype as f32.
inline float load_as_f32(DType dtype, const void* data, std::size_t i) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(data)[i];
    case DType::kBF16:
      return bf16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
    case DType::kF16:
      return f16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
  }
  return 0.0f;
}

// Writes an f32 value as element i of a buffer of the given dtype (rounding to nearest even).
inline void store_from_f32(DType dtype, void* data, std::size_t i, float value) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(data)[i] = value;
      return;
    case DType::kBF16:
      static_cast<std::uint16_t*>(data)[i] = f32_to_bf16(value);
      return;
    case DType::kF16:
      static_cast<std::uint16_t*>(data)[i] = f32_to_f16(value);
      return;
  }
}

// Converts n elements between dtypes (same dtype: memcpy).
void convert_dtype(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t n);

}  // namespace selfspec
