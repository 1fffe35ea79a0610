// Matrix products against quantized weights run as stored: y = x · Wᵀ with x [T × K] f32 and W
// [N × K] in one of ggml's block formats, packed in row panels (packed_weights.hpp). The method
// is ggml's (llama.cpp's ggml-cpu vec_dot_*_q8_*): the activations are quantized to int8, the
// products of the integer quants are summed exactly in integers (vpdpbusd on AVX-512 VNNI), and
// each block's scales are applied in floating point.
//
// Activations (quantize_activations): each token's row is cut into groups of 32 columns (fixed,
// so a token's arithmetic never depends on the other tokens, and a tensor-parallel slice at a
// 32-column boundary cuts no group). Per group: amax = max |x|; dx = amax / 127 and
// xq = round-to-nearest-even(clamp(x · (127 / amax), -127, 127)) (both divisions IEEE; amax = 0
// gives dx = 0 and xq = 0); S = Σ xq over the group, S_a and S_b over its two halves of 16;
// dxs = dx · S. llama.cpp's Q8_0/Q8_K activations are the same idea (it rounds half away from
// zero and groups by 256 for the K formats).
//
// Canonical arithmetic (the token-count invariance contract): every output y[t][n] is computed by
// the sequence below, whatever T, the tile, the thread count or the instruction set. With u the
// weight's unsigned quant (packed_weights.hpp), I = Σ u · xq over a group (exact, int32), I_a and
// I_b over its halves, f(i) the exact int → f32 conversion, fma one rounding, ·/+/- one rounding
// each, and y = 0 at the start, per group of the row in column order:
//   Q4_0, Q5_0, Q8_0 (offset o = 8, 16, 128; scale d):
//       y = fma(f(I - o · S), d · dx, y)
//   Q4_1, Q5_1 (scale d, min m):
//       y = fma(fma(m, f(S), d · f(I)), dx, y)
//   Q4_K, Q5_K (per segment: acc1 = acc2 = 0; per group with 6-bit scale sc and min mn:
//       acc1 = fma(f(I) · dx, f(sc), acc1); acc2 = fma(f(mn), dxs, acc2); at the segment's end
//       (the file's super-block, scales d and dmin): y = fma(acc1, d, y); y = fma(-acc2, dmin, y))
//   Q6_K (per segment: acc = 0; per group with the i8 scales sc_a, sc_b of its halves:
//       acc = fma(fma(f(I_b - 32 S_b), f(sc_b), f(I_a - 32 S_a) · f(sc_a)), dx, acc); at the
//       segment's end: y = fma(acc, d, y))
// The scalar path is this sequence written out (std::fmaf); the AVX2 and AVX-512 paths do it per
// lane, one row per lane, and give the same bits.
#pragma once

#include "core/aligned_buffer.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/packed_weights.hpp"

#include <cstddef>
#include <cstdint>

namespace selfspec::kernels::cpu {

// Activations quantized per token in groups of 32 (the order above). Arrays are [tokens][...].
struct QuantizedActivations {
  std::int64_t tokens = 0;
  std::int64_t cols = 0;
  AlignedBuffer<std::int8_t> q;     // [tokens][cols]
  AlignedBuffer<float> dx;          // [tokens][groups]
  AlignedBuffer<float> s;           // f(S)
  AlignedBuffer<float> dxs;         // dx · f(S)
  AlignedBuffer<std::int32_t> s32;  // S
  AlignedBuffer<std::int32_t> s16;  // [tokens][groups][2]: S_a, S_b

  std::int64_t groups() const { return cols / kGroupCols; }
};

// Quantizes x [tokens × cols] (cols a multiple of 32) with the active ISA.
void quantize_activations(const float* x, std::int64_t tokens, std::int64_t cols,
                          QuantizedActivations& out);

// y[t * w.rows + n] = row n of w times token t of x, for t < n_tokens, n < w.rows (canonical
// arithmetic above). Multithreaded over panels; x [n_tokens × w.cols], y [n_tokens × w.rows].
void quant_matmul(const float* x, std::int64_t n_tokens, const PackedView& w, float* y);

namespace detail {

// Records group tg of out (token-major): its scale dx and the sums the kernels read (S, f(S),
// dx · f(S), S_a, S_b), all from the integer sums of its two 16-value halves; every ISA's
// quantizer ends with this.
inline void record_group(QuantizedActivations& out, std::size_t tg, float dx,
                         const std::int32_t (&halves)[2]) {
  out.dx[tg] = dx;
  out.s32[tg] = halves[0] + halves[1];
  out.s[tg] = static_cast<float>(out.s32[tg]);
  out.dxs[tg] = dx * out.s[tg];
  out.s16[2 * tg] = halves[0];
  out.s16[2 * tg + 1] = halves[1];
}

// One ISA's kernel: panels [panel_begin, panel_end) of `g` for every token of `a`, into y (row
// stride y_stride). Only rows < g.rows are written.
void quant_panels(Isa isa, const PanelGeometry& g, const QuantizedActivations& a,
                  std::int64_t panel_begin, std::int64_t panel_end, float* y,
                  std::int64_t y_stride);

void quantize_activations_scalar(const float* x, std::int64_t tokens, std::int64_t cols,
                                 QuantizedActivations& out);
void quantize_activations_avx2(const float* x, std::int64_t tokens, std::int64_t cols,
                               QuantizedActivations& out);
void quantize_activations_avx512(const float* x, std::int64_t tokens, std::int64_t cols,
                                 QuantizedActivations& out);
void quant_panels_scalar(const PanelGeometry& g, const QuantizedActivations& a,
                         std::int64_t panel_begin, std::int64_t panel_end, float* y,
                         std::int64_t y_stride);
void quant_panels_avx2(const PanelGeometry& g, const QuantizedActivations& a,
                       std::int64_t panel_begin, std::int64_t panel_end, float* y,
                       std::int64_t y_stride);
void quant_panels_avx512(const PanelGeometry& g, const QuantizedActivations& a,
                         std::int64_t panel_begin, std::int64_t panel_end, float* y,
                         std::int64_t y_stride);

}  // namespace detail
}  // namespace selfspec::kernels::cpu
