// AVX-512 VNNI kernels of the quantized matmul (quant_matmul.hpp), runtime-dispatched: every
// function here carries SELFSPEC_AVX512 and has internal linkage but the detail:: entry points,
// which only run when detected_isa() is Isa::kAvx512.
//
// One zmm lane per panel row. Per group of 32 columns, the quants unpack to eight zmm W_k (16 rows
// x 4 columns of unsigned bytes) and each token's integer sum is eight vpdpbusd of W_k against
// the token's 4 activation bytes of those columns, broadcast (the sum is exact, so it is split
// over two chains to halve its latency). The group's scales then enter in the canonical float
// sequence, lane-wise. Tokens go in tiles of up to kMaxTile: the unpacked W_k of a group are used
// by every token of the tile while in registers, and the panel is walked once per tile (from
// memory for the first tile, from L1/L2 after), so for T <= kMaxTile every weight byte is read
// once per forward whatever T is.
#include "kernels/cpu/quant_matmul.hpp"

#include "core/error.hpp"
#include "core/weight_format.hpp"

#include "kernels/cpu/avx512_intrinsics.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#define SELFSPEC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace selfspec::kernels::cpu::detail {
namespace {

constexpr int kMaxTile = 8;
// Prefetch distance in the panel stream (bytes ahead of the group being computed).
constexpr std::int64_t kPrefetchAhead = 8192;

// The eight W_k of one group (bits: 4, 5, 6 or 8).
template <int kBits>
SELFSPEC_AVX512 inline void unpack(const std::byte* q, __m512i (&w)[8]) {
  if constexpr (kBits == 8) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) w[k] = _mm512_loadu_si512(q + 64 * k);
    return;
  } else {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) {
      const __m512i v = _mm512_loadu_si512(q + 64 * j);
      w[j] = _mm512_and_si512(v, low4);
      w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    if constexpr (kBits == 5) {
      const __m512i sixteen = _mm512_set1_epi8(16);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        std::uint64_t bits;
        std::memcpy(&bits, q + 256 + 8 * k, sizeof bits);
        w[k] = _mm512_mask_add_epi8(w[k], static_cast<__mmask64>(bits), w[k], sixteen);
      }
    } else if constexpr (kBits == 6) {
      const __m512i mask = _mm512_set1_epi8(0x30);
      const __m512i h0 = _mm512_loadu_si512(q + 256);
      const __m512i h1 = _mm512_loadu_si512(q + 320);
      // bits 2i..2i+1 of the high block to bits 4..5 (A | (B & C): ternary 0xF8)
      w[0] = _mm512_ternarylogic_epi32(w[0], _mm512_slli_epi16(h0, 4), mask, 0xF8);
      w[1] = _mm512_ternarylogic_epi32(w[1], _mm512_slli_epi16(h0, 2), mask, 0xF8);
      w[2] = _mm512_ternarylogic_epi32(w[2], h0, mask, 0xF8);
      w[3] = _mm512_ternarylogic_epi32(w[3], _mm512_srli_epi16(h0, 2), mask, 0xF8);
      w[4] = _mm512_ternarylogic_epi32(w[4], _mm512_slli_epi16(h1, 4), mask, 0xF8);
      w[5] = _mm512_ternarylogic_epi32(w[5], _mm512_slli_epi16(h1, 2), mask, 0xF8);
      w[6] = _mm512_ternarylogic_epi32(w[6], h1, mask, 0xF8);
      w[7] = _mm512_ternarylogic_epi32(w[7], _mm512_srli_epi16(h1, 2), mask, 0xF8);
    }
  }
}

// The vector loads of a 6- or 8-bit group's quants (the four nibble blocks and the two high-bit
// blocks, or the eight byte blocks), for loading one group ahead.
template <int kBits>
struct RawQuants {
  static constexpr int kCount = kBits == 8 ? 8 : (kBits == 6 ? 6 : 4);
  __m512i v[kCount];
};

template <int kBits>
SELFSPEC_AVX512 inline void load_raw(const std::byte* q, RawQuants<kBits>& raw) {
#pragma GCC unroll 8
  for (int i = 0; i < RawQuants<kBits>::kCount; ++i) raw.v[i] = _mm512_loadu_si512(q + 64 * i);
}

