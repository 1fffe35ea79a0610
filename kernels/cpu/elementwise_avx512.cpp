// AVX-512 forms of the elementwise kernels that use exp (vector_exp.hpp): SwiGLU and the softmax
// numerators, lane by lane the same IEEE operations as the scalar exp_canonical, so every ISA
// gives the same bits. Runtime-dispatched (elementwise.cpp).
#include "kernels/cpu/elementwise_simd.hpp"
#include "kernels/cpu/vector_exp.hpp"

#include "kernels/cpu/avx512_intrinsics.hpp"

#define SELFSPEC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

namespace selfspec::kernels::cpu::detail {
namespace {

SELFSPEC_AVX512 inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(kExpLo));
  x = _mm512_min_ps(x, _mm512_set1_ps(kExpHi));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP5));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(e, _mm512_castsi512_ps(bits));
}

SELFSPEC_AVX512 void swiglu_range(const float* gate, const float* up, float* out, std::int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp16(_mm512_xor_ps(g, sign));
    _mm512_storeu_ps(
        out + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    const auto mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + i);
    const __m512 e = exp16(_mm512_xor_ps(g, sign));
    _mm512_mask_storeu_ps(out + i, mask,
                          _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)),
                                        _mm512_maskz_loadu_ps(mask, up + i)));
  }
}

SELFSPEC_AVX512 void exp_shifted_range(float* x, float shift, std::int64_t n) {
  const __m512 s = _mm512_set1_ps(shift);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(x + i, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s)));
  }
  if (i < n) {
    const auto mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(x + i, mask, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), s)));
  }
}

}  // namespace

void swiglu_avx512(const float* gate, const float* up, float* out, std::int64_t n) {
  swiglu_range(gate, up, out, n);
}

void exp_shifted_avx512(float* x, float shift, std::int64_t n) {
  exp_shifted_range(x, shift, n);
}

}  // namespace selfspec::kernels::cpu::detail
