// The CUDA backend's layout of a quantized matrix ("quantized rows") and the canonical arithmetic
// of its products and dequantization, shared by the kernels (`__host__ __device__`) and the host
// (building the layout, the scalar reference, the CPU tests that hold it to the CPU kernels).
//
// The arithmetic is the CPU's (kernels/cpu/quant_matmul.hpp, "canonical arithmetic"): the
// activations quantized to int8 per group of 32, the integer sums of a group exact, and per row,
// group by group in column order:
//   Q4_0, Q5_0, Q8_0:  y = fma(f(I − o·S), d·dx, y)
//   Q4_1, Q5_1:        y = fma(fma(m, f(S), d·f(I)), dx, y)
//   Q4_K, Q5_K:        acc1 = fma(f(I)·dx, f(sc), acc1); acc2 = fma(f(mn), dx·f(S), acc2);
//                      at a segment's end y = fma(acc1, d, y); y = fma(−acc2, dmin, y)
//   Q6_K:              acc = fma(fma(f(J_b), f(sc_b), f(J_a)·f(sc_a)), dx, acc) with
//                      J_h = I_h − 32·S_h over the halves; at a segment's end y = fma(acc, d, y)
// (each product and sum one rounding, no contraction), so a GPU product equals the CPU's bit for
// bit, and, since every output follows this sequence whatever T, it is token-count invariant.
// The values (u, d, m, sc, mn, sc_a, sc_b, the segments' d and dmin) are the CPU's packed ones
// (kernels/cpu/packed_weights.hpp decode_quant_row), so both backends start from the same numbers.
//
// Layout: a 256-byte header (format, rows, cols, lead_groups), then three sections, each
// row-major and 256-byte aligned (quant_rows_layout gives the offsets):
//   quants   [rows][groups][quant_bytes]: 4-bit formats 16 bytes, byte i = u_i | u_{i+16} << 4,
//            so the low nibbles of 32-bit word k are columns 4k..4k+3 and the high ones
//            16+4k..16+4k+3; 5- and 6-bit formats 32 bytes u_i; Q8_0 32 bytes u_i − 128 (int8),
//            so every stored value fits a signed byte (dp4a's operand) and the offset of Q8_0
//            is already applied;
//   params   [rows][groups][param_bytes]: Q4_0/Q5_0/Q8_0 d (f16); Q4_1/Q5_1 d, m (f16 each);
//            Q4_K/Q5_K sc, mn (u8 each); Q6_K sc_a, sc_b (i8 each);
//   segments [rows][max_segments][4 bytes]: the K formats' d, dmin (f16 each; Q6_K d only).
// lead_groups is the number of groups in a row's first segment (8 for the 32-block formats; a
// K-format slice that starts inside a super-block has fewer), then segments of 8 follow.
// Bytes per weight: Q4_K 4.63 bits (file: 4.5), Q4_0 4.5, Q8_0 8.5, Q6_K 8.6 (file: 6.56: 6-bit
// quants are kept as bytes here).
#pragma once

#include "core/dtype.hpp"
#include "core/weight_format.hpp"
#include "kernels/host_device.hpp"

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#else
#include <cmath>
#endif

