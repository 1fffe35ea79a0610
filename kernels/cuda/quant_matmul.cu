// GGUF weights run as stored on the GPU: the activation quantizer, the quantized GEMV and the
// quantized embedding lookup over the CUDA backend's quantized rows (kernels/cuda/quant_rows.hpp,
// which holds the arithmetic; kernels/cpu/quant_matmul.hpp defines it).
//
// Activations (quantize_activations_kernel): one warp per (token, group of 32), lane i holding
// column i, quantized by quant_activations.cuh's quantize_group (the CPU quantizer's bits; the
// RMSNorm that quantizes its output, elementwise.cu, calls the same function).
//
// GEMV (quant_matmul_kernel): row tiles (kernels/cuda/quant_tile_plan.hpp, where the schedule
// and its shared-memory layout are defined and tested on the CPU). A block of 4 warps takes 8
// rows and T <= 8 tokens (more run as further launches); in each round of 32 groups, lane l of a
// warp forms group 32·round + l's integer sums for each token with dp4a (exact, so their order is
// free) and its terms (quant_group_terms) for the warp's 2 rows, into shared memory, while one
// lane per (row, token) chain walks the round before in column order (quant_group_apply, and
// quant_segment_end at a K-format segment's end). So every output is the canonical sequence: the
// CPU's bits, whatever T (token-count invariance) - the CPU tests hold the sequence (its scalar
// reference, backend/quant_rows_builder.hpp) to the CPU kernels, the GPU tests this kernel to it.
// 8·T chains walk at once (one warp per row walked with one lane at T = 1, and the walk set the
// pace: 610 GB/s on an H200). Each lane keeps its groups of the next kRoundsAhead rounds in
// registers (a ring refilled as a round is taken). Programmatic dependent launch: the row header
// and the first rounds' weights are read before waiting for the kernel before; activations after.
//
// Embedding (quant_embedding_kernel): a grid-stride loop over the tokens' columns, each value
// quant_dequantize of its group (ggml's dequantization, as the CPU's lookup of a quantized table).
// Dequantization (quant_dequantize_bf16_kernel): the same values for a whole matrix, rounded to
// bf16, for prefill chunks through cuBLASLt.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/matmul_segments.cuh"
#include "kernels/cuda/quant_activations.cuh"
#include "kernels/cuda/quant_rows.hpp"
#include "kernels/cuda/quant_tile_plan.hpp"
#include "kernels/shared_math.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace selfspec::kernels::cuda {
namespace {

using detail::kFullMask;
using detail::kWarpSize;
using detail::require;
using detail::str;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
static_assert(kWarps == kQuantTileWarps, "the GEMV's blocks are the tile plan's");
constexpr int kRoundsAhead = 3;  // rounds of a GEMV tile whose weights are in flight
constexpr int kQuantTile = kQuantTileMaxTokens;  // tokens of one GEMV launch

struct Activations {
  const std::int8_t* q = nullptr;
  const float* dx = nullptr;
  const float* s = nullptr;
  const float* dxs = nullptr;
  const std::int32_t* s32 = nullptr;
  const std::int32_t* s16 = nullptr;
  std::int64_t cols = 0;
  std::int64_t groups = 0;
};

__device__ __forceinline__ Activations activations_view(const void* workspace, std::int64_t tokens,
                                                        std::int64_t cols) {
  const QuantActivationsLayout l = quant_activations_layout(tokens, cols);
  const auto* base = static_cast<const std::uint8_t*>(workspace);
  Activations a;
  a.q = reinterpret_cast<const std::int8_t*>(base + l.q);
  a.dx = reinterpret_cast<const float*>(base + l.dx);
  a.s = reinterpret_cast<const float*>(base + l.s);
  a.dxs = reinterpret_cast<const float*>(base + l.dxs);
  a.s32 = reinterpret_cast<const std::int32_t*>(base + l.s32);
  a.s16 = reinterpret_cast<const std::int32_t*>(base + l.s16);
  a.cols = cols;
  a.groups = cols / kQuantGroupCols;
  return a;
}

// ---- activations ------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    quantize_activations_kernel(const float* __restrict__ x, std::int64_t tokens, std::int64_t cols,
                                std::uint8_t* __restrict__ workspace) {
  detail::allow_dependents();
  detail::wait_for_prerequisites();
  const QuantActivationsLayout l = quant_activations_layout(tokens, cols);
  const std::int64_t groups = cols / kQuantGroupCols;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kWarps;
  for (std::int64_t tg = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
       tg < tokens * groups; tg += warps) {  // warp-uniform
    const std::int64_t t = tg / groups;
    const std::int64_t g = tg - t * groups;
    detail::quantize_group(x[t * cols + g * kQuantGroupCols + lane], lane, t, g, cols, l,
                           workspace);
  }
}

