#include "core/dtype.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

namespace selfspec {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
  }
  return "?";
}

std::string_view dtype_safetensors_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "f32" || lower == "float32" || lower == "float") return DType::kF32;
  if (lower == "bf16" || lower == "bfloat16") return DType::kBF16;
  if (lower == "f16" || lower == "float16" || lower == "half") return DType::kF16;
  return std::nullopt;
}

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t out = 0;
  if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;
    } else {  // subnormal: normalise
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ffu;
      out = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1fu) {
    out = sign | 0x7f800000u | (mantissa << 13);  // Inf or NaN
  } else {
    out = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(out);
}

std::uint16_t f32_to_f16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> Inf
  if (abs < 0x38800000u) {               // result is subnormal or zero in f16
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal: rounds to zero
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    // value = mantissa * 2^(exponent-150) and the f16 subnormal unit is 2^-24, so the f16
    // mantissa is mantissa >> (126 - exponent), rounded to nearest even.
    const std::uint32_t shift = 126 - exponent;
    const std::uint32_t half_mantissa = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    std::uint32_t result = half_mantissa;
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) ++result;
    return static_cast<std::uint16_t>(sign | result);
  }
  // normal: rebias exponent, round mantissa from 23 to 10 bits (nearest even)
  std::uint32_t result = ((abs >> 13) - ((127u - 15u) << 10));
  const std::uint32_t remainder = abs & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

void convert_dtype(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t n) {
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, n * dtype_size(src_dtype));
    return;
  }
  for (std::size_t i = 0; i < n; ++i)
    store_from_f32(dst_dtype, dst, i, load_as_f32(src_dtype, src, i));
}

}  // namespace selfspec
