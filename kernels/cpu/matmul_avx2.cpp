// AVX2/FMA/F16C matmul kernels (runtime-dispatched; the rest of the build stays baseline x86-64).
//
// Every function that touches AVX2 carries SELFSPEC_AVX2 (target attribute) and has internal
// linkage; the detail:: entry points declared in matmul_avx2.hpp are baseline functions that only
// forward here, so no AVX2 instruction can leak into code run on a CPU without it.
//
// Canonical order (matmul.hpp): the 16 accumulator lanes of one output live in two ymm registers
// (lo, hi); each 16-element chunk does one fma per lane, and the fixed tree (a = acc[i] + acc[i+8],
// then +4, +2, +1) ends the output. Which logical lane sits in which physical lane is a property
// of the weight type:
//  * f32, f16: lo = lanes 0..7, hi = lanes 8..15 (plain loads; f16 via VCVTPH2PS, exact);
//  * bf16: one 256-bit load of 16 weights, widened to f32 by interleaving with zeros
//    (vpunpck{l,h}wd: an exact << 16 that runs on the shuffle port and leaves both FMA ports free),
//    so lo = lanes {0-3, 8-11} and hi = lanes {4-7, 12-15}; x is permuted the same way once per
//    call, and the tree is adjusted so that it adds exactly the same logical lanes.
// x is prepared once per call into a padded copy (zeros beyond K, permuted for bf16; f32/f16 with
// K % 16 == 0 use x in place); a weight tail is copied into a zero-padded local chunk. So every
// output is bit-identical to the scalar std::fmaf emulation in matmul.cpp.
//
// Tiling changes which outputs are computed together, never the order inside one output:
//  * decode (T = 1): 4 rows at a time (8 independent accumulators hide the FMA latency and keep 4
//    weight streams in flight) with software prefetch 512 B ahead: memory-bandwidth bound;
//  * T > 1: blocks of 4 rows; tiles of 3 tokens x 2 rows (12 accumulators: each weight vector is
//    loaded and converted once for 3 tokens), the token remainder as 2 x 2 or 1 x 4 tiles so every
//    tile keeps >= 8 accumulators; the block's weights stay in L1 while its token tiles run.
// A tile does the lo halves of a chunk, then the hi halves, so few weight registers are live.
#include "kernels/cpu/matmul_avx2.hpp"

#include "core/aligned_buffer.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#define SELFSPEC_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace selfspec::kernels::cpu::detail {
namespace {

constexpr std::int64_t kLanes = 16;
// How far ahead of the current chunk each weight row is prefetched.
constexpr std::int64_t kPrefetchBytes = 512;

// f32 result of the canonical tree when lo = logical lanes 0..7 and hi = lanes 8..15.
SELFSPEC_AVX2 inline float reduce_plain(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);                                               // a[0..8)
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  // b[0..4)
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));                                  // c[0..2)
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

// Same tree when lo = logical lanes {0-3, 8-11} and hi = {4-7, 12-15} (the bf16 layout).
SELFSPEC_AVX2 inline float reduce_interleaved(__m256 lo, __m256 hi) {
  const __m128 a_low = _mm_add_ps(_mm256_castps256_ps128(lo), _mm256_extractf128_ps(lo, 1));
  const __m128 a_high = _mm_add_ps(_mm256_castps256_ps128(hi), _mm256_extractf128_ps(hi, 1));
  const __m128 b = _mm_add_ps(a_low, a_high);
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

struct F32Weights {
  using Elem = float;
  static constexpr bool kPlainLayout = true;
  SELFSPEC_AVX2 static __m256 load_lo(const Elem* p) { return _mm256_loadu_ps(p); }
  SELFSPEC_AVX2 static __m256 load_hi(const Elem* p) { return _mm256_loadu_ps(p + 8); }
  SELFSPEC_AVX2 static float reduce(__m256 lo, __m256 hi) { return reduce_plain(lo, hi); }
};

struct F16Weights {
  using Elem = std::uint16_t;
  static constexpr bool kPlainLayout = true;
  SELFSPEC_AVX2 static __m256 load_lo(const Elem* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  SELFSPEC_AVX2 static __m256 load_hi(const Elem* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  }
  SELFSPEC_AVX2 static float reduce(__m256 lo, __m256 hi) { return reduce_plain(lo, hi); }
};

struct Bf16Weights {
  using Elem = std::uint16_t;
  static constexpr bool kPlainLayout = false;
  // (0, w) 16-bit pairs are the f32 values w << 16: lanes {0-3, 8-11} and {4-7, 12-15}.
  SELFSPEC_AVX2 static __m256 load_lo(const Elem* p) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), raw));
  }
  SELFSPEC_AVX2 static __m256 load_hi(const Elem* p) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), raw));
  }
  SELFSPEC_AVX2 static float reduce(__m256 lo, __m256 hi) { return reduce_interleaved(lo, hi); }
};

