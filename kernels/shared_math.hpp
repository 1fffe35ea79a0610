// Formulas shared by the CPU kernels and the CUDA kernels (`__host__ __device__` under nvcc), so
// both backends compute the same expression for the simple elementwise math: SiLU, the
// rotate-half RoPE pair rotation, the bf16/f16 weight decodings, and the bf16 rounding of a KV
// cache's writes.
#pragma once

#include "kernels/host_device.hpp"

#include <bit>
#include <cmath>
#include <cstdint>

namespace selfspec::kernels {

// silu(g) = g / (1 + exp(-g)); SwiGLU output = silu(gate) * up (divide, then multiply; no
// multiply-add to contract). The device uses CUDA's expf (<= 2 ulp), the CPU kernels their own exp
// (kernels/cpu/vector_exp.hpp: the same bits on every ISA, within 2 ulp), so the backends agree to
// a few ulp, not bit for bit.
SELFSPEC_HOST_DEVICE inline float swiglu_value(float gate, float up) {
  return gate / (1.0f + expf(-gate)) * up;
}

// Rotate-half RoPE for the pair (x[i], x[i + d/2]) at angle θ: returns the new pair.
struct RopePair {
  float first;
  float second;
};
// Two rounded products and a rounded sum per output, never fused: the host build is baseline
// x86-64 (no FMA contraction), and on the device the _rn intrinsics forbid nvcc's contraction, so
// both backends give the same bits for the same (cos, sin).
SELFSPEC_HOST_DEVICE inline RopePair rope_rotate(float x_first, float x_second, float cos_theta,
                                                 float sin_theta) {
#if defined(__CUDA_ARCH__)
  return {__fsub_rn(__fmul_rn(x_first, cos_theta), __fmul_rn(x_second, sin_theta)),
          __fadd_rn(__fmul_rn(x_second, cos_theta), __fmul_rn(x_first, sin_theta))};
#else
  return {x_first * cos_theta - x_second * sin_theta, x_second * cos_theta + x_first * sin_theta};
#endif
}

// bf16 bits -> f32 (exact).
SELFSPEC_HOST_DEVICE inline float bf16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(word);
#else
  return std::bit_cast<float>(word);
#endif
}

// f32 -> bf16 bits, rounded to nearest even, a NaN kept quiet with its sign: core/dtype.hpp's
// f32_to_bf16, written once for both sides (CUDA's __float2bfloat16_rn returns one canonical NaN
// instead). kernels_test holds the two equal.
SELFSPEC_HOST_DEVICE inline std::uint16_t float_to_bf16_bits(float value) {
#if defined(__CUDA_ARCH__)
  const std::uint32_t bits = __float_as_uint(value);
#else
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
#endif
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  const std::uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding_bias) >> 16);
}

}  // namespace selfspec::kernels
