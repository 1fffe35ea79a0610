// AVX2 kernels of the quantized matmul (quant_matmul.hpp), for CPUs without AVX-512 VNNI;
// runtime-dispatched like matmul_avx2.cpp (SELFSPEC_AVX2 functions with internal linkage).
//
// The AVX-512 kernel's scheme on ymm registers: one lane per row, so a 16-row panel runs as two
// halves of 8 rows (the low and high 32 bytes of every 64-byte block). The integer sums use
// vpmaddubsw (u8 x s8 pairs to s16) and vpmaddwd against ones (to s32): exact while a pair's sum
// fits 16 bits, which holds for quants of up to 6 bits (two W_k are added as s16 before widening:
// 2 x 2 x 63 x 127 < 32768). 8-bit quants are split into their two nibbles, whose sums are
// combined as lo + 16 hi, exactly. The float sequence is the canonical one, lane-wise.
#include "kernels/cpu/quant_matmul.hpp"

#include "core/error.hpp"
#include "core/weight_format.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#define SELFSPEC_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace selfspec::kernels::cpu::detail {
namespace {

constexpr int kMaxTile = 4;

// The eight W_k of one group for rows 8h..8h+7 (bits: 4, 5 or 6; 8-bit quants are handled by
// their nibbles, see dot8).
template <int kBits>
SELFSPEC_AVX2 inline void unpack(const std::byte* q, int h, __m256i (&w)[8]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * j + 32 * h));
    w[j] = _mm256_and_si256(v, low4);
    w[j + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  }
  if constexpr (kBits == 5) {
    // Byte i of the mask's 32 bits selects bit i % 8 of byte i / 8.
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                            2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i select = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    const __m256i sixteen = _mm256_set1_epi8(16);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      std::int32_t bits;
      std::memcpy(&bits, q + 256 + 8 * k + 4 * h, sizeof bits);
      const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits), spread);
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, select), select);
      w[k] = _mm256_or_si256(w[k], _mm256_and_si256(set, sixteen));
    }
  } else if constexpr (kBits == 6) {
    const __m256i mask = _mm256_set1_epi8(0x30);
#pragma GCC unroll 2
    for (int b = 0; b < 2; ++b) {
      const __m256i hv =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 256 + 64 * b + 32 * h));
      w[4 * b + 0] =
          _mm256_or_si256(w[4 * b + 0], _mm256_and_si256(_mm256_slli_epi16(hv, 4), mask));
      w[4 * b + 1] =
          _mm256_or_si256(w[4 * b + 1], _mm256_and_si256(_mm256_slli_epi16(hv, 2), mask));
      w[4 * b + 2] = _mm256_or_si256(w[4 * b + 2], _mm256_and_si256(hv, mask));
      w[4 * b + 3] =
          _mm256_or_si256(w[4 * b + 3], _mm256_and_si256(_mm256_srli_epi16(hv, 2), mask));
    }
  }
}

SELFSPEC_AVX2 inline __m256i broadcast4(const std::int8_t* x) {
  std::int32_t v;
  std::memcpy(&v, x, sizeof v);
  return _mm256_set1_epi32(v);
}

// Σ u · xq over W_k for k in [kBegin, kEnd) (u < 64): pairs of W_k summed as s16, then widened.
template <int kBegin, int kEnd>
SELFSPEC_AVX2 inline __m256i dot(const __m256i (&w)[8], const std::int8_t* xq) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int k = kBegin; k < kEnd; k += 2) {
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(w[k], broadcast4(xq + 4 * k)),
                                       _mm256_maddubs_epi16(w[k + 1], broadcast4(xq + 4 * k + 4)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
  }
  return acc;
}