namespace selfspec::kernels::cuda {

inline constexpr std::int64_t kQuantRowsHeaderBytes = 256;
inline constexpr std::uint32_t kQuantRowsMagic = 0x52514553;  // "SEQR"
inline constexpr std::int64_t kQuantGroupCols = 32;
inline constexpr std::int64_t kQuantSegmentGroups = 8;

struct QuantRowsHeader {
  std::uint32_t magic = kQuantRowsMagic;
  std::uint32_t format = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t lead_groups = kQuantSegmentGroups;
  std::int64_t reserved[28] = {};
};
static_assert(sizeof(QuantRowsHeader) == kQuantRowsHeaderBytes);

struct QuantRowsLayout {
  WeightFormat format = WeightFormat::kQ4_0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t groups = 0;
  std::int64_t max_segments = 0;
  int bits = 4;             // 4, 5, 6 or 8
  int offset = 0;           // o: Q4_0 8, Q5_0 16, Q6_K 32 (per half); Q8_0's is in its stored value
  bool k_quant = false;     // segments follow the file's super-blocks
  int quant_bytes = 16;     // per group
  int param_bytes = 2;      // per group
  std::int64_t quants = 0;  // section offsets from the start, bytes
  std::int64_t params = 0;
  std::int64_t segments = 0;
  std::int64_t bytes = 0;  // total
};

SELFSPEC_HOST_DEVICE inline std::int64_t quant_rows_align(std::int64_t n) {
  return (n + 255) / 256 * 256;
}

// The layout of a [rows × cols] matrix (cols a multiple of 32) in a quantized format; bits 0 for
// a format that is not quantized.
SELFSPEC_HOST_DEVICE inline QuantRowsLayout quant_rows_layout(WeightFormat format,
                                                              std::int64_t rows,
                                                              std::int64_t cols) {
  QuantRowsLayout l;
  l.format = format;
  l.rows = rows;
  l.cols = cols;
  l.groups = cols / kQuantGroupCols;
  l.max_segments = l.groups / kQuantSegmentGroups + 2;
  switch (format) {
    case WeightFormat::kQ4_0:
      l.bits = 4;
      l.offset = 8;
      break;
    case WeightFormat::kQ4_1:
      l.bits = 4;
      l.offset = 0;
      l.param_bytes = 4;
      break;
    case WeightFormat::kQ5_0:
      l.bits = 5;
      l.offset = 16;
      break;
    case WeightFormat::kQ5_1:
      l.bits = 5;
      l.offset = 0;
      l.param_bytes = 4;
      break;
    case WeightFormat::kQ8_0:
      l.bits = 8;
      l.offset = 0;
      break;
    case WeightFormat::kQ4_K:
      l.bits = 4;
      l.k_quant = true;
      break;
    case WeightFormat::kQ5_K:
      l.bits = 5;
      l.k_quant = true;
      break;
    case WeightFormat::kQ6_K:
      l.bits = 6;
      l.offset = 32;
      l.k_quant = true;
      break;
    default:
      l.bits = 0;
      return l;
  }
  l.quant_bytes = l.bits == 4 ? 16 : 32;
  l.quants = kQuantRowsHeaderBytes;
  l.params = quant_rows_align(l.quants + rows * l.groups * l.quant_bytes);
  l.segments = quant_rows_align(l.params + rows * l.groups * l.param_bytes);
  l.bytes = quant_rows_align(l.segments + rows * l.max_segments * 4);
  return l;
}

// The segment of group g and whether it is the last group of its segment, for a row whose first
// segment has `lead` groups.
SELFSPEC_HOST_DEVICE inline std::int64_t quant_segment_of(std::int64_t g, std::int64_t lead) {
  return g < lead ? 0 : 1 + (g - lead) / kQuantSegmentGroups;
}
SELFSPEC_HOST_DEVICE inline bool quant_segment_ends(std::int64_t g, std::int64_t lead,
                                                    std::int64_t groups) {
  if (g == groups - 1 || g == lead - 1) return true;
  return g >= lead && (g - lead) % kQuantSegmentGroups == kQuantSegmentGroups - 1;
}

// ---- one rounding each, no contraction, on both sides ---------------------------------------

SELFSPEC_HOST_DEVICE inline float qr_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;  // the host build does not contract (ISO C++, baseline x86-64)
#endif
}
SELFSPEC_HOST_DEVICE inline float qr_add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
SELFSPEC_HOST_DEVICE inline float qr_sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
SELFSPEC_HOST_DEVICE inline float qr_fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}
SELFSPEC_HOST_DEVICE inline float qr_f16(std::uint16_t bits) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(bits));
#else
  return f16_to_f32(bits);
#endif
}

// ---- one group of the canonical sequence -------------------------------------------------------

// A group's parameters as stored (params section): lo is the first two bytes - d (f16) of
// Q4_0/Q5_0/Q8_0/Q4_1/Q5_1, sc (low byte) and mn (high byte) of Q4_K/Q5_K, sc_a (low byte) and
// sc_b (high byte) of Q6_K; hi the next two, Q4_1/Q5_1's m (f16). And the row's state.
struct QuantGroupParams {
  std::uint16_t lo = 0;
  std::uint16_t hi = 0;
};
struct QuantRowState {
  float y = 0.0f;
  float acc1 = 0.0f;
  float acc2 = 0.0f;
};

// The group's integer sums: full = Σ stored · xq over the 32 columns, half_a / half_b over
// columns 0-15 / 16-31 (Q6_K); s32 = S, s_a / s_b = S over the halves.
struct QuantGroupSums {
  std::int32_t full = 0;
  std::int32_t half_a = 0;
  std::int32_t half_b = 0;
};