// ---- GEMV -------------------------------------------------------------------------------------

template <WeightFormat kFormat>
__device__ __forceinline__ QuantGroupParams load_params(const std::uint8_t* p) {
  QuantGroupParams params;
  params.lo = __ldg(reinterpret_cast<const unsigned short*>(p));
  if constexpr (kFormat == WeightFormat::kQ4_1 || kFormat == WeightFormat::kQ5_1) {
    params.hi = __ldg(reinterpret_cast<const unsigned short*>(p) + 1);
  }
  return params;
}

// A lane's group of one round as stored, loaded ahead of its round: the stored values (4-bit: 16
// bytes of nibbles, in w[0]; otherwise 32 bytes), the params and, for the K formats, the d and
// dmin of the segment the group ends (segment_ends false: it ends none). Past the row's groups
// or rows: zeros, never used.
struct GroupRaw {
  uint4 w[2];
  QuantGroupParams params;
  std::uint16_t seg_d = 0;
  std::uint16_t seg_dmin = 0;
  bool segment_ends = false;
};

// A row of the tile: where its sections start (null: past the matrix's rows), and its matrix's
// first segment length.
struct RowPointers {
  const std::uint8_t* quants = nullptr;
  const std::uint8_t* params = nullptr;
  const std::uint8_t* segments = nullptr;
  std::int64_t lead = kQuantSegmentGroups;
};

// The matrices of one launch: up to kMaxMatmulOutputs of one format and cols (Wq|Wk|Wv), tiles
// numbered over them in turn; the SwiGLU form: s[0] the gate (its y the output), s[1] the up of
// the same shape, tiles over the gate's rows (quant_tile_plan.hpp's quant_tile_row); the RoPE
// form: tiles over each matrix's head pairs, and what the matrix does with them (output). A
// tile's segment is found by matmul_segments.cuh's segment_of, as the dense GEMVs' units are.
struct QuantSegment {
  const std::uint8_t* base = nullptr;
  QuantRowsLayout l;
  float* y = nullptr;
  std::int64_t first_unit = 0;  // its first tile
  HeadOutput output = HeadOutput::kRotated;
};
struct QuantSegments {
  QuantSegment s[kMaxMatmulOutputs];
  int count = 0;
  std::int64_t total_tiles = 0;
  bool accumulate = false;  // y += the product (the residual add; not the SwiGLU form)
};

// Row r of the tile (plan row mapping): its pointers, or none past its matrix's rows.
template <QuantTileForm kForm>
__device__ __forceinline__ RowPointers tile_row_pointers(const QuantSegments& segments,
                                                         const QuantSegment& segment,
                                                         std::int64_t tile, int r,
                                                         std::int64_t head_dim) {
  const QuantTileRow where = quant_tile_row(kForm, tile, r, head_dim);
  const QuantRowsLayout& l = segment.l;
  RowPointers out;
  if (where.row >= l.rows) return out;
  const std::uint8_t* base =
      kForm == QuantTileForm::kSwiglu && where.part == 1 ? segments.s[1].base : segment.base;
  out.quants = base + l.quants + where.row * l.groups * l.quant_bytes;
  out.params = base + l.params + where.row * l.groups * l.param_bytes;
  out.segments = base + l.segments + where.row * l.max_segments * 4;
  out.lead = reinterpret_cast<const QuantRowsHeader*>(base)->lead_groups;  // weights: no wait
  return out;
}

template <WeightFormat kFormat, int kBits, bool kKQuant>
__device__ __forceinline__ GroupRaw load_group_raw(const RowPointers& row, const QuantRowsLayout& l,
                                                   std::int64_t g) {
  GroupRaw raw;
  raw.w[0] = make_uint4(0u, 0u, 0u, 0u);
  raw.w[1] = make_uint4(0u, 0u, 0u, 0u);
  if (row.quants == nullptr || g >= l.groups) return raw;
  const auto* group_quants = reinterpret_cast<const uint4*>(row.quants + g * l.quant_bytes);
  raw.w[0] = __ldg(group_quants);
  if constexpr (kBits != 4) raw.w[1] = __ldg(group_quants + 1);
  raw.params = load_params<kFormat>(row.params + g * l.param_bytes);
  if constexpr (kKQuant) {
    raw.segment_ends = quant_segment_ends(g, row.lead, l.groups);
    if (raw.segment_ends) {
      const auto* seg =
          reinterpret_cast<const unsigned short*>(row.segments + quant_segment_of(g, row.lead) * 4);
      raw.seg_d = __ldg(seg);
      raw.seg_dmin = __ldg(seg + 1);
    }
  }
  return raw;
}

