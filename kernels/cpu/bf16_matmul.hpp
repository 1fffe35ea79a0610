// Matrix products against bf16 weights in row panels (packed_weights.hpp) with bf16 activations:
// y = x · Wᵀ, x [T × K] f32 rounded to bf16, the products summed in f32 the way AVX-512 BF16's
// vdpbf16ps sums them. bf16 × bf16 products are exact in f32, so vdpbf16ps runs at twice the
// multiply-adds of f32 FMA per instruction with no conversion of the weights.
//
// Canonical arithmetic (the token-count invariance contract): x is rounded to bf16 once
// (round-to-nearest-even, core/dtype.hpp's f32_to_bf16) and padded with zeros to a multiple of 8
// columns, as are the weights. Every output y[t][n] then runs, with four accumulators
// acc[0..3] = +0 and the column pairs p = (2p, 2p + 1) in order, acc[p % 4] updated by
//   acc = ftz(fma(daz(x[2p+1]), daz(w[2p+1]), acc)); acc = ftz(fma(daz(x[2p]), daz(w[2p]), acc))
// (vdpbf16ps: the odd product first, each product exact, each sum rounded to nearest even,
// subnormal inputs read as zero and subnormal sums flushed to zero: measured on the hardware with
// small probes of normal and subnormal operands), then
//   y = (acc[0] + acc[1]) + (acc[2] + acc[3])
// with IEEE additions. The scalar path writes this out; the AVX-512 path is vdpbf16ps; the AVX2
// path runs each step as two FMAs under MXCSR's DAZ and FTZ (restored before the final sums). All
// give the same bits.
#pragma once

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/packed_weights.hpp"

#include <cstdint>

namespace selfspec::kernels::cpu {

// y[t * w.rows + n] = row n of w times token t of x (canonical arithmetic above), for w a packed
// bf16 matrix. Multithreaded over panels.
void bf16_matmul(const float* x, std::int64_t n_tokens, const PackedView& w, float* y);

namespace detail {

// x [tokens × cols] as bf16, zero-padded to `padded` columns, into out [tokens × padded].
void round_to_bf16(const float* x, std::int64_t tokens, std::int64_t cols, std::int64_t padded,
                   std::uint16_t* out);

// One ISA's kernel over panels [panel_begin, panel_end): xb [tokens × padded] from round_to_bf16.
void bf16_panels(Isa isa, const PanelGeometry& g, const std::uint16_t* xb, std::int64_t tokens,
                 std::int64_t panel_begin, std::int64_t panel_end, float* y, std::int64_t y_stride);
void bf16_panels_scalar(const PanelGeometry& g, const std::uint16_t* xb, std::int64_t tokens,
                        std::int64_t panel_begin, std::int64_t panel_end, float* y,
                        std::int64_t y_stride);
void bf16_panels_avx2(const PanelGeometry& g, const std::uint16_t* xb, std::int64_t tokens,
                      std::int64_t panel_begin, std::int64_t panel_end, float* y,
                      std::int64_t y_stride);
void bf16_panels_avx512(const PanelGeometry& g, const std::uint16_t* xb, std::int64_t tokens,
                        std::int64_t panel_begin, std::int64_t panel_end, float* y,
                        std::int64_t y_stride);

}  // namespace detail
}  // namespace selfspec::kernels::cpu