// Σ u · xq of an 8-bit group for rows 8h..8h+7: the low and high nibbles' sums, lo + 16 hi.
SELFSPEC_AVX2 inline __m256i dot8(const std::byte* q, int h, const std::int8_t* xq) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256i lo[8];
  __m256i hi[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * k + 32 * h));
    lo[k] = _mm256_and_si256(v, low4);
    hi[k] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  }
  return _mm256_add_epi32(dot<0, 8>(lo, xq), _mm256_slli_epi32(dot<0, 8>(hi, xq), 4));
}

SELFSPEC_AVX2 inline __m256 load_f16x8(const std::byte* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

SELFSPEC_AVX2 inline __m256 load_u8x8(const std::byte* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

SELFSPEC_AVX2 inline __m256 load_i8x8(const std::byte* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// Rows 8h..8h+7 of one panel for a tile of kTile tokens from t0: the canonical sequence per lane.
template <WeightFormat kFormat, int kBits, int kTile>
SELFSPEC_AVX2 void half_tile(const PanelGeometry& g, const QuantLayout& layout,
                             const std::byte* panel, int h, const QuantizedActivations& a,
                             std::int64_t t0, float* y, std::int64_t y_stride, int rows) {
  constexpr bool kOffset = kFormat == WeightFormat::kQ4_0 || kFormat == WeightFormat::kQ5_0 ||
                           kFormat == WeightFormat::kQ8_0;
  constexpr bool kMin = kFormat == WeightFormat::kQ4_1 || kFormat == WeightFormat::kQ5_1;
  constexpr bool kKMin = kFormat == WeightFormat::kQ4_K || kFormat == WeightFormat::kQ5_K;
  constexpr bool kQ6 = kFormat == WeightFormat::kQ6_K;
  const std::int64_t groups = g.groups();
  const std::int64_t cols = a.cols;
  const int offset = layout.offset;

  __m256 yv[kTile];
  __m256 acc1[kTile];
  __m256 acc2[kTile];
#pragma GCC unroll 4
  for (int t = 0; t < kTile; ++t) {
    yv[t] = _mm256_setzero_ps();
    acc1[t] = _mm256_setzero_ps();
    acc2[t] = _mm256_setzero_ps();
  }
  const std::byte* cursor = panel;
  std::int64_t group = 0;
  for (std::int64_t s = 0; s < g.segments(); ++s) {
    const std::byte* seg = cursor;
    cursor += layout.segment_params;
    for (std::int64_t i = 0; i < g.segment_groups(s); ++i, ++group) {
      const std::byte* params = cursor;
      const std::byte* quants = cursor + layout.group_params;
      cursor += layout.group_bytes();
      __m256i w[8];
      if constexpr (kBits != 8) unpack<kBits>(quants, h, w);
      __m256 p0;
      __m256 p1;
      if constexpr (kOffset || kMin) {
        p0 = load_f16x8(params + 16 * h);
        if constexpr (kMin) p1 = load_f16x8(params + 32 + 16 * h);
      } else if constexpr (kKMin) {
        p0 = load_u8x8(params + 8 * h);
        p1 = load_u8x8(params + 16 + 8 * h);
      } else {
        p0 = load_i8x8(params + 8 * h);
        p1 = load_i8x8(params + 16 + 8 * h);
      }
#pragma GCC unroll 4
      for (int t = 0; t < kTile; ++t) {
        const std::int64_t tg = (t0 + t) * groups + group;
        const std::int8_t* xq = a.q.data() + (t0 + t) * cols + group * kGroupCols;
        const __m256 dx = _mm256_set1_ps(a.dx[static_cast<std::size_t>(tg)]);
        if constexpr (kOffset) {
          __m256i sum;
          if constexpr (kBits == 8) {
            sum = dot8(quants, h, xq);
          } else {
            sum = dot<0, 8>(w, xq);
          }
          const __m256i j = _mm256_sub_epi32(
              sum, _mm256_set1_epi32(offset * a.s32[static_cast<std::size_t>(tg)]));
          yv[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(j), _mm256_mul_ps(p0, dx), yv[t]);
        } else if constexpr (kMin) {
          const __m256 prod = _mm256_mul_ps(p0, _mm256_cvtepi32_ps(dot<0, 8>(w, xq)));
          const __m256 b =
              _mm256_fmadd_ps(p1, _mm256_set1_ps(a.s[static_cast<std::size_t>(tg)]), prod);
          yv[t] = _mm256_fmadd_ps(b, dx, yv[t]);
        } else if constexpr (kKMin) {
          const __m256 prod = _mm256_mul_ps(_mm256_cvtepi32_ps(dot<0, 8>(w, xq)), dx);
          acc1[t] = _mm256_fmadd_ps(prod, p0, acc1[t]);
          acc2[t] =
              _mm256_fmadd_ps(p1, _mm256_set1_ps(a.dxs[static_cast<std::size_t>(tg)]), acc2[t]);
        } else if constexpr (kQ6) {
          const std::int32_t* s16 = a.s16.data() + 2 * tg;
          const __m256i ja = _mm256_sub_epi32(dot<0, 4>(w, xq), _mm256_set1_epi32(32 * s16[0]));
          const __m256i jb = _mm256_sub_epi32(dot<4, 8>(w, xq), _mm256_set1_epi32(32 * s16[1]));
          const __m256 b = _mm256_fmadd_ps(_mm256_cvtepi32_ps(jb), p1,
                                           _mm256_mul_ps(_mm256_cvtepi32_ps(ja), p0));
          acc1[t] = _mm256_fmadd_ps(b, dx, acc1[t]);
        }
      }
    }
    if constexpr (kKMin) {
      const __m256 d = load_f16x8(seg + 16 * h);
      const __m256 dmin = load_f16x8(seg + 32 + 16 * h);
#pragma GCC unroll 4
      for (int t = 0; t < kTile; ++t) {
        yv[t] = _mm256_fmadd_ps(acc1[t], d, yv[t]);
        yv[t] = _mm256_fnmadd_ps(acc2[t], dmin, yv[t]);
        acc1[t] = _mm256_setzero_ps();
        acc2[t] = _mm256_setzero_ps();
      }
    } else if constexpr (kQ6) {
      const __m256 d = load_f16x8(seg + 16 * h);
#pragma GCC unroll 4
      for (int t = 0; t < kTile; ++t) {
        yv[t] = _mm256_fmadd_ps(acc1[t], d, yv[t]);
        acc1[t] = _mm256_setzero_ps();
      }
    }
  }
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i store_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), lanes);
#pragma GCC unroll 4
  for (int t = 0; t < kTile; ++t) {
    _mm256_maskstore_ps(y + (t0 + t) * y_stride + 8 * h, store_mask, yv[t]);
  }
}

template <WeightFormat kFormat, int kBits>
SELFSPEC_AVX2 void panels(const PanelGeometry& g, const QuantizedActivations& a,
                          std::int64_t panel_begin, std::int64_t panel_end, float* y,
                          std::int64_t y_stride) {
  const QuantLayout layout = quant_layout(kFormat);
  for (std::int64_t p = panel_begin; p < panel_end; ++p) {
    const std::byte* panel = g.panel(p);
    const std::int64_t valid = std::min(kPanelRows, g.rows - p * kPanelRows);
    float* yp = y + p * kPanelRows;
    for (int h = 0; h < 2; ++h) {
      const int rows = static_cast<int>(std::clamp<std::int64_t>(valid - 8 * h, 0, 8));
      if (rows == 0) continue;
      std::int64_t t0 = 0;
      for (; t0 + kMaxTile <= a.tokens; t0 += kMaxTile) {
        half_tile<kFormat, kBits, kMaxTile>(g, layout, panel, h, a, t0, yp, y_stride, rows);
      }
      switch (a.tokens - t0) {
        case 3:
          half_tile<kFormat, kBits, 3>(g, layout, panel, h, a, t0, yp, y_stride, rows);
          break;
        case 2:
          half_tile<kFormat, kBits, 2>(g, layout, panel, h, a, t0, yp, y_stride, rows);
          break;
        case 1:
          half_tile<kFormat, kBits, 1>(g, layout, panel, h, a, t0, yp, y_stride, rows);
          break;
        default:
          break;
      }
    }
  }
}

// ---- Activations ---------------------------------------------------------------------------

SELFSPEC_AVX2 inline float reduce_max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

SELFSPEC_AVX2 inline std::int32_t reduce_add8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

SELFSPEC_AVX2 void quantize_group(const float* xs, std::int8_t* q, float& dx_out,
                                  std::int32_t (&halves)[2]) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 x[4];
  __m256 m = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    x[i] = _mm256_loadu_ps(xs + 8 * i);
    m = _mm256_max_ps(_mm256_andnot_ps(sign, x[i]), m);  // |x| first: a NaN never wins
  }
  const float amax = reduce_max8(m);
  dx_out = amax / 127.0f;
  const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
  const __m256 lo = _mm256_set1_ps(-127.0f);
  const __m256 hi = _mm256_set1_ps(127.0f);
  __m256i iv[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(x[i], inv), lo), hi);
    iv[i] = _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  halves[0] = reduce_add8(_mm256_add_epi32(iv[0], iv[1]));
  halves[1] = reduce_add8(_mm256_add_epi32(iv[2], iv[3]));
  // Pack to bytes (values fit, so saturation never applies), then undo the lane interleave of
  // the packs.
  const __m256i w01 = _mm256_packs_epi32(iv[0], iv[1]);
  const __m256i w23 = _mm256_packs_epi32(iv[2], iv[3]);
  const __m256i b = _mm256_packs_epi16(w01, w23);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(b, order));
}

}  // namespace