// One token's activations of a group: its 32 quantized values (8 words) and the statistics its
// format's terms read (quant_stats_read; the rest stay zero and unused). __ldg is an asm
// statement the compiler keeps even when its value is unused, so the format picks the loads.
struct GroupActivations {
  int xw[8];
  float dx = 0.0f;
  float s = 0.0f;
  float dxs = 0.0f;
  std::int32_t s32 = 0;
  std::int32_t s_a = 0;
  std::int32_t s_b = 0;
};

template <WeightFormat kFormat>
__device__ __forceinline__ GroupActivations load_group_activations(const Activations& a,
                                                                   std::int64_t token,
                                                                   std::int64_t g) {
  const auto* xq = reinterpret_cast<const uint4*>(a.q + token * a.cols + g * kQuantGroupCols);
  const uint4 x0 = __ldg(xq);
  const uint4 x1 = __ldg(xq + 1);
  const std::int64_t tg = token * a.groups + g;
  GroupActivations out{{static_cast<int>(x0.x), static_cast<int>(x0.y), static_cast<int>(x0.z),
                        static_cast<int>(x0.w), static_cast<int>(x1.x), static_cast<int>(x1.y),
                        static_cast<int>(x1.z), static_cast<int>(x1.w)}};
  constexpr QuantStatsRead kRead = quant_stats_read(kFormat);
  out.dx = __ldg(a.dx + tg);  // every format
  if constexpr (kRead.s) out.s = __ldg(a.s + tg);
  if constexpr (kRead.dxs) out.dxs = __ldg(a.dxs + tg);
  if constexpr (kRead.s32) out.s32 = __ldg(a.s32 + tg);
  if constexpr (kRead.s16) {
    out.s_a = __ldg(a.s16 + 2 * tg);
    out.s_b = __ldg(a.s16 + 2 * tg + 1);
  }
  return out;
}

// The integer sums of one group for one token: the group's stored values against the token's 32
// quantized activations.
template <int kBits>
__device__ __forceinline__ QuantGroupSums group_sums(const GroupRaw& raw, const int (&xw)[8]) {
  QuantGroupSums sums;
  if constexpr (kBits == 4) {
    const uint4 w = raw.w[0];
    const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int lo = static_cast<int>(words[j] & 0x0F0F0F0Fu);         // columns 4j .. 4j + 3
      const int hi = static_cast<int>((words[j] >> 4) & 0x0F0F0F0Fu);  // columns 16 + 4j ..
      sums.half_a = __dp4a(lo, xw[j], sums.half_a);
      sums.half_b = __dp4a(hi, xw[4 + j], sums.half_b);
    }
  } else {
    const uint4 w0 = raw.w[0];
    const uint4 w1 = raw.w[1];
    const int ww[8] = {static_cast<int>(w0.x), static_cast<int>(w0.y), static_cast<int>(w0.z),
                       static_cast<int>(w0.w), static_cast<int>(w1.x), static_cast<int>(w1.y),
                       static_cast<int>(w1.z), static_cast<int>(w1.w)};
#pragma unroll
    for (int k = 0; k < 4; ++k) sums.half_a = __dp4a(ww[k], xw[k], sums.half_a);
#pragma unroll
    for (int k = 4; k < 8; ++k) sums.half_b = __dp4a(ww[k], xw[k], sums.half_b);
  }
  sums.full = sums.half_a + sums.half_b;
  return sums;
}

// A writer warp's part of a round (quant_tile_plan.hpp): lane `lane` takes group 32·round + lane
// of the warp's rows (those inside their matrix: rows[i].quants set), for every token of the
// launch, into the round's buffer; for a K format, the group's segment end too.
template <WeightFormat kFormat, int kTokens, int kBits, bool kKQuant>
__device__ __forceinline__ void write_round(const GroupRaw (&raw)[kQuantRowsPerWarp],
                                            const RowPointers (&rows)[kQuantRowsPerWarp],
                                            std::int64_t round, int lane, int warp,
                                            const QuantRowsLayout& l, const Activations& a,
                                            std::int64_t token_begin, float* shared) {
  constexpr QuantTilePlan kPlan = quant_tile_plan(kFormat, kTokens);
  const std::int64_t g = round * kQuantRoundGroups + lane;
  if (g >= l.groups) return;
  const int buffer = kPlan.buffer(round);
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    const GroupActivations x = load_group_activations<kFormat>(a, token_begin + t, g);
#pragma unroll
    for (int i = 0; i < kQuantRowsPerWarp; ++i) {
      if (rows[i].quants != nullptr) {
        const QuantGroupTerms terms =
            quant_group_terms(kFormat, l.offset, raw[i].params, group_sums<kBits>(raw[i], x.xw),
                              x.dx, x.s, x.dxs, x.s32, x.s_a, x.s_b);
        const int r = warp * kQuantRowsPerWarp + i;
        float* out = shared + kPlan.terms(buffer, kPlan.chain_of(t, r), lane);
        if constexpr (kPlan.term_words == 4) {
          *reinterpret_cast<float4*>(out) = make_float4(terms.t0, terms.t1, terms.t2, terms.t3);
        } else {
          *reinterpret_cast<float2*>(out) = make_float2(terms.t0, terms.t1);
        }
      }
    }
  }
  if constexpr (kKQuant) {
#pragma unroll
    for (int i = 0; i < kQuantRowsPerWarp; ++i) {
      if (rows[i].quants != nullptr) {
        quant_tile_store_segment(kPlan, shared, buffer, lane, warp * kQuantRowsPerWarp + i,
                                 raw[i].segment_ends, qr_f16(raw[i].seg_d),
                                 qr_f16(raw[i].seg_dmin));
      }
    }
  }
}