// unpack<kBits> of loaded quants.
template <int kBits>
SELFSPEC_AVX512 inline void unpack_raw(const RawQuants<kBits>& raw, __m512i (&w)[8]) {
  if constexpr (kBits == 8) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) w[k] = raw.v[k];
  } else {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      w[j] = _mm512_and_si512(raw.v[j], low4);
      w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(raw.v[j], 4), low4);
    }
    if constexpr (kBits == 4) return;
    const __m512i mask = _mm512_set1_epi8(0x30);
    const __m512i h0 = raw.v[4];
    const __m512i h1 = raw.v[5];
    w[0] = _mm512_ternarylogic_epi32(w[0], _mm512_slli_epi16(h0, 4), mask, 0xF8);
    w[1] = _mm512_ternarylogic_epi32(w[1], _mm512_slli_epi16(h0, 2), mask, 0xF8);
    w[2] = _mm512_ternarylogic_epi32(w[2], h0, mask, 0xF8);
    w[3] = _mm512_ternarylogic_epi32(w[3], _mm512_srli_epi16(h0, 2), mask, 0xF8);
    w[4] = _mm512_ternarylogic_epi32(w[4], _mm512_slli_epi16(h1, 4), mask, 0xF8);
    w[5] = _mm512_ternarylogic_epi32(w[5], _mm512_slli_epi16(h1, 2), mask, 0xF8);
    w[6] = _mm512_ternarylogic_epi32(w[6], h1, mask, 0xF8);
    w[7] = _mm512_ternarylogic_epi32(w[7], _mm512_srli_epi16(h1, 2), mask, 0xF8);
  }
}

// acc += Σ over the 4 bytes of each lane of u (w) times the 4 activation bytes at x, broadcast:
// vpdpbusd with an embedded {1to16} broadcast from memory (GCC 12 emits a separate vpbroadcastd
// for _mm512_set1_epi32, one more instruction per multiply-add).
SELFSPEC_AVX512 inline __m512i dpbusd_broadcast(__m512i acc, __m512i w, const std::int8_t* x) {
  __asm__("vpdpbusd %[x]%{1to16%}, %[w], %[acc]"
          : [acc] "+v"(acc)
          : [w] "v"(w), [x] "m"(*reinterpret_cast<const std::int32_t*>(x)));
  return acc;
}

// Σ u · xq over W_k for k in [kBegin, kEnd), as two chains (halving the latency the
// out-of-order window must hide: measured, one chain and four chains are both slower at T = 4).
template <int kBegin, int kEnd>
SELFSPEC_AVX512 inline __m512i dot(const __m512i (&w)[8], const std::int8_t* xq) {
  __m512i a = _mm512_setzero_si512();
  __m512i b = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int k = kBegin; k < kEnd; k += 2) {
    a = dpbusd_broadcast(a, w[k], xq + 4 * k);
    b = dpbusd_broadcast(b, w[k + 1], xq + 4 * (k + 1));
  }
  return _mm512_add_epi32(a, b);
}