// x in the physical lane layout of W, zero-padded to whole chunks: [n_tokens][stride].
struct PreparedX {
  const float* data = nullptr;
  std::int64_t stride = 0;
};

template <class W>
SELFSPEC_AVX2 PreparedX prepare_x(const float* x, std::int64_t n_tokens, std::int64_t cols) {
  if (W::kPlainLayout && cols % kLanes == 0) return PreparedX{x, cols};
  thread_local AlignedBuffer<float> buffer;
  const std::int64_t stride = (cols + kLanes - 1) / kLanes * kLanes;
  buffer.ensure(static_cast<std::size_t>(n_tokens * stride));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    const float* src = x + t * cols;
    float* dst = buffer.data() + t * stride;
    for (std::int64_t k = 0; k < stride; k += kLanes) {
      float chunk[kLanes] = {};
      std::memcpy(chunk, src + k,
                  static_cast<std::size_t>(std::min(kLanes, cols - k)) * sizeof(float));
      if constexpr (W::kPlainLayout) {
        std::memcpy(dst + k, chunk, sizeof chunk);
      } else {  // logical {0-3, 8-11} then {4-7, 12-15}
        std::memcpy(dst + k, chunk, 4 * sizeof(float));
        std::memcpy(dst + k + 4, chunk + 8, 4 * sizeof(float));
        std::memcpy(dst + k + 8, chunk + 4, 4 * sizeof(float));
        std::memcpy(dst + k + 12, chunk + 12, 4 * sizeof(float));
      }
    }
  }
  return PreparedX{buffer.data(), stride};
}

// One 16-element chunk of a kTok x kRows tile: x rows at x + t * x_stride (prepared layout),
// weight rows at w + r * w_stride.
template <class W, int kTok, int kRows>
SELFSPEC_AVX2 inline void tile_step(const float* x, std::int64_t x_stride,
                                    const typename W::Elem* w, std::int64_t w_stride,
                                    __m256 (&lo)[kTok][kRows], __m256 (&hi)[kTok][kRows]) {
  __m256 wv[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) wv[r] = W::load_lo(w + r * w_stride);
#pragma GCC unroll 8
  for (int t = 0; t < kTok; ++t) {
    const __m256 xv = _mm256_loadu_ps(x + t * x_stride);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) lo[t][r] = _mm256_fmadd_ps(xv, wv[r], lo[t][r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) wv[r] = W::load_hi(w + r * w_stride);
#pragma GCC unroll 8
  for (int t = 0; t < kTok; ++t) {
    const __m256 xv = _mm256_loadu_ps(x + t * x_stride + 8);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) hi[t][r] = _mm256_fmadd_ps(xv, wv[r], hi[t][r]);
  }
}

// y[t * y_stride + r] = dot(token t of x, row r of w) for t < kTok, r < kRows.
template <class W, int kTok, int kRows, bool kPrefetch>
SELFSPEC_AVX2 void tile(PreparedX x, const typename W::Elem* w, std::int64_t cols, float* y,
                        std::int64_t y_stride) {
  using Elem = typename W::Elem;
  __m256 lo[kTok][kRows];
  __m256 hi[kTok][kRows];
#pragma GCC unroll 8
  for (int t = 0; t < kTok; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      lo[t][r] = _mm256_setzero_ps();
      hi[t][r] = _mm256_setzero_ps();
    }
  }
  const std::int64_t k_full = cols / kLanes * kLanes;
  for (std::int64_t k = 0; k < k_full; k += kLanes) {
    if constexpr (kPrefetch) {
      constexpr std::int64_t kAhead = kPrefetchBytes / static_cast<std::int64_t>(sizeof(Elem));
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        // Address arithmetic only: prefetching past the end of a row or buffer cannot fault.
        const auto address = reinterpret_cast<std::uintptr_t>(w + r * cols + k) +
                             static_cast<std::uintptr_t>(kAhead * sizeof(Elem));
        _mm_prefetch(reinterpret_cast<const char*>(address), _MM_HINT_T0);
      }
    }
    tile_step<W, kTok, kRows>(x.data + k, x.stride, w + k, cols, lo, hi);
  }
  if (k_full < cols) {
    alignas(32) Elem w_tail[kRows][kLanes] = {};
    for (int r = 0; r < kRows; ++r) {
      std::memcpy(w_tail[r], w + r * cols + k_full,
                  static_cast<std::size_t>(cols - k_full) * sizeof(Elem));
    }
    tile_step<W, kTok, kRows>(x.data + k_full, x.stride, &w_tail[0][0], kLanes, lo, hi);
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTok; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) y[t * y_stride + r] = W::reduce(lo[t][r], hi[t][r]);
  }
}