// The chains' results out: y[t][row], or y[t][row] + the result when accumulating (one rounding:
// the residual add's bits). The pair forms: a pair's first chain takes the second chain's value,
// a shuffle away (every lane takes part in the shuffle), and stores swiglu_value(gate, up)
// (SwiGLU) or the head pair through the position step (RoPE: position_step.hpp's
// store_head_pair, the bits of rope_write_kv on the products).
template <QuantTileForm kForm>
__device__ __forceinline__ void store_chains(const QuantTilePlan& plan, const QuantSegment& seg,
                                             bool accumulate, std::int64_t tile,
                                             std::int64_t token_begin, int chain, bool walks,
                                             float value, const PositionStep& step,
                                             const StepParams* step_params) {
  const QuantTileRow where = quant_tile_row(kForm, tile, plan.row_of(chain), step.head_dim);
  const std::int64_t token = token_begin + plan.token_of(chain);
  if constexpr (kForm != QuantTileForm::kRows) {
    const float second = __shfl_down_sync(kFullMask, value, kQuantPartnerLaneOffset);
    if (!walks || where.part != 0) return;
    if constexpr (kForm == QuantTileForm::kHeadPairs) {
      const std::int64_t pair = tile * quant_tile_part_rows(kForm) + plan.row_of(chain);
      store_head_pair(step, seg.output, step_params->n_past, token, pair, value, second);
      return;
    } else {
      value = swiglu_value(value, second);
    }
  } else {
    if (!walks) return;
  }
  float* const out = seg.y + token * seg.l.rows + where.row;
  *out = accumulate ? __fadd_rn(*out, value) : value;
}

template <WeightFormat kFormat, int kTokens, QuantTileForm kForm>
__global__ void __launch_bounds__(kThreads)
    quant_matmul_kernel(const QuantSegments segments, const std::uint8_t* __restrict__ activations,
                        std::int64_t act_tokens, std::int64_t token_begin, const PositionStep step,
                        const StepParams* step_params) {
  extern __shared__ __align__(16) float tile_shared[];
  constexpr QuantTilePlan kPlan = quant_tile_plan(kFormat, kTokens);
  constexpr int kBits = kFormat == WeightFormat::kQ4_0 || kFormat == WeightFormat::kQ4_1 ||
                                kFormat == WeightFormat::kQ4_K
                            ? 4
                            : 8;
  constexpr bool kKQuant = quant_k_format(kFormat);
  detail::allow_dependents();
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const QuantSegment seg =
      detail::segment_of<kForm == QuantTileForm::kSwiglu>(segments, blockIdx.x);
  const QuantRowsLayout& l = seg.l;
  const std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) - seg.first_unit;
  RowPointers rows[kQuantRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kQuantRowsPerWarp; ++i) {
    rows[i] =
        tile_row_pointers<kForm>(segments, seg, tile, warp * kQuantRowsPerWarp + i, step.head_dim);
  }
  // The weights of the first kRoundsAhead rounds (a ring of registers, refilled as each round is
  // taken), asked for before waiting for the kernel before this one: no kernel writes them.
  const std::int64_t n_rounds = (l.groups + kQuantRoundGroups - 1) / kQuantRoundGroups;
  GroupRaw ring[kRoundsAhead][kQuantRowsPerWarp];