void quant_panels_avx2(const PanelGeometry& g, const QuantizedActivations& a,
                       std::int64_t panel_begin, std::int64_t panel_end, float* y,
                       std::int64_t y_stride) {
  switch (g.format) {
    case WeightFormat::kQ4_0:
      return panels<WeightFormat::kQ4_0, 4>(g, a, panel_begin, panel_end, y, y_stride);
    case WeightFormat::kQ4_1:
      return panels<WeightFormat::kQ4_1, 4>(g, a, panel_begin, panel_end, y, y_stride);
    case WeightFormat::kQ5_0:
      return panels<WeightFormat::kQ5_0, 5>(g, a, panel_begin, panel_end, y, y_stride);
    case WeightFormat::kQ5_1:
      return panels<WeightFormat::kQ5_1, 5>(g, a, panel_begin, panel_end, y, y_stride);
    case WeightFormat::kQ8_0:
      return panels<WeightFormat::kQ8_0, 8>(g, a, panel_begin, panel_end, y, y_stride);
    case WeightFormat::kQ4_K:
      return panels<WeightFormat::kQ4_K, 4>(g, a, panel_begin, panel_end, y, y_stride);
    case WeightFormat::kQ5_K:
      return panels<WeightFormat::kQ5_K, 5>(g, a, panel_begin, panel_end, y, y_stride);
    case WeightFormat::kQ6_K:
      return panels<WeightFormat::kQ6_K, 6>(g, a, panel_begin, panel_end, y, y_stride);
    default:  // an unknown format is an error, never an output left unwritten
      fail("quant_panels_avx2: format {} is not quantized", weight_format_name(g.format));
  }
}

void quantize_activations_avx2(const float* x, std::int64_t tokens, std::int64_t cols,
                               QuantizedActivations& out) {
  const std::int64_t groups = cols / kGroupCols;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t g = 0; g < groups; ++g) {
      const auto tg = static_cast<std::size_t>(t * groups + g);
      std::int32_t halves[2];
      float dx = 0.0f;
      quantize_group(x + t * cols + g * kGroupCols, out.q.data() + t * cols + g * kGroupCols, dx,
                     halves);
      record_group(out, tg, dx, halves);
    }
  }
}

}  // namespace selfspec::kernels::cpu::detail