SELFSPEC_AVX512 inline __m512 load_f16x16(const std::byte* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

SELFSPEC_AVX512 inline __m512 load_u8x16(const std::byte* p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

SELFSPEC_AVX512 inline __m512 load_i8x16(const std::byte* p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// A tile of kTile tokens starting at t0 over one panel: the canonical sequence per lane.
template <WeightFormat kFormat, int kBits, int kTile>
SELFSPEC_AVX512 void panel_tile(const PanelGeometry& g, const QuantLayout& layout,
                                const std::byte* panel, const QuantizedActivations& a,
                                std::int64_t t0, bool prefetch, float* y, std::int64_t y_stride,
                                __mmask16 rows_mask) {
  constexpr bool kOffset = kFormat == WeightFormat::kQ4_0 || kFormat == WeightFormat::kQ5_0 ||
                           kFormat == WeightFormat::kQ8_0;
  constexpr bool kMin = kFormat == WeightFormat::kQ4_1 || kFormat == WeightFormat::kQ5_1;
  constexpr bool kKMin = kFormat == WeightFormat::kQ4_K || kFormat == WeightFormat::kQ5_K;
  constexpr bool kQ6 = kFormat == WeightFormat::kQ6_K;
  const std::int64_t groups = g.groups();
  const std::int64_t cols = a.cols;
  const int offset = layout.offset;

  __m512 yv[kTile];
  __m512 acc1[kTile];
#pragma GCC unroll 8
  for (int t = 0; t < kTile; ++t) {
    yv[t] = _mm512_setzero_ps();
    acc1[t] = _mm512_setzero_ps();
  }
  const std::byte* cursor = panel;
  std::int64_t group = 0;
  const std::int64_t n_segments = g.segments();
  // Where the quants are loaded one group ahead (software pipelining, as in the bf16 kernel), as
  // measured on 8960 x 1536, 1 thread (packed_matmul_bench, fraction of the streaming read):
  // 6- and 8-bit quants with tiles of up to 6 tokens (Q6_K T = 1 0.92 -> 1.0, T = 4 0.83 -> 0.95;
  // Q8_0 T = 1 0.91 -> 0.99) and Q4_0/Q4_1 tiles of up to 4 (Q4_1 T = 1 0.93 -> 1.03, T = 4
  // 0.85 -> 0.92). Elsewhere the extra live registers cost more than they bring (Q4_K T = 4
  // 0.90 -> 0.81; larger tiles spill).
  constexpr bool kPipeline = (kBits >= 6 && kTile <= 6) || (kBits == 4 && kTile <= 4 && !kKMin);
  constexpr int kRawBits = kBits == 5 ? 6 : kBits;
  // (Nothing is held across groups without pipelining.)
  [[maybe_unused]] std::conditional_t<kPipeline, RawQuants<kRawBits>, char> raw{};
  if constexpr (kPipeline) {
    load_raw<kRawBits>(panel + layout.segment_params + layout.group_params, raw);
  }
  [[maybe_unused]] const std::int64_t groups_total = g.groups();
  for (std::int64_t s = 0; s < n_segments; ++s) {
    const std::byte* seg = cursor;
    cursor += layout.segment_params;
    const std::int64_t n_groups = g.segment_groups(s);
    for (std::int64_t i = 0; i < n_groups; ++i, ++group) {
      const std::byte* params = cursor;
      if (prefetch) {
        for (std::int64_t line = 0; line < layout.group_bytes(); line += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(cursor + kPrefetchAhead + line), _MM_HINT_T0);
        }
      }
      __m512i w[8];
      if constexpr (kPipeline) {
        // The next group's quants: after this one, past a segment's parameters when it starts
        // the next segment (the last group loads its own again).
        const std::byte* next = cursor + layout.group_bytes();
        const std::byte* next_quants = group + 1 == groups_total ? cursor + layout.group_params
                                       : i + 1 < n_groups
                                           ? next + layout.group_params
                                           : next + layout.segment_params + layout.group_params;
        RawQuants<kRawBits> ahead;
        load_raw<kRawBits>(next_quants, ahead);
        unpack_raw<kRawBits>(raw, w);
        raw = ahead;
      } else {
        unpack<kBits>(cursor + layout.group_params, w);
      }
      cursor += layout.group_bytes();
      __m512 p0;
      __m512 p1;
      if constexpr (kOffset || kMin) {
        p0 = load_f16x16(params);
        if constexpr (kMin) p1 = load_f16x16(params + 32);
      } else if constexpr (kKMin) {
        p0 = load_u8x16(params);  // the mins enter at the segment's end
      } else {
        p0 = load_i8x16(params);
        p1 = load_i8x16(params + 16);
      }
#pragma GCC unroll 8
      for (int t = 0; t < kTile; ++t) {
        const std::int64_t tg = (t0 + t) * groups + group;
        const std::int8_t* xq = a.q.data() + (t0 + t) * cols + group * kGroupCols;
        const __m512 dx = _mm512_set1_ps(a.dx[static_cast<std::size_t>(tg)]);
        if constexpr (kOffset) {
          const __m512i j = _mm512_sub_epi32(
              dot<0, 8>(w, xq), _mm512_set1_epi32(offset * a.s32[static_cast<std::size_t>(tg)]));
          yv[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(j), _mm512_mul_ps(p0, dx), yv[t]);
        } else if constexpr (kMin) {
          const __m512 prod = _mm512_mul_ps(p0, _mm512_cvtepi32_ps(dot<0, 8>(w, xq)));
          const __m512 b =
              _mm512_fmadd_ps(p1, _mm512_set1_ps(a.s[static_cast<std::size_t>(tg)]), prod);
          yv[t] = _mm512_fmadd_ps(b, dx, yv[t]);
        } else if constexpr (kKMin) {
          const __m512 prod = _mm512_mul_ps(_mm512_cvtepi32_ps(dot<0, 8>(w, xq)), dx);
          acc1[t] = _mm512_fmadd_ps(prod, p0, acc1[t]);
        } else if constexpr (kQ6) {
          const std::int32_t* s16 = a.s16.data() + 2 * tg;
          const __m512i ja = _mm512_sub_epi32(dot<0, 4>(w, xq), _mm512_set1_epi32(32 * s16[0]));
          const __m512i jb = _mm512_sub_epi32(dot<4, 8>(w, xq), _mm512_set1_epi32(32 * s16[1]));
          const __m512 b = _mm512_fmadd_ps(_mm512_cvtepi32_ps(jb), p1,
                                           _mm512_mul_ps(_mm512_cvtepi32_ps(ja), p0));
          acc1[t] = _mm512_fmadd_ps(b, dx, acc1[t]);
        }
      }
    }
    if constexpr (kKMin) {
      // acc2 = Σ over the segment's groups, in order, of fma(mn, dxs, acc2): the same sequence as
      // interleaved with acc1, taken here so it holds no registers in the group loop.
      const std::int64_t first = group - n_groups;
      __m512 acc2[kTile];
#pragma GCC unroll 8
      for (int t = 0; t < kTile; ++t) acc2[t] = _mm512_setzero_ps();
      for (std::int64_t i = 0; i < n_groups; ++i) {
        const __m512 mn = load_u8x16(seg + layout.segment_params + i * layout.group_bytes() + 16);
#pragma GCC unroll 8
        for (int t = 0; t < kTile; ++t) {
          const auto tg = static_cast<std::size_t>((t0 + t) * groups + first + i);
          acc2[t] = _mm512_fmadd_ps(mn, _mm512_set1_ps(a.dxs[tg]), acc2[t]);
        }
      }
      const __m512 d = load_f16x16(seg);
      const __m512 dmin = load_f16x16(seg + 32);
#pragma GCC unroll 8
      for (int t = 0; t < kTile; ++t) {
        yv[t] = _mm512_fmadd_ps(acc1[t], d, yv[t]);
        yv[t] = _mm512_fnmadd_ps(acc2[t], dmin, yv[t]);
        acc1[t] = _mm512_setzero_ps();
      }
    } else if constexpr (kQ6) {
      const __m512 d = load_f16x16(seg);
#pragma GCC unroll 8
      for (int t = 0; t < kTile; ++t) {
        yv[t] = _mm512_fmadd_ps(acc1[t], d, yv[t]);
        acc1[t] = _mm512_setzero_ps();
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTile; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * y_stride, rows_mask, yv[t]);
}

template <WeightFormat kFormat, int kBits>
SELFSPEC_AVX512 void panels(const PanelGeometry& g, const QuantizedActivations& a,
                            std::int64_t panel_begin, std::int64_t panel_end, float* y,
                            std::int64_t y_stride) {
  const QuantLayout layout = quant_layout(kFormat);
  for (std::int64_t p = panel_begin; p < panel_end; ++p) {
    const std::byte* panel = g.panel(p);
    const std::int64_t rows = std::min(kPanelRows, g.rows - p * kPanelRows);
    const auto mask = static_cast<__mmask16>((1u << rows) - 1u);
    float* yp = y + p * kPanelRows;
    for (std::int64_t t0 = 0; t0 < a.tokens; t0 += kMaxTile) {
      const bool first = t0 == 0;
      switch (std::min<std::int64_t>(kMaxTile, a.tokens - t0)) {
        case 8:
          panel_tile<kFormat, kBits, 8>(g, layout, panel, a, t0, first, yp, y_stride, mask);
          break;
        case 7:
          panel_tile<kFormat, kBits, 7>(g, layout, panel, a, t0, first, yp, y_stride, mask);
          break;
        case 6:
          panel_tile<kFormat, kBits, 6>(g, layout, panel, a, t0, first, yp, y_stride, mask);
          break;
        case 5:
          panel_tile<kFormat, kBits, 5>(g, layout, panel, a, t0, first, yp, y_stride, mask);
          break;
        case 4:
          panel_tile<kFormat, kBits, 4>(g, layout, panel, a, t0, first, yp, y_stride, mask);
          break;
        case 3:
          panel_tile<kFormat, kBits, 3>(g, layout, panel, a, t0, first, yp, y_stride, mask);
          break;
        case 2:
          panel_tile<kFormat, kBits, 2>(g, layout, panel, a, t0, first, yp, y_stride, mask);
          break;
        default:
          panel_tile<kFormat, kBits, 1>(g, layout, panel, a, t0, first, yp, y_stride, mask);
          break;
      }
    }
  }
}

}  // namespace

void quant_panels_avx512(const PanelGeometry& g, const QuantizedActivations& a,
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
      fail("quant_panels_avx512: format {} is not quantized", weight_format_name(g.format));
  }
}

// ---- Activations ---------------------------------------------------------------------------

namespace {

SELFSPEC_AVX512 void quantize_group(const float* xs, std::int8_t* q, float& dx_out,
                                    std::int32_t (&halves)[2]) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 x0 = _mm512_loadu_ps(xs);
  const __m512 x1 = _mm512_loadu_ps(xs + 16);
  // max(|x|, m) with |x| first: a NaN never wins, as in the scalar loop.
  __m512 m = _mm512_max_ps(_mm512_andnot_ps(sign, x0), _mm512_setzero_ps());
  m = _mm512_max_ps(_mm512_andnot_ps(sign, x1), m);
  const float amax = _mm512_reduce_max_ps(m);
  dx_out = amax / 127.0f;
  const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
  const __m512 lo = _mm512_set1_ps(-127.0f);
  const __m512 hi = _mm512_set1_ps(127.0f);
  const __m512 xv[2] = {x0, x1};
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m512 v = _mm512_mul_ps(xv[h], inv);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    const __m512i iv =
        _mm512_cvtps_epi32(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * h), _mm512_cvtepi32_epi8(iv));
    halves[h] = _mm512_reduce_add_epi32(iv);
  }
}

}  // namespace

void quantize_activations_avx512(const float* x, std::int64_t tokens, std::int64_t cols,
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