#pragma unroll
  for (int d = 0; d < kRoundsAhead; ++d) {
#pragma unroll
    for (int i = 0; i < kQuantRowsPerWarp; ++i) {
      ring[d][i] = load_group_raw<kFormat, kBits, kKQuant>(
          rows[i], l, std::int64_t{d} * kQuantRoundGroups + lane);
    }
  }
  detail::wait_for_prerequisites();

  const Activations a = activations_view(activations, act_tokens, l.cols);
  const int chain = static_cast<int>(threadIdx.x);  // the chain this lane walks, if any
  const bool walks = chain < kPlan.chains() &&
                     quant_tile_row(kForm, tile, kPlan.row_of(chain), step.head_dim).row < l.rows;
  QuantRowState st;
  // Round k's terms are written while round k - 1 is walked; the barrier ends both. The loop's
  // conditions are the block's alike, so every thread reaches every barrier.
  for (std::int64_t base = 0; base <= n_rounds; base += kRoundsAhead) {
#pragma unroll
    for (int d = 0; d < kRoundsAhead; ++d) {
      const std::int64_t round = base + d;
      if (round <= n_rounds) {
        if (round < n_rounds) {
          GroupRaw current[kQuantRowsPerWarp];
#pragma unroll
          for (int i = 0; i < kQuantRowsPerWarp; ++i) {
            current[i] = ring[d][i];
            ring[d][i] = load_group_raw<kFormat, kBits, kKQuant>(
                rows[i], l, (round + kRoundsAhead) * kQuantRoundGroups + lane);
          }
          write_round<kFormat, kTokens, kBits, kKQuant>(current, rows, round, lane, warp, l, a,
                                                        token_begin, tile_shared);
        }
        if (round >= 1 && walks) {
          quant_tile_walk<kFormat>(kPlan, tile_shared, kPlan.buffer(round - 1), chain,
                                   quant_round_groups(round - 1, l.groups), st);
        }
        __syncthreads();
      }
    }
  }
  store_chains<kForm>(kPlan, seg, segments.accumulate, tile, token_begin, chain, walks, st.y, step,
                      step_params);
}

// ---- embedding --------------------------------------------------------------------------------

// Column c of row `row` of a quantized matrix, dequantized (ggml's value, quant_dequantize).
template <WeightFormat kFormat>
__device__ __forceinline__ float dequantized_element(const std::uint8_t* __restrict__ rows_base,
                                                     const QuantRowsLayout& l, std::int64_t lead,
                                                     std::int64_t row, std::int64_t c) {
  constexpr int kBits = kFormat == WeightFormat::kQ4_0 || kFormat == WeightFormat::kQ4_1 ||
                                kFormat == WeightFormat::kQ4_K
                            ? 4
                            : 8;
  const std::int64_t g = c / kQuantGroupCols;
  const int i = static_cast<int>(c - g * kQuantGroupCols);
  const std::uint8_t* group = rows_base + l.quants + (row * l.groups + g) * l.quant_bytes;
  int stored = 0;
  if constexpr (kBits == 4) {
    const int byte = group[i % 16];
    stored = i < 16 ? byte & 0xF : byte >> 4;
  } else if constexpr (kFormat == WeightFormat::kQ8_0) {
    stored = static_cast<std::int8_t>(group[i]);
  } else {
    stored = group[i];
  }
  const QuantGroupParams p =
      load_params<kFormat>(rows_base + l.params + (row * l.groups + g) * l.param_bytes);
  std::uint16_t seg_d = 0;
  std::uint16_t seg_dmin = 0;
  if (l.k_quant) {
    const auto* seg = reinterpret_cast<const unsigned short*>(
        rows_base + l.segments + (row * l.max_segments + quant_segment_of(g, lead)) * 4);
    seg_d = seg[0];
    seg_dmin = seg[1];
  }
  return quant_dequantize(kFormat, stored, i, p, seg_d, seg_dmin);
}

template <WeightFormat kFormat>
__global__ void quant_embedding_kernel(const std::uint8_t* __restrict__ rows_base,
                                       const QuantRowsLayout l, std::int64_t vocab_begin,
                                       const std::int32_t* tokens, std::int64_t n_tokens,
                                       float* out) {
  detail::allow_dependents();
  const std::int64_t lead = reinterpret_cast<const QuantRowsHeader*>(rows_base)->lead_groups;
  detail::wait_for_prerequisites();
  const std::int64_t n = n_tokens * l.cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += stride) {
    const std::int64_t t = e / l.cols;
    const std::int64_t c = e - t * l.cols;
    const std::int64_t row = static_cast<std::int64_t>(tokens[t]) - vocab_begin;
    out[e] =
        row < 0 || row >= l.rows ? 0.0f : dequantized_element<kFormat>(rows_base, l, lead, row, c);
  }
}