// One group of the sequence, split in two: the terms that depend on the group alone (computed by
// whichever thread owns the group), then the steps that depend on the row's state (taken in
// column order). quant_group_step is the two together.
struct QuantGroupTerms {
  float t0 = 0.0f;
  float t1 = 0.0f;
  float t2 = 0.0f;
  float t3 = 0.0f;
};

// The group's terms: dx, s = f(S), dxs = dx·f(S) and the integer S, S_a, S_b are the token's
// activations of the group.
//   Q4_0/Q5_0/Q8_0: t0 = f(I − o·S), t1 = d·dx            (y = fma(t0, t1, y))
//   Q4_1/Q5_1:      t0 = fma(m, f(S), d·f(I)), t1 = dx     (y = fma(t0, t1, y))
//   Q4_K/Q5_K:      t0 = f(I)·dx, t1 = f(sc), t2 = f(mn), t3 = dxs
//                   (acc1 = fma(t0, t1, acc1); acc2 = fma(t2, t3, acc2))
//   Q6_K:           t0 = fma(f(J_b), f(sc_b), f(J_a)·f(sc_a)), t1 = dx  (acc1 = fma(t0, t1, acc1))
SELFSPEC_HOST_DEVICE inline QuantGroupTerms quant_group_terms(WeightFormat format, int offset,
                                                              const QuantGroupParams& p,
                                                              const QuantGroupSums& sum, float dx,
                                                              float s, float dxs, std::int32_t s32,
                                                              std::int32_t s_a, std::int32_t s_b) {
  QuantGroupTerms t;
  switch (format) {
    case WeightFormat::kQ4_0:
    case WeightFormat::kQ5_0:
    case WeightFormat::kQ8_0:
      t.t0 = static_cast<float>(sum.full - offset * s32);
      t.t1 = qr_mul(qr_f16(p.lo), dx);
      break;
    case WeightFormat::kQ4_1:
    case WeightFormat::kQ5_1:
      t.t0 = qr_fma(qr_f16(p.hi), s, qr_mul(qr_f16(p.lo), static_cast<float>(sum.full)));
      t.t1 = dx;
      break;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K:
      t.t0 = qr_mul(static_cast<float>(sum.full), dx);
      t.t1 = static_cast<float>(p.lo & 0xFF);
      t.t2 = static_cast<float>(p.lo >> 8);
      t.t3 = dxs;
      break;
    case WeightFormat::kQ6_K: {
      const float sca = static_cast<float>(static_cast<std::int8_t>(p.lo & 0xFF));
      const float scb = static_cast<float>(static_cast<std::int8_t>(p.lo >> 8));
      const std::int32_t ja = sum.half_a - offset * s_a;
      const std::int32_t jb = sum.half_b - offset * s_b;
      t.t0 = qr_fma(static_cast<float>(jb), scb, qr_mul(static_cast<float>(ja), sca));
      t.t1 = dx;
      break;
    }
    default:
      break;
  }
  return t;
}

// Which of a token's group statistics quant_group_terms reads for a format (dx always): the
// quantized GEMV loads only these (quant_matmul.cu); a CPU test checks that the others do not
// change the terms.
struct QuantStatsRead {
  bool s = false;
  bool dxs = false;
  bool s32 = false;
  bool s16 = false;  // S_a and S_b
};
SELFSPEC_HOST_DEVICE constexpr QuantStatsRead quant_stats_read(WeightFormat format) {
  QuantStatsRead r;
  r.s32 = format == WeightFormat::kQ4_0 || format == WeightFormat::kQ5_0 ||
          format == WeightFormat::kQ8_0;
  r.s = format == WeightFormat::kQ4_1 || format == WeightFormat::kQ5_1;
  r.dxs = format == WeightFormat::kQ4_K || format == WeightFormat::kQ5_K;
  r.s16 = format == WeightFormat::kQ6_K;
  return r;
}

// The group's terms into the row's state, in column order.
SELFSPEC_HOST_DEVICE inline void quant_group_apply(WeightFormat format, const QuantGroupTerms& t,
                                                   QuantRowState& st) {
  switch (format) {
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K:
      st.acc1 = qr_fma(t.t0, t.t1, st.acc1);
      st.acc2 = qr_fma(t.t2, t.t3, st.acc2);
      return;
    case WeightFormat::kQ6_K:
      st.acc1 = qr_fma(t.t0, t.t1, st.acc1);
      return;
    default:
      st.y = qr_fma(t.t0, t.t1, st.y);
      return;
  }
}

