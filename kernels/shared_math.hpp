// Formulas shared by the CPU kernels and the CUDA kernels (`__host__ __device__` under nvcc), so
// both backends compute the same expression for the simple elementwise math: SiLU, the
// rotate-half RoPE pair rotation, the bf16/f16 weight decodings, the bf16 rounding of a KV
// cache's writes, and the three-part bf16 split of an f32 activation (the tensor-core GEMV).
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

// An f32 value as the sum of three bf16 values, hi + mid + lo, each the nearest-even rounding of
// what the parts before it left: hi = bf16(x), mid = bf16(x − hi), lo = bf16(x − hi − mid) (each
// subtraction exact in f32). For |x| in [2^-100, 2^100] the sum is x exactly (kernels_test checks
// it over random values), so a product of a bf16 weight with the three parts, each exact in f32,
// carries all of x's 24 significant bits: the tensor-core GEMV (kernels/cuda/matmul_tensor_core.cu)
// multiplies f32 activations this way. Outside that range the low parts may lose bits to
// underflow; an infinite or NaN x gives NaN parts.
struct Bf16Parts {
  std::uint16_t hi;
  std::uint16_t mid;
  std::uint16_t lo;
};
SELFSPEC_HOST_DEVICE inline Bf16Parts split_to_bf16_parts(float x) {
  const std::uint16_t hi = float_to_bf16_bits(x);
  const float rest = x - bf16_bits_to_float(hi);
  const std::uint16_t mid = float_to_bf16_bits(rest);
  const float last = rest - bf16_bits_to_float(mid);
  return {hi, mid, float_to_bf16_bits(last)};
}

}  // namespace selfspec::kernels