// The whole matrix dequantized and rounded to bf16 (float_to_bf16_bits, the host's rounding):
// the weights of a quantized prefill's cuBLASLt GEMM.
template <WeightFormat kFormat>
__global__ void quant_dequantize_bf16_kernel(const std::uint8_t* __restrict__ rows_base,
                                             const QuantRowsLayout l, std::uint16_t* out) {
  detail::allow_dependents();
  const std::int64_t lead = reinterpret_cast<const QuantRowsHeader*>(rows_base)->lead_groups;
  detail::wait_for_prerequisites();  // `out` may still be read by the GEMM before this kernel
  const std::int64_t n = l.rows * l.cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += stride) {
    const std::int64_t row = e / l.cols;
    out[e] =
        float_to_bf16_bits(dequantized_element<kFormat>(rows_base, l, lead, row, e - row * l.cols));
  }
}

// ---- host ---------------------------------------------------------------------------------------

QuantRowsLayout checked_layout(const QuantWeight& w, const char* what) {
  require(w.data != nullptr && w.rows > 0 && w.cols > 0 && w.cols % kQuantGroupCols == 0,
          std::string(what) + ": bad quantized matrix (" + str(w.rows) + " x " + str(w.cols) + ")");
  const QuantRowsLayout l = quant_rows_layout(w.format, w.rows, w.cols);
  require(l.bits != 0,
          std::string(what) + ": format " + str(static_cast<int>(w.format)) + " is not quantized");
  require(detail::is_aligned(w.data, 256), std::string(what) + ": misaligned quantized rows");
  return l;
}

// The RoPE form's position step (unused by the other forms: a default one, no parameters).
struct StepArgs {
  PositionStep step;
  const StepParams* params = nullptr;
};

template <WeightFormat kFormat, int kTokens, QuantTileForm kForm>
void launch_tile(const QuantSegments& segments, const void* activations, std::int64_t tokens,
                 std::int64_t begin, const StepArgs& step, cudaStream_t stream) {
  constexpr QuantTilePlan kPlan = quant_tile_plan(kFormat, kTokens);
  const auto shared = static_cast<std::size_t>(kPlan.shared_bytes());
  detail::allow_dynamic_smem(quant_matmul_kernel<kFormat, kTokens, kForm>, shared);
  detail::launch_dependent_smem(
      quant_matmul_kernel<kFormat, kTokens, kForm>,
      dim3(static_cast<unsigned>(segments.total_tiles)), dim3(kThreads), shared, stream, segments,
      static_cast<const std::uint8_t*>(activations), tokens, begin, step.step, step.params);
}

// Launches over tiles of up to kQuantTile tokens (each the same per-token arithmetic).
template <WeightFormat kFormat, QuantTileForm kForm>
void launch_matmul(const QuantSegments& segments, const void* activations, std::int64_t tokens,
                   const StepArgs& step, cudaStream_t stream) {
  for (std::int64_t begin = 0; begin < tokens; begin += kQuantTile) {
    const std::int64_t tile = tokens - begin < kQuantTile ? tokens - begin : kQuantTile;
    switch (tile) {
#define SELFSPEC_QUANT_TILE(T)                                                          \
  case T:                                                                               \
    launch_tile<kFormat, T, kForm>(segments, activations, tokens, begin, step, stream); \
    break;
      SELFSPEC_QUANT_TILE(1)
      SELFSPEC_QUANT_TILE(2)
      SELFSPEC_QUANT_TILE(3)
      SELFSPEC_QUANT_TILE(4)
      SELFSPEC_QUANT_TILE(5)
      SELFSPEC_QUANT_TILE(6)
      SELFSPEC_QUANT_TILE(7)
      SELFSPEC_QUANT_TILE(8)
#undef SELFSPEC_QUANT_TILE
      default:
        require(false, "quant_matmul: tile of " + str(tile) + " tokens");
    }
  }
}

// The segments of a launch: every matrix checked, one format and one cols; the SwiGLU form's
// {gate, up} of one shape, tiles over the gate's rows.
QuantSegments make_quant_segments(std::span<const QuantMatmulOutput> outputs, bool swiglu,
                                  bool accumulate) {
  require(!outputs.empty() && outputs.size() <= static_cast<std::size_t>(kMaxMatmulOutputs),
          "quant_matmul: " + str(static_cast<std::int64_t>(outputs.size())) +
              " matrices in one launch (1 to " + str(kMaxMatmulOutputs) + ")");
  QuantSegments segments;
  for (const QuantMatmulOutput& out : outputs) {
    const QuantRowsLayout l = checked_layout(out.w, "quant_matmul");
    require(out.w.format == outputs.front().w.format && out.w.cols == outputs.front().w.cols,
            "quant_matmul: the matrices of one launch differ in format or columns");
    require(out.y != nullptr || (swiglu && segments.count == 1), "quant_matmul: null output");
    QuantSegment& s = segments.s[segments.count++];
    s.base = static_cast<const std::uint8_t*>(out.w.data);
    s.l = l;
    s.y = out.y;
    s.first_unit = segments.total_tiles;
    if (!swiglu) segments.total_tiles += quant_tiles(QuantTileForm::kRows, l.rows);
  }
  if (swiglu) {
    require(outputs.size() == 2 && outputs[0].w.rows == outputs[1].w.rows,
            "quant_matmul_swiglu: gate and up of one shape");
    segments.s[1].first_unit = 0;
    segments.total_tiles = quant_tiles(QuantTileForm::kSwiglu, outputs[0].w.rows);
  }
  require(segments.total_tiles <= 0x7fffffff, "quant_matmul: too many rows");
  require(!(swiglu && accumulate), "quant_matmul: the SwiGLU form does not accumulate");
  segments.accumulate = accumulate;
  return segments;
}

