// AVX2 path of the bf16 panel matmul (bf16_matmul.hpp), for CPUs without AVX-512 BF16. Each
// vdpbf16ps step becomes two FMAs (odd element first) on bf16 values widened to f32, which are
// exact; with MXCSR's DAZ and FTZ set, an FMA reads subnormals as zero and flushes subnormal
// results, as vdpbf16ps does, so the accumulators get the same bits. MXCSR is restored before the
// final sums (IEEE additions) and before returning. One lane per row: a 16-row panel runs as two
// halves of 8 rows (the low and high 32 bytes of each 64-byte block).
#include "kernels/cpu/bf16_matmul.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#define SELFSPEC_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace selfspec::kernels::cpu::detail {
namespace {

constexpr int kMaxTile = 3;
constexpr unsigned kDazFtz = 0x8040;  // MXCSR: flush to zero (bit 15), denormals are zero (bit 6)

// This thread's MXCSR as the caller had it, with DAZ and FTZ set by flush() and cleared by
// restore(); restored when the object goes.
class FlushDenormals {
 public:
  FlushDenormals() : saved_(_mm_getcsr()) {}
  ~FlushDenormals() { _mm_setcsr(saved_); }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;
  void flush() const { _mm_setcsr(saved_ | kDazFtz); }
  void restore() const { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
};

// The even (low) and odd (high) bf16 of each 32-bit lane, widened to f32.
SELFSPEC_AVX2 inline __m256 even_half(__m256i v) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
SELFSPEC_AVX2 inline __m256 odd_half(__m256i v) {
  return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

SELFSPEC_AVX2 inline __m256i broadcast_pair(const std::uint16_t* x) {
  std::int32_t v;
  std::memcpy(&v, x, sizeof v);
  return _mm256_set1_epi32(v);
}

template <int kTile>
SELFSPEC_AVX2 void half_tile(const std::byte* panel, int h, std::int64_t steps,
                             const std::uint16_t* xb, std::int64_t padded, float* y,
                             std::int64_t y_stride, int rows, const FlushDenormals& mxcsr) {
  __m256 acc[kTile][4];
#pragma GCC unroll 3
  for (int t = 0; t < kTile; ++t) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[t][j] = _mm256_setzero_ps();
  }
  mxcsr.flush();
  const std::byte* w = panel + 32 * h;
  for (std::int64_t s = 0; s < steps; ++s, w += 256) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 64 * j));
      const __m256 w_even = even_half(wv);
      const __m256 w_odd = odd_half(wv);
#pragma GCC unroll 3
      for (int t = 0; t < kTile; ++t) {
        const __m256i xv = broadcast_pair(xb + t * padded + s * kBf16StepCols + 2 * j);
        acc[t][j] = _mm256_fmadd_ps(odd_half(xv), w_odd, acc[t][j]);
        acc[t][j] = _mm256_fmadd_ps(even_half(xv), w_even, acc[t][j]);
      }
    }
  }
  mxcsr.restore();
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i store_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), lanes);
#pragma GCC unroll 3
  for (int t = 0; t < kTile; ++t) {
    const __m256 sum =
        _mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3]));
    _mm256_maskstore_ps(y + t * y_stride + 8 * h, store_mask, sum);
  }
}

SELFSPEC_AVX2 void panels(const PanelGeometry& g, const std::uint16_t* xb, std::int64_t tokens,
                          std::int64_t panel_begin, std::int64_t panel_end, float* y,
                          std::int64_t y_stride) {
  const std::int64_t steps = (g.cols + kBf16StepCols - 1) / kBf16StepCols;
  const std::int64_t padded = steps * kBf16StepCols;
  const FlushDenormals mxcsr;
  for (std::int64_t p = panel_begin; p < panel_end; ++p) {
    const std::byte* panel = g.panel(p);
    const std::int64_t valid = std::min(kPanelRows, g.rows - p * kPanelRows);
    float* yp = y + p * kPanelRows;
    for (int h = 0; h < 2; ++h) {
      const int rows = static_cast<int>(std::clamp<std::int64_t>(valid - 8 * h, 0, 8));
      if (rows == 0) continue;
      std::int64_t t0 = 0;
      for (; t0 + kMaxTile <= tokens; t0 += kMaxTile) {
        half_tile<kMaxTile>(panel, h, steps, xb + t0 * padded, padded, yp + t0 * y_stride, y_stride,
                            rows, mxcsr);
      }
      const std::uint16_t* xt = xb + t0 * padded;
      float* yt = yp + t0 * y_stride;
      switch (tokens - t0) {
        case 2:
          half_tile<2>(panel, h, steps, xt, padded, yt, y_stride, rows, mxcsr);
          break;
        case 1:
          half_tile<1>(panel, h, steps, xt, padded, yt, y_stride, rows, mxcsr);
          break;
        default:
          break;
      }
    }
  }
}

}  // namespace

void bf16_panels_avx2(const PanelGeometry& g, const std::uint16_t* xb, std::int64_t tokens,
                      std::int64_t panel_begin, std::int64_t panel_end, float* y,
                      std::int64_t y_stride) {
  panels(g, xb, tokens, panel_begin, panel_end, y, y_stride);
}

}  // namespace selfspec::kernels::cpu::detail
