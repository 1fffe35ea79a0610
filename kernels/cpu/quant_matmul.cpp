// Quantized matmul: dispatch, the activation quantizer and the scalar path (quant_matmul.hpp).
//
// The scalar path is the canonical arithmetic written out: per panel, a group's quants are
// unpacked to u[16 rows][32] once, then every (token, row) runs the sequence of quant_matmul.hpp
// with std::fmaf. This file is compiled with -ffp-contract=off, so no multiply and add are fused
// except where the sequence says fma.
#include "kernels/cpu/quant_matmul.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace selfspec::kernels::cpu {
namespace {

std::uint8_t byte_at(const std::byte* p, std::int64_t i) {
  return std::to_integer<std::uint8_t>(p[i]);
}

float f16_at(const std::byte* p, std::int64_t lane) {
  std::uint16_t bits;
  std::memcpy(&bits, p + 2 * lane, sizeof bits);
  return f16_to_f32(bits);
}

// u[r][c] of one group of a panel (16 rows x 32 columns), from its quants (packed_weights.hpp).
using GroupQuants = std::array<std::array<std::uint8_t, 32>, kPanelRows>;

void unpack_group(const std::byte* quants, int bits, GroupQuants& u) {
  for (std::int64_t r = 0; r < kPanelRows; ++r) {
    for (int col = 0; col < 32; ++col) {
      const int k = col / 4;
      const std::int64_t byte = 4 * r + col % 4;
      std::uint8_t v = 0;
      if (bits == 8) {
        v = byte_at(quants, 64 * k + byte);
      } else {
        v = (byte_at(quants, 64 * (k % 4) + byte) >> (k < 4 ? 0 : 4)) & 0xF;
        if (bits == 5) {
          v |= static_cast<std::uint8_t>(
              ((byte_at(quants, 256 + 8 * k + byte / 8) >> (byte % 8)) & 1) << 4);
        } else if (bits == 6) {
          v |= static_cast<std::uint8_t>(
              ((byte_at(quants, 256 + 64 * (k / 4) + byte) >> (2 * (k % 4))) & 3) << 4);
        }
      }
      u[static_cast<std::size_t>(r)][static_cast<std::size_t>(col)] = v;
    }
  }
}

std::int32_t dot_range(const std::array<std::uint8_t, 32>& u, const std::int8_t* xq, int begin,
                       int end) {
  std::int32_t sum = 0;
  for (int c = begin; c < end; ++c) sum += static_cast<std::int32_t>(u[c]) * xq[c];
  return sum;
}

// Per (token, row) state of one panel: y and the segment accumulators.
struct RowState {
  float y = 0.0f;
  float acc1 = 0.0f;
  float acc2 = 0.0f;
};

// One group of the canonical sequence for one (token, row): the group's parameters at `params`
// (lane r), its quants in u, the token's activations of the group.
void scalar_group(WeightFormat format, int offset, const std::byte* params, std::int64_t r,
                  const std::array<std::uint8_t, 32>& u, const std::int8_t* xq, float dx, float s,
                  float dxs, std::int32_t s32, const std::int32_t* s16, RowState& st) {
  switch (format) {
    case WeightFormat::kQ4_0:
    case WeightFormat::kQ5_0:
    case WeightFormat::kQ8_0: {
      const std::int32_t j = dot_range(u, xq, 0, 32) - offset * s32;
      const float d = f16_at(params, r);
      st.y = std::fmaf(static_cast<float>(j), d * dx, st.y);
      return;
    }
    case WeightFormat::kQ4_1:
    case WeightFormat::kQ5_1: {
      const float d = f16_at(params, r);
      const float m = f16_at(params + 32, r);
      const float a = d * static_cast<float>(dot_range(u, xq, 0, 32));
      st.y = std::fmaf(std::fmaf(m, s, a), dx, st.y);
      return;
    }
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K: {
      const float sc = static_cast<float>(byte_at(params, r));
      const float mn = static_cast<float>(byte_at(params, 16 + r));
      const float a = static_cast<float>(dot_range(u, xq, 0, 32)) * dx;
      st.acc1 = std::fmaf(a, sc, st.acc1);
      st.acc2 = std::fmaf(mn, dxs, st.acc2);
      return;
    }
    case WeightFormat::kQ6_K: {
      const float sca = static_cast<float>(static_cast<std::int8_t>(byte_at(params, r)));
      const float scb = static_cast<float>(static_cast<std::int8_t>(byte_at(params, 16 + r)));
      const std::int32_t ja = dot_range(u, xq, 0, 16) - 32 * s16[0];
      const std::int32_t jb = dot_range(u, xq, 16, 32) - 32 * s16[1];
      const float b = std::fmaf(static_cast<float>(jb), scb, static_cast<float>(ja) * sca);
      st.acc1 = std::fmaf(b, dx, st.acc1);
      return;
    }
    default:  // quant_layout refused it already; never an output left unwritten
      fail("quantized group: format {} is not quantized", weight_format_name(format));
  }
}

// The end of a segment for one (token, row): its super-block scales at `seg` (lane r).
void scalar_segment_end(WeightFormat format, const std::byte* seg, std::int64_t r, RowState& st) {
  if (format == WeightFormat::kQ4_K || format == WeightFormat::kQ5_K) {
    st.y = std::fmaf(st.acc1, f16_at(seg, r), st.y);
    st.y = std::fmaf(-st.acc2, f16_at(seg + 32, r), st.y);
  } else if (format == WeightFormat::kQ6_K) {
    st.y = std::fmaf(st.acc1, f16_at(seg, r), st.y);
  }
  st.acc1 = 0.0f;
  st.acc2 = 0.0f;
}

void scalar_panel(const PanelGeometry& g, const QuantLayout& layout, const QuantizedActivations& a,
                  std::int64_t p, float* y, std::int64_t y_stride) {
  const std::int64_t tokens = a.tokens;
  const std::int64_t groups = g.groups();
  std::vector<RowState> state(static_cast<std::size_t>(tokens * kPanelRows));
  GroupQuants u;
  const std::byte* cursor = g.panel(p);
  std::int64_t group = 0;
  for (std::int64_t s = 0; s < g.segments(); ++s) {
    const std::byte* seg = cursor;
    cursor += layout.segment_params;
    for (std::int64_t i = 0; i < g.segment_groups(s); ++i, ++group) {
      const std::byte* params = cursor;
      unpack_group(cursor + layout.group_params, layout.bits, u);
      cursor += layout.group_bytes();
      for (std::int64_t t = 0; t < tokens; ++t) {
        const std::int64_t tg = t * groups + group;
        const std::int8_t* xq = a.q.data() + t * a.cols + group * kGroupCols;
        for (std::int64_t r = 0; r < kPanelRows; ++r) {
          scalar_group(g.format, layout.offset, params, r, u[static_cast<std::size_t>(r)], xq,
                       a.dx[static_cast<std::size_t>(tg)], a.s[static_cast<std::size_t>(tg)],
                       a.dxs[static_cast<std::size_t>(tg)], a.s32[static_cast<std::size_t>(tg)],
                       a.s16.data() + 2 * tg, state[static_cast<std::size_t>(t * kPanelRows + r)]);
        }
      }
    }
    for (RowState& st : state) {
      const auto index = static_cast<std::int64_t>(&st - state.data());
      scalar_segment_end(g.format, seg, index % kPanelRows, st);
    }
  }
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t r = 0; r < kPanelRows && p * kPanelRows + r < g.rows; ++r) {
      y[t * y_stride + p * kPanelRows + r] = state[static_cast<std::size_t>(t * kPanelRows + r)].y;
    }
  }
}