// The RoPE form's segments: tiles over each matrix's head pairs (rows / 2 of whole heads).
QuantSegments make_head_pair_segments(std::span<const QuantHeadMatmul> outputs) {
  QuantSegments segments;
  for (const QuantHeadMatmul& out : outputs) {
    const QuantRowsLayout l = checked_layout(out.w, "quant_matmul_rope_kv");
    require(out.w.format == outputs.front().w.format,
            "quant_matmul_rope_kv: the matrices of one launch differ in format");
    QuantSegment& s = segments.s[segments.count++];
    s.base = static_cast<const std::uint8_t*>(out.w.data);
    s.l = l;
    s.first_unit = segments.total_tiles;
    s.output = out.output;
    segments.total_tiles += quant_tiles(QuantTileForm::kHeadPairs, l.rows);
  }
  require(segments.total_tiles <= 0x7fffffff, "quant_matmul_rope_kv: too many rows");
  return segments;
}

template <WeightFormat kFormat>
void launch_embedding(const QuantRowsLayout& l, const QuantWeight& table, std::int64_t vocab_begin,
                      const std::int32_t* tokens, std::int64_t n_tokens, float* out,
                      cudaStream_t stream) {
  constexpr int kEmbeddingThreads = 256;
  detail::launch_dependent(quant_embedding_kernel<kFormat>,
                           dim3(detail::grid_stride_blocks(n_tokens * l.cols, kEmbeddingThreads)),
                           dim3(kEmbeddingThreads), stream,
                           static_cast<const std::uint8_t*>(table.data), l, vocab_begin, tokens,
                           n_tokens, out);
}

template <WeightFormat kFormat>
void launch_dequantize(const QuantRowsLayout& l, const QuantWeight& w, std::uint16_t* out,
                       cudaStream_t stream) {
  constexpr int kDequantizeThreads = 256;
  detail::launch_dependent(quant_dequantize_bf16_kernel<kFormat>,
                           dim3(detail::grid_stride_blocks(l.rows * l.cols, kDequantizeThreads)),
                           dim3(kDequantizeThreads), stream,
                           static_cast<const std::uint8_t*>(w.data), l, out);
}

// Calls f.template operator()<kFormat>() for the matrix's format.
template <class F>
void dispatch_format(WeightFormat format, F&& f) {
  switch (format) {
    case WeightFormat::kQ4_0:
      return f.template operator()<WeightFormat::kQ4_0>();
    case WeightFormat::kQ4_1:
      return f.template operator()<WeightFormat::kQ4_1>();
    case WeightFormat::kQ5_0:
      return f.template operator()<WeightFormat::kQ5_0>();
    case WeightFormat::kQ5_1:
      return f.template operator()<WeightFormat::kQ5_1>();
    case WeightFormat::kQ8_0:
      return f.template operator()<WeightFormat::kQ8_0>();
    case WeightFormat::kQ4_K:
      return f.template operator()<WeightFormat::kQ4_K>();
    case WeightFormat::kQ5_K:
      return f.template operator()<WeightFormat::kQ5_K>();
    case WeightFormat::kQ6_K:
      return f.template operator()<WeightFormat::kQ6_K>();
    default:
      require(false,
              "quantized kernel: format " + str(static_cast<int>(format)) + " is not quantized");
  }
}

void run_quant_matmul(const void* activations, std::int64_t tokens,
                      std::span<const QuantMatmulOutput> outputs, bool swiglu, bool accumulate,
                      cudaStream_t stream) {
  require(tokens >= 0, "quant_matmul: negative token count");
  const QuantSegments segments = make_quant_segments(outputs, swiglu, accumulate);
  if (tokens == 0) return;
  require(activations != nullptr, "quant_matmul: null activations");
  dispatch_format(outputs.front().w.format, [&]<WeightFormat kFormat>() {
    if (swiglu) {
      launch_matmul<kFormat, QuantTileForm::kSwiglu>(segments, activations, tokens, {}, stream);
    } else {
      launch_matmul<kFormat, QuantTileForm::kRows>(segments, activations, tokens, {}, stream);
    }
  });
}

}  // namespace