SELFSPEC_HOST_DEVICE inline void quant_group_step(WeightFormat format, int offset,
                                                  const QuantGroupParams& p,
                                                  const QuantGroupSums& sum, float dx, float s,
                                                  float dxs, std::int32_t s32, std::int32_t s_a,
                                                  std::int32_t s_b, QuantRowState& st) {
  quant_group_apply(format, quant_group_terms(format, offset, p, sum, dx, s, dxs, s32, s_a, s_b),
                    st);
}

// The end of a segment: the segment's d and dmin (converted from f16, exactly).
SELFSPEC_HOST_DEVICE inline void quant_segment_end(WeightFormat format, float d, float dmin,
                                                   QuantRowState& st) {
  if (format == WeightFormat::kQ4_K || format == WeightFormat::kQ5_K) {
    st.y = qr_fma(st.acc1, d, st.y);
    st.y = qr_fma(-st.acc2, dmin, st.y);
  } else if (format == WeightFormat::kQ6_K) {
    st.y = qr_fma(st.acc1, d, st.y);
  }
  st.acc1 = 0.0f;
  st.acc2 = 0.0f;
}

// ---- the quantized activations' workspace ------------------------------------------------------

// Where quantize_activations puts a [tokens × cols] input's quantization (each array 256-byte
// aligned): q [tokens][cols] int8; dx, s = f(S), dxs = dx·f(S) [tokens][groups] f32; S
// [tokens][groups] and S_a, S_b [tokens][groups][2] int32.
struct QuantActivationsLayout {
  std::int64_t q = 0, dx = 0, s = 0, dxs = 0, s32 = 0, s16 = 0, bytes = 0;
};
SELFSPEC_HOST_DEVICE inline QuantActivationsLayout quant_activations_layout(std::int64_t tokens,
                                                                            std::int64_t cols) {
  const std::int64_t groups = cols / kQuantGroupCols;
  QuantActivationsLayout l;
  l.q = 0;
  l.dx = quant_rows_align(tokens * cols);
  l.s = quant_rows_align(l.dx + tokens * groups * 4);
  l.dxs = quant_rows_align(l.s + tokens * groups * 4);
  l.s32 = quant_rows_align(l.dxs + tokens * groups * 4);
  l.s16 = quant_rows_align(l.s32 + tokens * groups * 4);
  l.bytes = quant_rows_align(l.s16 + tokens * groups * 8);
  return l;
}

// ---- dequantization (the embedding lookup of a quantized table) --------------------------------

// The value of column i (< 32) of a group with stored value `stored` (u, or u − 128 for Q8_0),
// its parameters and its segment's d and dmin: ggml's dequantization, bit for bit.
SELFSPEC_HOST_DEVICE inline float quant_dequantize(WeightFormat format, int stored, int i,
                                                   const QuantGroupParams& p, std::uint16_t seg_d,
                                                   std::uint16_t seg_dmin) {
  switch (format) {
    case WeightFormat::kQ4_0:
      return qr_mul(static_cast<float>(stored - 8), qr_f16(p.lo));
    case WeightFormat::kQ5_0:
      return qr_mul(static_cast<float>(stored - 16), qr_f16(p.lo));
    case WeightFormat::kQ8_0:
      return qr_mul(static_cast<float>(stored), qr_f16(p.lo));
    case WeightFormat::kQ4_1:
    case WeightFormat::kQ5_1:
      return qr_add(qr_mul(static_cast<float>(stored), qr_f16(p.lo)), qr_f16(p.hi));
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K: {
      const float scale = qr_mul(qr_f16(seg_d), static_cast<float>(p.lo & 0xFF));
      const float min = qr_mul(qr_f16(seg_dmin), static_cast<float>(p.lo >> 8));
      return qr_sub(qr_mul(scale, static_cast<float>(stored)), min);
    }
    case WeightFormat::kQ6_K: {
      const int sc = static_cast<std::int8_t>(i < 16 ? (p.lo & 0xFF) : (p.lo >> 8));
      const float scale = qr_mul(qr_f16(seg_d), static_cast<float>(sc));
      return qr_mul(scale, static_cast<float>(stored - 32));
    }
    default:
      return 0.0f;
  }
}

}  // namespace selfspec::kernels::cuda
