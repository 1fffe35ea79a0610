// AVX-512 BF16 kernel of the bf16 panel matmul (bf16_matmul.hpp): vdpbf16ps, one lane per panel
// row, four accumulators per (token, panel) for the four column pairs of each 8-column step. The
// weights are prefetched 8 KiB ahead (measured best of 1-32 KiB; without it a tile of 4 tokens
// reads at 0.64 of the streaming bandwidth).
// Tokens go in tiles of up to kMaxTile: each weight vector loaded is used by every token of the
// tile while in a register, and the panel is walked once per tile (from memory for the first, from
// L1/L2 after). Runtime-dispatched: SELFSPEC_AVX512 functions with internal linkage.
#include "kernels/cpu/bf16_matmul.hpp"

#include "kernels/cpu/avx512_intrinsics.hpp"

#include <algorithm>
#include <cstring>

#define SELFSPEC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace selfspec::kernels::cpu::detail {
namespace {

constexpr int kMaxTile = 6;
constexpr std::int64_t kPrefetchAhead = 8192;

// acc += the pair products of w and the bf16 pair at x, broadcast: vdpbf16ps with an embedded
// {1to16} broadcast from memory (GCC 12 emits a separate vpbroadcastd for _mm512_set1_epi32).
SELFSPEC_AVX512 inline __m512 dpbf16_broadcast(__m512 acc, __m512bh w, const std::uint16_t* x) {
  __asm__("vdpbf16ps %[x]%{1to16%}, %[w], %[acc]"
          : [acc] "+v"(acc)
          : [w] "v"(w), [x] "m"(*reinterpret_cast<const std::int32_t*>(x)));
  return acc;
}

template <int kTile>
SELFSPEC_AVX512 void panel_tile(const std::byte* panel, std::int64_t steps, const std::uint16_t* xb,
                                std::int64_t padded, bool prefetch, float* y, std::int64_t y_stride,
                                __mmask16 rows_mask) {
  __m512 acc[kTile][4];
#pragma GCC unroll 6
  for (int t = 0; t < kTile; ++t) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[t][j] = _mm512_setzero_ps();
  }
  const std::byte* w = panel;
  __m512bh wv[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) wv[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + 64 * j));
  for (std::int64_t s = 0; s < steps; ++s, w += 256) {
    if (prefetch) {
#pragma GCC unroll 4
      for (int l = 0; l < 4; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetchAhead + 64 * l), _MM_HINT_T0);
      }
    }
    // The next step's weights are loaded before this step's products (software pipelining): a
    // tile of several tokens has a long loop body, and without it the out-of-order window holds
    // too few steps to keep the loads ahead (measured, 8960 x 1536: T = 2..6 at 0.89 of the
    // streaming read, 0.95-0.96 with it).
    __m512bh next[4];
    const std::byte* wn = s + 1 < steps ? w + 256 : w;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j)
      next[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wn + 64 * j));
#pragma GCC unroll 6
    for (int t = 0; t < kTile; ++t) {
      const std::uint16_t* x = xb + t * padded + s * kBf16StepCols;
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[t][j] = dpbf16_broadcast(acc[t][j], wv[j], x + 2 * j);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) wv[j] = next[j];
  }
#pragma GCC unroll 6
  for (int t = 0; t < kTile; ++t) {
    const __m512 sum =
        _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3]));
    _mm512_mask_storeu_ps(y + t * y_stride, rows_mask, sum);
  }
}

SELFSPEC_AVX512 void panels(const PanelGeometry& g, const std::uint16_t* xb, std::int64_t tokens,
                            std::int64_t panel_begin, std::int64_t panel_end, float* y,
                            std::int64_t y_stride) {
  const std::int64_t steps = (g.cols + kBf16StepCols - 1) / kBf16StepCols;
  const std::int64_t padded = steps * kBf16StepCols;
  for (std::int64_t p = panel_begin; p < panel_end; ++p) {
    const std::byte* panel = g.panel(p);
    const std::int64_t rows = std::min(kPanelRows, g.rows - p * kPanelRows);
    const auto mask = static_cast<__mmask16>((1u << rows) - 1u);
    float* yp = y + p * kPanelRows;
    std::int64_t t0 = 0;
    for (; t0 + kMaxTile <= tokens; t0 += kMaxTile) {
      panel_tile<kMaxTile>(panel, steps, xb + t0 * padded, padded, t0 == 0, yp + t0 * y_stride,
                           y_stride, mask);
    }
    const bool first = t0 == 0;
    const std::uint16_t* xt = xb + t0 * padded;
    float* yt = yp + t0 * y_stride;
    switch (tokens - t0) {
      case 5:
        panel_tile<5>(panel, steps, xt, padded, first, yt, y_stride, mask);
        break;
      case 4:
        panel_tile<4>(panel, steps, xt, padded, first, yt, y_stride, mask);
        break;
      case 3:
        panel_tile<3>(panel, steps, xt, padded, first, yt, y_stride, mask);
        break;
      case 2:
        panel_tile<2>(panel, steps, xt, padded, first, yt, y_stride, mask);
        break;
      case 1:
        panel_tile<1>(panel, steps, xt, padded, first, yt, y_stride, mask);
        break;
      default:
        break;
    }
  }
}

}  // namespace

void bf16_panels_avx512(const PanelGeometry& g, const std::uint16_t* xb, std::int64_t tokens,
                        std::int64_t panel_begin, std::int64_t panel_end, float* y,
                        std::int64_t y_stride) {
  panels(g, xb, tokens, panel_begin, panel_end, y, y_stride);
}

}  // namespace selfspec::kernels::cpu::detail
