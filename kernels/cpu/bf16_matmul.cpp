// bf16 panel matmul: dispatch, the activation rounding and the scalar path (bf16_matmul.hpp).
// Compiled with -ffp-contract=off: the scalar path fuses exactly where it says std::fmaf.
#include "kernels/cpu/bf16_matmul.hpp"

#include "core/aligned_buffer.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace selfspec::kernels::cpu {
namespace {

// A subnormal read as zero (keeping its sign), as vdpbf16ps reads its inputs.
float daz(float v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}

// A subnormal result flushed to zero (keeping its sign), as vdpbf16ps writes its sums.
float ftz(float v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}

float bf16_input(std::uint16_t bits) {
  return daz(bf16_to_f32(bits));
}

std::int64_t padded_cols(std::int64_t cols) {
  return (cols + kBf16StepCols - 1) / kBf16StepCols * kBf16StepCols;
}

}  // namespace

namespace detail {

void round_to_bf16(const float* x, std::int64_t tokens, std::int64_t cols, std::int64_t padded,
                   std::uint16_t* out) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::uint16_t* row = out + t * padded;
    for (std::int64_t c = 0; c < cols; ++c) row[c] = f32_to_bf16(x[t * cols + c]);
    std::fill(row + cols, row + padded, std::uint16_t{0});
  }
}

void bf16_panels_scalar(const PanelGeometry& g, const std::uint16_t* xb, std::int64_t tokens,
                        std::int64_t panel_begin, std::int64_t panel_end, float* y,
                        std::int64_t y_stride) {
  const std::int64_t padded = padded_cols(g.cols);
  const std::int64_t steps = padded / kBf16StepCols;
  for (std::int64_t p = panel_begin; p < panel_end; ++p) {
    const auto* panel = reinterpret_cast<const std::uint16_t*>(g.panel(p));
    for (std::int64_t r = 0; r < kPanelRows && p * kPanelRows + r < g.rows; ++r) {
      for (std::int64_t t = 0; t < tokens; ++t) {
        const std::uint16_t* x = xb + t * padded;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (std::int64_t s = 0; s < steps; ++s) {
          for (int j = 0; j < 4; ++j) {
            const std::uint16_t* w = panel + s * 128 + j * 32 + r * 2;  // the pair of lane r
            const std::int64_t c = s * kBf16StepCols + 2 * j;
            acc[j] = ftz(std::fmaf(bf16_input(x[c + 1]), bf16_input(w[1]), acc[j]));
            acc[j] = ftz(std::fmaf(bf16_input(x[c]), bf16_input(w[0]), acc[j]));
          }
        }
        y[t * y_stride + p * kPanelRows + r] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
      }
    }
  }
}

void bf16_panels(Isa isa, const PanelGeometry& g, const std::uint16_t* xb, std::int64_t tokens,
                 std::int64_t panel_begin, std::int64_t panel_end, float* y,
                 std::int64_t y_stride) {
  switch (isa) {
    case Isa::kAvx512:
      return bf16_panels_avx512(g, xb, tokens, panel_begin, panel_end, y, y_stride);
    case Isa::kAvx2:
      return bf16_panels_avx2(g, xb, tokens, panel_begin, panel_end, y, y_stride);
    case Isa::kScalar:
      return bf16_panels_scalar(g, xb, tokens, panel_begin, panel_end, y, y_stride);
  }
}

}  // namespace detail

void bf16_matmul(const float* x, std::int64_t n_tokens, const PackedView& w, float* y) {
  SELFSPEC_CHECK(w.format == WeightFormat::kBF16, "bf16_matmul: weights are {}",
                 weight_format_name(w.format));
  SELFSPEC_CHECK(n_tokens >= 0 && w.rows > 0 && w.cols > 0,
                 "bf16_matmul: bad shape (tokens {}, rows {}, cols {})", n_tokens, w.rows, w.cols);
  if (n_tokens == 0) return;
  SELFSPEC_CHECK(x != nullptr && y != nullptr, "bf16_matmul: null operand");
  const PanelGeometry g = panel_geometry(w);
  const std::int64_t padded = padded_cols(w.cols);
  thread_local AlignedBuffer<std::uint16_t> xb;
  xb.ensure(static_cast<std::size_t>(n_tokens * padded));
  detail::round_to_bf16(x, n_tokens, w.cols, padded, xb.data());
  const Isa isa = active_isa();
  const std::uint16_t* x_bf16 = xb.data();
  parallel_for(g.panels, panels_per_chunk(g), [&](std::int64_t begin, std::int64_t end) {
    detail::bf16_panels(isa, g, x_bf16, n_tokens, begin, end, y, w.rows);
  });
}

}  // namespace selfspec::kernels::cpu