// Decode: one token, 4 rows per tile, the remaining rows one by one.
template <class W>
SELFSPEC_AVX2 void rows_one_token(PreparedX x, const typename W::Elem* w, std::int64_t cols,
                                  std::int64_t row_begin, std::int64_t row_end, float* y) {
  std::int64_t n = row_begin;
  for (; n + 4 <= row_end; n += 4) tile<W, 1, 4, true>(x, w + n * cols, cols, y + n, 1);
  for (; n < row_end; ++n) tile<W, 1, 1, true>(x, w + n * cols, cols, y + n, 1);
}

PreparedX token_offset(PreparedX x, std::int64_t t) {
  return PreparedX{x.data + t * x.stride, x.stride};
}

// All token tiles of one row: 3 tokens at a time, then the remainder.
template <class W>
SELFSPEC_AVX2 void token_tiles_one_row(PreparedX x, std::int64_t n_tokens,
                                       const typename W::Elem* w, std::int64_t cols, float* y,
                                       std::int64_t y_stride) {
  std::int64_t t = 0;
  for (; t + 3 <= n_tokens; t += 3) {
    tile<W, 3, 1, true>(token_offset(x, t), w, cols, y + t * y_stride, y_stride);
  }
  if (n_tokens - t == 2)
    tile<W, 2, 1, true>(token_offset(x, t), w, cols, y + t * y_stride, y_stride);
  if (n_tokens - t == 1)
    tile<W, 1, 1, true>(token_offset(x, t), w, cols, y + t * y_stride, y_stride);
}

// Several tokens: blocks of 4 rows; within a block, tiles of 3 tokens x 2 rows (twice), then the
// token remainder as 2 tokens x 2 rows (twice) or 1 token x 4 rows.
template <class W>
SELFSPEC_AVX2 void rows_many_tokens(PreparedX x, std::int64_t n_tokens, const typename W::Elem* w,
                                    std::int64_t rows, std::int64_t cols, std::int64_t row_begin,
                                    std::int64_t row_end, float* y) {
  std::int64_t n = row_begin;
  for (; n + 4 <= row_end; n += 4) {
    const typename W::Elem* w0 = w + n * cols;
    const typename W::Elem* w2 = w + (n + 2) * cols;
    std::int64_t t = 0;
    for (; t + 3 <= n_tokens; t += 3) {
      tile<W, 3, 2, true>(token_offset(x, t), w0, cols, y + t * rows + n, rows);
      tile<W, 3, 2, true>(token_offset(x, t), w2, cols, y + t * rows + n + 2, rows);
    }
    if (n_tokens - t == 2) {
      tile<W, 2, 2, true>(token_offset(x, t), w0, cols, y + t * rows + n, rows);
      tile<W, 2, 2, true>(token_offset(x, t), w2, cols, y + t * rows + n + 2, rows);
    } else if (n_tokens - t == 1) {
      tile<W, 1, 4, true>(token_offset(x, t), w0, cols, y + t * rows + n, rows);
    }
  }
  for (; n < row_end; ++n) token_tiles_one_row<W>(x, n_tokens, w + n * cols, cols, y + n, rows);
}

template <class W>
SELFSPEC_AVX2 void rows_avx2(const float* x, std::int64_t n_tokens, const WeightView& w,
                             std::int64_t row_begin, std::int64_t row_end, float* y) {
  const auto* base = static_cast<const typename W::Elem*>(w.data);
  const PreparedX prepared = prepare_x<W>(x, n_tokens, w.cols);
  if (n_tokens == 1) {
    rows_one_token<W>(prepared, base, w.cols, row_begin, row_end, y);
  } else {
    rows_many_tokens<W>(prepared, n_tokens, base, w.rows, w.cols, row_begin, row_end, y);
  }
}

template <class W>
SELFSPEC_AVX2 float dot_one(const float* x, const void* w, std::int64_t n) {
  float out = 0.0f;
  tile<W, 1, 1, false>(prepare_x<W>(x, 1, n), static_cast<const typename W::Elem*>(w), n, &out, 1);
  return out;
}

}  // namespace

void matmul_rows_avx2(const float* x, std::int64_t n_tokens, const WeightView& w,
                      std::int64_t row_begin, std::int64_t row_end, float* y) {
  switch (w.dtype) {
    case DType::kF32:
      rows_avx2<F32Weights>(x, n_tokens, w, row_begin, row_end, y);
      return;
    case DType::kBF16:
      rows_avx2<Bf16Weights>(x, n_tokens, w, row_begin, row_end, y);
      return;
    case DType::kF16:
      rows_avx2<F16Weights>(x, n_tokens, w, row_begin, row_end, y);
      return;
  }
}

float dot_avx2(const float* x, const void* w, DType w_dtype, std::int64_t n) {
  switch (w_dtype) {
    case DType::kF32:
      return dot_one<F32Weights>(x, w, n);
    case DType::kBF16:
      return dot_one<Bf16Weights>(x, w, n);
    case DType::kF16:
      return dot_one<F16Weights>(x, w, n);
  }
  return 0.0f;
}

}  // namespace selfspec::kernels::cpu::detail