void check_activation_shape(std::int64_t tokens, std::int64_t cols) {
  SELFSPEC_CHECK(tokens >= 0 && cols > 0 && cols % kGroupCols == 0,
                 "quantize activations: {} tokens of {} columns (a positive multiple of 32)",
                 tokens, cols);
}

}  // namespace

namespace detail {

void quantize_activations_scalar(const float* x, std::int64_t tokens, std::int64_t cols,
                                 QuantizedActivations& out) {
  const std::int64_t groups = cols / kGroupCols;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t g = 0; g < groups; ++g) {
      const float* xs = x + t * cols + g * kGroupCols;
      float amax = 0.0f;
      for (int i = 0; i < kGroupCols; ++i) {
        const float v = std::fabs(xs[i]);
        amax = v > amax ? v : amax;  // a NaN never wins (the order of vmaxps)
      }
      const float dx = amax / 127.0f;
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      std::int8_t* q = out.q.data() + t * cols + g * kGroupCols;
      std::int32_t halves[2] = {0, 0};
      for (int i = 0; i < kGroupCols; ++i) {
        float v = xs[i] * inv;
        v = v > -127.0f ? v : -127.0f;
        v = v < 127.0f ? v : 127.0f;
        q[i] = static_cast<std::int8_t>(std::nearbyint(v));
        halves[i / 16] += q[i];
      }
      const auto tg = static_cast<std::size_t>(t * groups + g);
      record_group(out, tg, dx, halves);
    }
  }
}