std::size_t quant_activations_bytes(std::int64_t tokens, std::int64_t cols) {
  require(tokens >= 0 && cols > 0 && cols % kQuantGroupCols == 0,
          "quantize_activations: " + str(tokens) + " tokens of " + str(cols) +
              " columns (a positive multiple of 32)");
  return static_cast<std::size_t>(quant_activations_layout(tokens, cols).bytes);
}

void quantize_activations(const float* x, std::int64_t tokens, std::int64_t cols, void* workspace,
                          cudaStream_t stream) {
  (void)quant_activations_bytes(tokens, cols);
  if (tokens == 0) return;
  require(x != nullptr && workspace != nullptr, "quantize_activations: null pointer");
  require(detail::is_aligned(workspace, 256), "quantize_activations: misaligned workspace");
  const std::int64_t warps = tokens * (cols / kQuantGroupCols);
  const std::int64_t wanted = (warps + kWarps - 1) / kWarps;
  const auto blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
  detail::launch_dependent(quantize_activations_kernel, dim3(blocks), dim3(kThreads), stream, x,
                           tokens, cols, static_cast<std::uint8_t*>(workspace));
}

void quant_matmul(const void* activations, std::int64_t tokens, const QuantWeight& w, float* y,
                  cudaStream_t stream) {
  const QuantMatmulOutput one[] = {{w, y}};
  run_quant_matmul(activations, tokens, one, false, false, stream);
}

void quant_matmul(const void* activations, std::int64_t tokens,
                  std::span<const QuantMatmulOutput> outputs, cudaStream_t stream) {
  run_quant_matmul(activations, tokens, outputs, false, false, stream);
}

void quant_matmul_swiglu(const void* activations, std::int64_t tokens, const QuantWeight& gate,
                         const QuantWeight& up, float* out, cudaStream_t stream) {
  const QuantMatmulOutput both[] = {{gate, out}, {up, nullptr}};
  run_quant_matmul(activations, tokens, both, true, false, stream);
}

void quant_matmul_accumulate(const void* activations, std::int64_t tokens, const QuantWeight& w,
                             float* y, cudaStream_t stream) {
  const QuantMatmulOutput one[] = {{w, y}};
  run_quant_matmul(activations, tokens, one, false, true, stream);
}

void quant_matmul_rope_kv(const void* activations, std::int64_t tokens,
                          std::span<const QuantHeadMatmul> outputs, const PositionStep& step,
                          const StepParams* step_params, cudaStream_t stream) {
  // A tile holds kQuantTileRows / 2 pairs: head_dim / 2 a multiple of that keeps them in a head.
  const std::string problem =
      position_step_problem(outputs, step, step_params != nullptr, kQuantTileRows);
  require(problem.empty(), "quant_matmul_rope_kv: " + problem);
  require(tokens >= 0 && step.first_token == 0, "quant_matmul_rope_kv: bad token count or offset");
  const QuantSegments segments = make_head_pair_segments(outputs);
  if (tokens == 0) return;
  require(activations != nullptr, "quant_matmul_rope_kv: null activations");
  dispatch_format(outputs.front().w.format, [&]<WeightFormat kFormat>() {
    launch_matmul<kFormat, QuantTileForm::kHeadPairs>(segments, activations, tokens,
                                                      {step, step_params}, stream);
  });
}

bool quant_fusion_available() {
  return detail::gemv_fusion_enabled();
}

void quant_embedding(const QuantWeight& table, std::int64_t vocab_begin, const std::int32_t* tokens,
                     std::int64_t n_tokens, float* out, cudaStream_t stream) {
  const QuantRowsLayout l = checked_layout(table, "quant_embedding");
  require(n_tokens >= 0 && vocab_begin >= 0, "quant_embedding: bad arguments");
  if (n_tokens == 0) return;
  require(tokens != nullptr && out != nullptr, "quant_embedding: null pointer");
  dispatch_format(table.format, [&]<WeightFormat kFormat>() {
    launch_embedding<kFormat>(l, table, vocab_begin, tokens, n_tokens, out, stream);
  });
}

void quant_dequantize_bf16(const QuantWeight& w, void* out, cudaStream_t stream) {
  const QuantRowsLayout l = checked_layout(w, "quant_dequantize_bf16");
  require(out != nullptr, "quant_dequantize_bf16: null output");
  dispatch_format(w.format, [&]<WeightFormat kFormat>() {
    launch_dequantize<kFormat>(l, w, static_cast<std::uint16_t*>(out), stream);
  });
}

}  // namespace selfspec::kernels::cuda
