// exp(x) for f32 by one fixed sequence of IEEE operations, so the scalar path and the AVX2 and
// AVX-512 paths (elementwise_avx2.cpp, elementwise_avx512.cpp) give the same bits: the CPU
// kernels' SiLU and softmax use it instead of the C library's expf, which has no vector form with
// the same results and cost as much as a decode step's matmuls once T tokens share the forward.
//
// The method is Cephes' expf (S. Moshier): x clamped to [-87, 88] (so 2^n stays a normal f32:
// exp(-87) = 1.6e-38 for anything below, exp(88) = 1.65e38 above), n = round-to-nearest-even(x ·
// log2 e), r = x - n · ln 2 in two fma steps (ln 2 split into 0.693359375 + -2.12194440e-4), a
// degree-5 polynomial p(r) by Horner fma steps, exp(r) = fma(p, r², r) + 1, then times 2^n built
// from its exponent bits. Within 2 ulp of exp over the range (Cephes' figure: 1.1e-7 relative).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace selfspec::kernels::cpu {

inline constexpr float kExpLo = -87.0f;
inline constexpr float kExpHi = 88.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kExpP0 = 1.9875691500e-4f;
inline constexpr float kExpP1 = 1.3981999507e-3f;
inline constexpr float kExpP2 = 8.3334519073e-3f;
inline constexpr float kExpP3 = 4.1665795894e-2f;
inline constexpr float kExpP4 = 1.6666665459e-1f;
inline constexpr float kExpP5 = 5.0000001201e-1f;

// The scalar form (std::fmaf: correctly rounded, as vfmadd). The clamps are written as vmaxps /
// vminps evaluate them (the constant wins when x is NaN).
inline float exp_canonical(float x) {
  x = x > kExpLo ? x : kExpLo;
  x = x < kExpHi ? x : kExpHi;
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fmaf(-n, kLn2Hi, x);
  r = std::fmaf(-n, kLn2Lo, r);
  float p = kExpP0;
  p = std::fmaf(p, r, kExpP1);
  p = std::fmaf(p, r, kExpP2);
  p = std::fmaf(p, r, kExpP3);
  p = std::fmaf(p, r, kExpP4);
  p = std::fmaf(p, r, kExpP5);
  const float e = std::fmaf(p, r * r, r) + 1.0f;
  const auto bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
  return e * std::bit_cast<float>(bits);
}

// SiLU-gated product, the CPU kernels' SwiGLU: gate / (1 + exp(-gate)) * up.
inline float swiglu_canonical(float gate, float up) {
  return gate / (1.0f + exp_canonical(-gate)) * up;
}

}  // namespace selfspec::kernels::cpu