void quant_panels_scalar(const PanelGeometry& g, const QuantizedActivations& a,
                         std::int64_t panel_begin, std::int64_t panel_end, float* y,
                         std::int64_t y_stride) {
  const QuantLayout layout = quant_layout(g.format);
  for (std::int64_t p = panel_begin; p < panel_end; ++p) scalar_panel(g, layout, a, p, y, y_stride);
}

void quant_panels(Isa isa, const PanelGeometry& g, const QuantizedActivations& a,
                  std::int64_t panel_begin, std::int64_t panel_end, float* y,
                  std::int64_t y_stride) {
  switch (isa) {
    case Isa::kAvx512:
      return quant_panels_avx512(g, a, panel_begin, panel_end, y, y_stride);
    case Isa::kAvx2:
      return quant_panels_avx2(g, a, panel_begin, panel_end, y, y_stride);
    case Isa::kScalar:
      return quant_panels_scalar(g, a, panel_begin, panel_end, y, y_stride);
  }
}

}  // namespace detail

void quantize_activations(const float* x, std::int64_t tokens, std::int64_t cols,
                          QuantizedActivations& out) {
  check_activation_shape(tokens, cols);
  const auto groups = static_cast<std::size_t>(tokens * (cols / kGroupCols));
  out.tokens = tokens;
  out.cols = cols;
  out.q.ensure(static_cast<std::size_t>(tokens * cols));
  out.dx.ensure(groups);
  out.s.ensure(groups);
  out.dxs.ensure(groups);
  out.s32.ensure(groups);
  out.s16.ensure(2 * groups);
  switch (active_isa()) {
    case Isa::kAvx512:
      return detail::quantize_activations_avx512(x, tokens, cols, out);
    case Isa::kAvx2:
      return detail::quantize_activations_avx2(x, tokens, cols, out);
    case Isa::kScalar:
      return detail::quantize_activations_scalar(x, tokens, cols, out);
  }
}

void quant_matmul(const float* x, std::int64_t n_tokens, const PackedView& w, float* y) {
  SELFSPEC_CHECK(is_quantized(w.format), "quant_matmul: {} is not a quantized format",
                 weight_format_name(w.format));
  SELFSPEC_CHECK(n_tokens >= 0 && w.rows > 0 && w.cols > 0,
                 "quant_matmul: bad shape (tokens {}, rows {}, cols {})", n_tokens, w.rows, w.cols);
  if (n_tokens == 0) return;
  SELFSPEC_CHECK(x != nullptr && y != nullptr, "quant_matmul: null operand");
  const PanelGeometry g = panel_geometry(w);
  thread_local QuantizedActivations buffer;
  quantize_activations(x, n_tokens, w.cols, buffer);
  // The workers read this thread's buffer (naming the thread_local inside the lambda would give
  // each worker its own, empty one).
  const QuantizedActivations& activations = buffer;
  const Isa isa = active_isa();
  parallel_for(g.panels, panels_per_chunk(g), [&](std::int64_t begin, std::int64_t end) {
    detail::quant_panels(isa, g, activations, begin, end, y, w.rows);
  });
}

}  // namespace selfspec::kernels::cpu
