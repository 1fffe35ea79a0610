// Small-batch matrix product y[t][n] = Σ_k x[t][k] · w[n][k] for T <= kSmallBatch tokens: the
// decode (T = 1) and verification (T = K + 1, trees of up to 64 nodes) GEMVs. This file holds the
// public entry points (argument checks, the choice of kernel: cuda_kernels.hpp's GemvKernel) and
// the CUDA-core GEMV, which runs every dtype and is the one with a scalar reference; bf16 weights
// go to the tensor-core GEMV (matmul_tensor_core.cu) where the device has it. Memory bound: the
// weights are streamed once per tile of up to kTileTokens tokens.
//
// Design: each warp owns kRows consecutive output rows (2 for T <= 2, else 4; the warp re-uses
// every x value it loads for all of them) and keeps kRows × T f32 accumulators in registers. A
// row is cut into chunks of 16 bytes of weights (8 bf16/f16 or 4 f32 elements); lane l handles
// the chunks c ≡ l (mod 32) in ascending c and, inside a chunk, the elements in ascending k:
//   acc = fmaf(x[t][k], w[n][k], acc)
// The last, partial chunk (cols not a multiple of the chunk width) belongs to the lane it falls
// to and is walked element by element in the same order. Finally every accumulator is reduced
// over the warp by an xor butterfly (offsets 16, 8, 4, 2, 1).
// Token-count invariance: the sequence of operations producing y[t][n] depends only on the
// dtype, cols and the lane schedule — not on T, on kRows, on the token tile, on which other
// matrices share the launch, or on whether the 16-byte vector loads (taken when w, x and cols
// are 16-byte aligned) or the scalar fallback loads were used. So a token's output is
// bit-identical whether it is computed alone or among up to 64 tokens.
// Several matrices, one launch: matmul_small_batch(x, T, outputs) multiplies the same x by up to
// kMaxMatmulOutputs matrices of equal dtype and cols (Wq|Wk|Wv, gate|up) in one grid: the warps
// are numbered over the matrices in turn, so no warp straddles two, and each output is exactly
// what a launch of its matrix alone would give.
// SwiGLU in the epilogue: matmul_swiglu(x, T, gate, up, out) gives each warp gate rows i .. and the
// up rows of the same indices, and stores swiglu_value(gate, up) (the SwiGLU kernel's expression):
// the MLP's gate|up launch and its SwiGLU launch become one, with the same bits.
// Tokens: T > kTileTokens runs as launches over tiles of kTileTokens tokens (x and y offset per
// tile), each the same per-token arithmetic.
// Programmatic dependent launch (cuda_common.cuh): at T <= 2 a warp loads its first kPrefetch
// chunks of weights (which no kernel writes) before it waits for the kernel before it, so the
// first memory round trip overlaps that kernel's tail; x is read and y written only after the
// wait.
// Launch: 128 threads (4 warps) per block, ceil(warps / 4) blocks; warps past the last row exit at
// once (no barriers in this kernel); rows past the end inside a warp's group are computed on a
// clamped valid row and not stored, so every lane stays in the shuffles.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/matmul_segments.cuh"
#include "kernels/cuda/matmul_tensor_core.hpp"
#include "kernels/shared_math.hpp"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace selfspec::kernels::cuda {
namespace {

using detail::kWarpSize;
using detail::require;
using detail::str;

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;
constexpr int kTileTokens = 16;  // the largest T of one launch (templates T = 1 .. 16)
static_assert(kSmallBatch % kTileTokens == 0, "tiles cover kSmallBatch");

template <int kTokens>
constexpr int rows_per_warp() {
  return kTokens <= 2 ? 2 : 4;
}
// Chunks per row a lane loads before waiting for the previous kernel (PDL prologue). T > 2 has
// none: its register budget goes to the accumulators (the first GPU run of the prologue measured
// 4096 x 4096 at T = 8 at 32 us against 20 us before it, with 166 registers against 142; which of
// the prologue and the early launch cost that is measured next).
template <int kTokens>
constexpr int prefetch_chunks() {
  return kTokens <= 2 ? 2 : 0;
}

// What a launch computes around the product (bf16 weights only for the fused ones): kNorm folds
// the RMSNorm of x in (y = r_t · Σ_k w[n][k] · (g[k] · x[t][k]), r_t from the sum of x[t][k]²
// taken in the product's own per-lane order and butterfly), kAccumulate adds the product to y.
template <bool kNormFold, bool kAccumulateInto>
struct Fusion {
  static constexpr bool kNorm = kNormFold;
  static constexpr bool kAccumulate = kAccumulateInto;
};
using Unfused = Fusion<false, false>;
using NormFused = Fusion<true, false>;
using AccumulateFused = Fusion<false, true>;

// Which rows a warp holds (kRows of them): consecutive rows of one matrix (kRows); the SwiGLU
// form's gate rows and the up rows of the same indices (kSwiglu); the RoPE form's head pairs,
// the pairs' first rows then their second rows (kHeadPairs, position_step.hpp).
enum class Pairing { kRows, kSwiglu, kHeadPairs };

// Weight decoding per dtype: kVec elements per 16-byte chunk, from the raw 16 bytes.
struct F32Weights {
  using Storage = float;
  static constexpr int kVec = 4;
  static __device__ __forceinline__ void decode(const uint4 v, float (&out)[kVec]) {
    out[0] = __uint_as_float(v.x);
    out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z);
    out[3] = __uint_as_float(v.w);
  }
  static __device__ __forceinline__ float load(const float* p) { return __ldg(p); }
};

struct BF16Weights {
  using Storage = std::uint16_t;
  static constexpr int kVec = 8;
  static __device__ __forceinline__ void decode(const uint4 v, float (&out)[kVec]) {
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // little endian: element 2i in the low half
      out[2 * i] = __uint_as_float(words[i] << 16);
      out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  }
  static __device__ __forceinline__ float load(const std::uint16_t* p) {
    return bf16_bits_to_float(__ldg(reinterpret_cast<const unsigned short*>(p)));
  }
};

struct F16Weights {
  using Storage = std::uint16_t;
  static constexpr int kVec = 8;
  static __device__ __forceinline__ void decode(const uint4 v, float (&out)[kVec]) {
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] & 0xffffu)));
      out[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] >> 16)));
    }
  }
  static __device__ __forceinline__ float load(const std::uint16_t* p) {
    return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p))));
  }
};

template <class Weights>
__device__ __forceinline__ uint4 load_raw(const typename Weights::Storage* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// x[e] for the kVec elements of a chunk starting at p (16-byte aligned when kVectorLoads).
template <int kVec, bool kVectorLoads>
__device__ __forceinline__ void load_x(const float* p, float (&out)[kVec]) {
  if constexpr (kVectorLoads) {
#pragma unroll
    for (int i = 0; i < kVec / 4; ++i) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(p) + i);
      out[4 * i] = v.x;
      out[4 * i + 1] = v.y;
      out[4 * i + 2] = v.z;
      out[4 * i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = __ldg(p + i);
  }
}

template <class Weights, bool kVectorLoads>
__device__ __forceinline__ void load_w(const typename Weights::Storage* p,
                                       float (&out)[Weights::kVec]) {
  if constexpr (kVectorLoads) {
    Weights::decode(load_raw<Weights>(p), out);
  } else {
#pragma unroll
    for (int i = 0; i < Weights::kVec; ++i) out[i] = Weights::load(p + i);
  }
}

// A token's activations as the product takes them: with the norm folded in, x² goes into the
// token's sum of squares (ascending k) and x becomes g · x (rounded).
template <int kVec, bool kNorm>
__device__ __forceinline__ void fold_norm(const float (&g)[kVec], float (&xv)[kVec],
                                          float& sum_squares) {
  if constexpr (kNorm) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      sum_squares = fmaf(xv[e], xv[e], sum_squares);
      xv[e] = __fmul_rn(g[e], xv[e]);
    }
  }
}

// One chunk (elements k0 .. k0 + kVec) of every row into every accumulator, ascending k; with
// kNorm, g is the norm's weight and each token's squares go into sum_squares.
template <int kVec, int kTokens, int kRows, bool kVectorLoads, bool kNorm = false>
__device__ __forceinline__ void accumulate_chunk(const float* __restrict__ x, std::int64_t cols,
                                                 std::int64_t k0, const float (&w)[kRows][kVec],
                                                 float (&acc)[kRows][kTokens],
                                                 const float* __restrict__ g,
                                                 float (&sum_squares)[kTokens]) {
  float gv[kVec];
  if constexpr (kNorm) load_x<kVec, kVectorLoads>(g + k0, gv);
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    float xv[kVec];
    load_x<kVec, kVectorLoads>(x + t * cols + k0, xv);
    fold_norm<kVec, kNorm>(gv, xv, sum_squares[t]);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[r][t] = fmaf(xv[e], w[r][e], acc[r][t]);
    }
  }
}

// The full chunks c = first, first + 32, ... < n_full of a lane, ascending, with vector or scalar
// loads (same arithmetic).
template <class Weights, int kTokens, int kRows, bool kVectorLoads, bool kNorm>
__device__ __forceinline__ void accumulate_full_chunks(
    const float* __restrict__ x, const typename Weights::Storage* (&w_rows)[kRows],
    std::int64_t cols, std::int64_t first, std::int64_t n_full, float (&acc)[kRows][kTokens],
    const float* __restrict__ g, float (&sum_squares)[kTokens]) {
  constexpr int kVec = Weights::kVec;
  // Unrolling lets the loads of later chunks issue before this chunk's FMAs (more bytes in
  // flight); it does not reorder the FMAs into any accumulator. T <= 2 unrolls 8 (was 4): on an
  // H200, 11008 x 4096 bf16 at T 1 went from 30.2 to 25.3 us (0.62 -> 0.74 of peak bandwidth).
  constexpr int kUnroll = kTokens <= 2 ? 8 : (kTokens <= 8 ? 2 : 1);
#pragma unroll(kUnroll)
  for (std::int64_t c = first; c < n_full; c += kWarpSize) {
    const std::int64_t k0 = c * kVec;
    float w[kRows][kVec];
#pragma unroll
    for (int r = 0; r < kRows; ++r) load_w<Weights, kVectorLoads>(w_rows[r] + k0, w[r]);
    accumulate_chunk<kVec, kTokens, kRows, kVectorLoads, kNorm>(x, cols, k0, w, acc, g,
                                                                sum_squares);
  }
}

// The rows of a warp's unit `unit` of `segment` (clamped to the matrix: rows past it are
// computed on its last row and never stored). kSwiglu: segments.s[0] is W_gate (its y the
// output), segments.s[1] W_up of the same shape; the first kRows / 2 rows are gate rows and the
// last kRows / 2 the up rows of the same indices. kHeadPairs: the unit's kRows / 2 head pairs.
template <class Weights, int kRows, Pairing kPairing>
__device__ __forceinline__ void unit_rows(const detail::MatmulSegments& segments,
                                          const detail::MatmulSegment& segment, std::int64_t unit,
                                          std::int64_t cols, std::int64_t head_dim,
                                          const typename Weights::Storage* (&w_rows)[kRows]) {
  using Storage = typename Weights::Storage;
  constexpr int kHalf = kRows / 2;
  const std::int64_t rows = segment.rows;
  const Storage* w = static_cast<const Storage*>(segment.w);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = r < kHalf ? r : r - kHalf;
    std::int64_t row = 0;
    const Storage* base = w;
    if constexpr (kPairing == Pairing::kSwiglu) {
      row = unit * kHalf + i;
      if (r >= kHalf) base = static_cast<const Storage*>(segments.s[1].w);
    } else if constexpr (kPairing == Pairing::kHeadPairs) {
      row = head_pair_row(unit * kHalf + i, head_dim) + (r < kHalf ? 0 : head_dim / 2);
    } else {
      row = unit * kRows + r;
    }
    w_rows[r] = base + (row < rows ? row : rows - 1) * cols;
  }
}

// The warp's results out, spread over the lanes. kSwiglu: swiglu_value(gate, up)
// (kernels/shared_math.hpp, the SwiGLU kernel's expression) instead of either product: the same
// bits as the two products and the SwiGLU kernel. kHeadPairs: each pair through the position step
// (store_head_pair: the bits of rope_write_kv on the products). Otherwise y, or y + the product.
template <int kTokens, int kRows, Pairing kPairing, bool kAccumulate>
__device__ __forceinline__ void store_unit(const detail::MatmulSegment& segment, std::int64_t unit,
                                           int lane, const float (&acc)[kRows][kTokens],
                                           const PositionStep& step,
                                           const StepParams* step_params) {
  constexpr int kHalf = kRows / 2;
  const std::int64_t rows = segment.rows;
  float* const y = segment.y;
  if constexpr (kPairing == Pairing::kHeadPairs) {
    const std::int64_t n_past = step_params->n_past;
#pragma unroll
    for (int r = 0; r < kHalf; ++r) {
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (lane == (r * kTokens + t) % kWarpSize) {
          store_head_pair(step, segment.output, n_past, t, unit * kHalf + r, acc[r][t],
                          acc[r + kHalf][t]);
        }
      }
    }
  } else if constexpr (kPairing == Pairing::kSwiglu) {
    const std::int64_t row0 = unit * kHalf;
#pragma unroll
    for (int r = 0; r < kHalf; ++r) {
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (lane == (r * kTokens + t) % kWarpSize && row0 + r < rows) {
          y[t * rows + row0 + r] = swiglu_value(acc[r][t], acc[r + kHalf][t]);
        }
      }
    }
  } else {
    const std::int64_t row0 = unit * kRows;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (lane == (r * kTokens + t) % kWarpSize && row0 + r < rows) {
          float* const out = y + t * rows + row0 + r;
          *out = kAccumulate ? __fadd_rn(*out, acc[r][t]) : acc[r][t];
        }
      }
    }
  }
}

template <class Weights, int kTokens, Pairing kPairing, class Fuse>
__global__ void __launch_bounds__(kThreads)
    matmul_small_batch_kernel(const float* __restrict__ x, const detail::MatmulSegments segments,
                              std::int64_t cols, bool vector_loads, const float* __restrict__ g,
                              float eps, const PositionStep step, const StepParams* step_params) {
  constexpr bool kNorm = Fuse::kNorm;
  constexpr int kRows = rows_per_warp<kTokens>();
  constexpr int kVec = Weights::kVec;
  constexpr int kPrefetch = prefetch_chunks<kTokens>();
  using Storage = typename Weights::Storage;
  detail::allow_dependents();
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t warp =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (warp >= segments.total_units) return;  // warp-uniform; no block-level barrier follows

  const detail::MatmulSegment segment =
      detail::segment_of<kPairing == Pairing::kSwiglu>(segments, warp);
  const std::int64_t unit = warp - segment.first_unit;
  const Storage* w_rows[kRows];
  unit_rows<Weights, kRows, kPairing>(segments, segment, unit, cols, step.head_dim, w_rows);
  float acc[kRows][kTokens];
  float sum_squares[kTokens];  // kNorm: the lane's share of each token's Σ x²
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    sum_squares[t] = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r][t] = 0.0f;
  }

  const std::int64_t n_full = cols / kVec;
  if (vector_loads && kPrefetch > 0) {
    // Prologue: the lane's first kPrefetch chunks of weights, loaded before the wait.
    uint4 raw[kPrefetch > 0 ? kPrefetch : 1][kRows];
#pragma unroll
    for (int p = 0; p < kPrefetch; ++p) {
      const std::int64_t c = lane + p * kWarpSize;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        raw[p][r] = c < n_full ? load_raw<Weights>(w_rows[r] + c * kVec) : make_uint4(0, 0, 0, 0);
      }
    }
    detail::wait_for_prerequisites();
#pragma unroll
    for (int p = 0; p < kPrefetch; ++p) {
      const std::int64_t c = lane + p * kWarpSize;
      if (c < n_full) {
        float wv[kRows][kVec];
#pragma unroll
        for (int r = 0; r < kRows; ++r) Weights::decode(raw[p][r], wv[r]);
        accumulate_chunk<kVec, kTokens, kRows, true, kNorm>(x, cols, c * kVec, wv, acc, g,
                                                            sum_squares);
      }
    }
    accumulate_full_chunks<Weights, kTokens, kRows, true, kNorm>(
        x, w_rows, cols, lane + std::int64_t{kPrefetch} * kWarpSize, n_full, acc, g, sum_squares);
  } else if (vector_loads) {
    detail::wait_for_prerequisites();
    accumulate_full_chunks<Weights, kTokens, kRows, true, kNorm>(x, w_rows, cols, lane, n_full, acc,
                                                                 g, sum_squares);
  } else {
    detail::wait_for_prerequisites();
    accumulate_full_chunks<Weights, kTokens, kRows, false, kNorm>(x, w_rows, cols, lane, n_full,
                                                                  acc, g, sum_squares);
  }
  // The partial last chunk: lane n_full % 32, element by element (after its full chunks, which
  // all have smaller indices, so its per-lane order stays ascending).
  const std::int64_t tail_begin = n_full * kVec;
  if (tail_begin < cols && lane == static_cast<int>(n_full % kWarpSize)) {
    for (std::int64_t k = tail_begin; k < cols; ++k) {
      float wv[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) wv[r] = Weights::load(w_rows[r] + k);
      float gk[1] = {kNorm ? __ldg(g + k) : 0.0f};
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        float xk[1] = {__ldg(x + t * cols + k)};
        fold_norm<1, kNorm>(gk, xk, sum_squares[t]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][t] = fmaf(xk[0], wv[r], acc[r][t]);
      }
    }
  }

  // Butterfly reduction (warp_sum: offsets 16 .. 1; all lanes converge here): every lane ends
  // with every sum.
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = detail::warp_sum(acc[r][t]);
  }
  if constexpr (kNorm) {  // each token's 1 / rms, by the same butterfly, scales its sums
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const float scale = detail::inverse_rms(detail::warp_sum(sum_squares[t]), cols, eps);
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r][t] = __fmul_rn(scale, acc[r][t]);
    }
  }
  store_unit<kTokens, kRows, kPairing, Fuse::kAccumulate>(segment, unit, lane, acc, step,
                                                          step_params);
}

// What a launch computes around the product: the norm's weight and epsilon of a NormFused
// launch (null and 0 otherwise), and the RoPE form's position step.
struct LaunchArgs {
  const float* g = nullptr;
  float eps = 0.0f;
  PositionStep step;
  const StepParams* step_params = nullptr;
};

// The units of a launch: kRows rows each, or kRows / 2 pairs (SwiGLU, head pairs).
template <int kRows, Pairing kPairing, class Outputs>
detail::MatmulSegments launch_segments(Outputs outputs, std::int64_t token_offset) {
  if constexpr (kPairing == Pairing::kSwiglu) {
    return detail::make_swiglu_segments(outputs, kRows / 2, token_offset);
  } else if constexpr (kPairing == Pairing::kHeadPairs) {
    return detail::make_head_pair_segments(outputs, kRows);
  } else {
    return detail::make_segments(outputs, kRows, token_offset);
  }
}

// Outputs: std::span<const MatmulOutput>, or the RoPE form's std::span<const HeadMatmul>.
template <class Weights, int kTokens, Pairing kPairing, class Fuse, class Outputs>
void launch(const float* x, Outputs outputs, std::int64_t token_offset, bool vector_loads,
            const LaunchArgs& args, cudaStream_t stream) {
  constexpr int kRows = rows_per_warp<kTokens>();
  const detail::MatmulSegments segments = launch_segments<kRows, kPairing>(outputs, token_offset);
  if (segments.total_units == 0) return;
  const std::int64_t blocks = (segments.total_units + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const std::int64_t cols = outputs.front().w.cols;
  detail::launch_dependent(matmul_small_batch_kernel<Weights, kTokens, kPairing, Fuse>,
                           dim3(static_cast<unsigned>(blocks)), dim3(kThreads), stream,
                           x + token_offset * cols, segments, cols, vector_loads, args.g, args.eps,
                           args.step, args.step_params);
}

template <class Weights, Pairing kPairing, class Fuse, class Outputs>
void dispatch_tokens(const float* x, std::int64_t n_tokens, Outputs outputs,
                     std::int64_t token_offset, bool vector_loads, const LaunchArgs& args,
                     cudaStream_t stream) {
  switch (n_tokens) {
    case 1:
      return launch<Weights, 1, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                stream);
    case 2:
      return launch<Weights, 2, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                stream);
    case 3:
      return launch<Weights, 3, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                stream);
    case 4:
      return launch<Weights, 4, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                stream);
    case 5:
      return launch<Weights, 5, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                stream);
    case 6:
      return launch<Weights, 6, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                stream);
    case 7:
      return launch<Weights, 7, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                stream);
    case 8:
      return launch<Weights, 8, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                stream);
    case 9:
      return launch<Weights, 9, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                stream);
    case 10:
      return launch<Weights, 10, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                 stream);
    case 11:
      return launch<Weights, 11, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                 stream);
    case 12:
      return launch<Weights, 12, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                 stream);
    case 13:
      return launch<Weights, 13, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                 stream);
    case 14:
      return launch<Weights, 14, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                 stream);
    case 15:
      return launch<Weights, 15, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                 stream);
    case 16:
      return launch<Weights, 16, kPairing, Fuse>(x, outputs, token_offset, vector_loads, args,
                                                 stream);
    default:
      break;
  }
  require(false, "matmul_small_batch: tile of " + str(n_tokens) + " tokens outside [1, 16]");
}

// Tiles of up to kTileTokens tokens, each a launch (the RoPE form's step told its first token).
template <class Weights, Pairing kPairing, class Fuse = Unfused, class Outputs>
void dispatch_tiles(const float* x, std::int64_t n_tokens, Outputs outputs, bool vector_loads,
                    cudaStream_t stream, const LaunchArgs& args = {}) {
  for (std::int64_t begin = 0; begin < n_tokens; begin += kTileTokens) {
    const std::int64_t tile = n_tokens - begin < kTileTokens ? n_tokens - begin : kTileTokens;
    LaunchArgs tile_args = args;
    tile_args.step.first_token = begin;
    dispatch_tokens<Weights, kPairing, Fuse>(x, tile, outputs, begin, vector_loads, tile_args,
                                             stream);
  }
}

template <Pairing kPairing>
void dispatch_dtype(const float* x, std::int64_t n_tokens, std::span<const MatmulOutput> outputs,
                    bool vector_loads, cudaStream_t stream) {
  switch (outputs.front().w.dtype) {
    case DType::kF32:
      return dispatch_tiles<F32Weights, kPairing>(x, n_tokens, outputs, vector_loads, stream);
    case DType::kBF16:
      return dispatch_tiles<BF16Weights, kPairing>(x, n_tokens, outputs, vector_loads, stream);
    case DType::kF16:
      return dispatch_tiles<F16Weights, kPairing>(x, n_tokens, outputs, vector_loads, stream);
  }
  require(false, "matmul_small_batch: unsupported weight dtype " +
                     str(static_cast<int>(outputs.front().w.dtype)));
}

// Checks the outputs (1 .. kMaxMatmulOutputs matrices of one dtype and one cols) and returns
// whether the 16-byte vector loads apply to all of them.
bool check_outputs(const float* x, std::span<const MatmulOutput> outputs) {
  require(!outputs.empty() && static_cast<int>(outputs.size()) <= kMaxMatmulOutputs,
          "matmul_small_batch: " + str(static_cast<std::int64_t>(outputs.size())) +
              " matrices in one launch (1 to " + str(kMaxMatmulOutputs) + ")");
  const DeviceWeight& first = outputs.front().w;
  const std::int64_t vec = first.dtype == DType::kF32 ? 4 : 8;
  bool vector_loads = first.cols % vec == 0 && detail::is_aligned(x, 16);
  std::int64_t total_rows = 0;
  for (const MatmulOutput& out : outputs) {
    const DeviceWeight& w = out.w;
    require(w.rows >= 0 && w.cols > 0,
            "matmul_small_batch: bad weight shape (" + str(w.rows) + " x " + str(w.cols) + ")");
    require(w.dtype == first.dtype && w.cols == first.cols,
            "matmul_small_batch: the matrices of one launch need one dtype and one column count "
            "(" +
                str(first.cols) + " vs " + str(w.cols) + ")");
    require(w.rows == 0 || (w.data != nullptr && out.y != nullptr),
            "matmul_small_batch: null pointer");
    vector_loads = vector_loads && detail::is_aligned(w.data, 16);
    total_rows += w.rows;
  }
  require(total_rows / 2 + kMaxMatmulOutputs <= std::int64_t{0x7fffffff} * kWarpsPerBlock,
          "matmul_small_batch: too many rows (" + str(total_rows) + ")");
  return vector_loads;
}

// The kernel a call runs: kAuto resolved (auto_gemv_kernel), an explicit tensor-core request
// checked against the dtype.
GemvKernel resolve(GemvKernel kernel, DType dtype) {
  if (kernel == GemvKernel::kAuto) return auto_gemv_kernel(dtype);
  if (kernel == GemvKernel::kTensorCores) {
    require(dtype == DType::kBF16,
            "matmul_small_batch: the tensor-core GEMV takes bf16 weights, not " +
                std::string(dtype_name(dtype)));
    require(detail::tensor_core_gemv_supported(),
            "matmul_small_batch: the tensor-core GEMV needs compute capability 8.0 or above");
  }
  return kernel;
}

}  // namespace

GemvKernel auto_gemv_kernel(DType dtype) {
  return dtype == DType::kBF16 && detail::tensor_core_gemv_enabled() ? GemvKernel::kTensorCores
                                                                     : GemvKernel::kCudaCores;
}

void matmul_small_batch(const float* x, std::int64_t n_tokens,
                        std::span<const MatmulOutput> outputs, cudaStream_t stream,
                        GemvKernel kernel) {
  require(n_tokens >= 0 && n_tokens <= kSmallBatch, "matmul_small_batch: token count " +
                                                        str(n_tokens) + " outside [0, " +
                                                        str(kSmallBatch) + "]");
  const bool vector_loads = check_outputs(x, outputs);
  if (n_tokens == 0) return;
  require(x != nullptr, "matmul_small_batch: null activations");
  if (resolve(kernel, outputs.front().w.dtype) == GemvKernel::kTensorCores) {
    return detail::matmul_tensor_cores(x, n_tokens, outputs, false, vector_loads, {}, stream);
  }
  dispatch_dtype<Pairing::kRows>(x, n_tokens, outputs, vector_loads, stream);
}

void matmul_swiglu(const float* x, std::int64_t n_tokens, const DeviceWeight& gate,
                   const DeviceWeight& up, float* out, cudaStream_t stream, GemvKernel kernel) {
  require(n_tokens >= 0 && n_tokens <= kSmallBatch,
          "matmul_swiglu: token count " + str(n_tokens) + " outside [0, " + str(kSmallBatch) + "]");
  require(gate.rows == up.rows,
          "matmul_swiglu: gate has " + str(gate.rows) + " rows, up " + str(up.rows));
  const MatmulOutput outputs[] = {{gate, out}, {up, out}};
  const bool vector_loads = check_outputs(x, outputs);
  if (n_tokens == 0 || gate.rows == 0) return;
  require(x != nullptr, "matmul_swiglu: null activations");
  if (resolve(kernel, gate.dtype) == GemvKernel::kTensorCores) {
    return detail::matmul_tensor_cores(x, n_tokens, outputs, true, vector_loads, {}, stream);
  }
  dispatch_dtype<Pairing::kSwiglu>(x, n_tokens, outputs, vector_loads, stream);
}

bool tensor_core_gemv_supported() {
  return detail::tensor_core_gemv_supported();
}

bool fused_gemv_available(DType dtype) {
  return dtype == DType::kBF16 && detail::gemv_fusion_enabled();
}

namespace {

// The checks of a fused launch: the token count, the outputs (check_outputs), bf16 weights.
// Returns whether vector loads apply (and the norm's weight, when given, is 16-byte aligned).
bool check_fused(const char* what, const float* x, std::int64_t n_tokens,
                 std::span<const MatmulOutput> outputs, const float* norm_weight) {
  require(n_tokens >= 0 && n_tokens <= kSmallBatch, std::string(what) + ": token count " +
                                                        str(n_tokens) + " outside [0, " +
                                                        str(kSmallBatch) + "]");
  const bool vector_loads = check_outputs(x, outputs);
  require(outputs.front().w.dtype == DType::kBF16,
          std::string(what) + ": the fused forms take bf16 weights, got " +
              std::string(dtype_name(outputs.front().w.dtype)));
  require(n_tokens == 0 || x != nullptr, std::string(what) + ": null activations");
  return vector_loads && (norm_weight == nullptr || detail::is_aligned(norm_weight, 16));
}

// A checked fused launch on the kernel `kernel` resolves to (bf16 weights).
template <bool kSwiglu, class Fuse>
void run_fused(const float* x, std::int64_t n_tokens, std::span<const MatmulOutput> outputs,
               bool vector_loads, const LaunchArgs& norm, cudaStream_t stream, GemvKernel kernel) {
  if (resolve(kernel, DType::kBF16) == GemvKernel::kTensorCores) {
    return detail::matmul_tensor_cores(x, n_tokens, outputs, kSwiglu, vector_loads,
                                       {norm.g, norm.eps, Fuse::kAccumulate}, stream);
  }
  constexpr Pairing kPairing = kSwiglu ? Pairing::kSwiglu : Pairing::kRows;
  dispatch_tiles<BF16Weights, kPairing, Fuse>(x, n_tokens, outputs, vector_loads, stream, norm);
}

}  // namespace

void matmul_normed(const float* x, const float* norm_weight, float eps, std::int64_t n_tokens,
                   std::span<const MatmulOutput> outputs, cudaStream_t stream, GemvKernel kernel) {
  require(norm_weight != nullptr, "matmul_normed: null norm weight");
  const bool vector_loads = check_fused("matmul_normed", x, n_tokens, outputs, norm_weight);
  if (n_tokens == 0) return;
  run_fused<false, NormFused>(x, n_tokens, outputs, vector_loads, {norm_weight, eps, {}, nullptr},
                              stream, kernel);
}

void matmul_normed_swiglu(const float* x, const float* norm_weight, float eps,
                          std::int64_t n_tokens, const DeviceWeight& gate, const DeviceWeight& up,
                          float* out, cudaStream_t stream, GemvKernel kernel) {
  require(gate.rows == up.rows,
          "matmul_normed_swiglu: gate has " + str(gate.rows) + " rows, up " + str(up.rows));
  require(norm_weight != nullptr, "matmul_normed_swiglu: null norm weight");
  const MatmulOutput outputs[] = {{gate, out}, {up, out}};
  const bool vector_loads = check_fused("matmul_normed_swiglu", x, n_tokens, outputs, norm_weight);
  if (n_tokens == 0 || gate.rows == 0) return;
  run_fused<true, NormFused>(x, n_tokens, outputs, vector_loads, {norm_weight, eps, {}, nullptr},
                             stream, kernel);
}

void matmul_accumulate(const float* x, std::int64_t n_tokens, const DeviceWeight& w, float* y,
                       cudaStream_t stream, GemvKernel kernel) {
  const MatmulOutput output{w, y};
  const std::span<const MatmulOutput> outputs(&output, 1);
  const bool vector_loads = check_fused("matmul_accumulate", x, n_tokens, outputs, nullptr);
  if (n_tokens == 0) return;
  run_fused<false, AccumulateFused>(x, n_tokens, outputs, vector_loads, {}, stream, kernel);
}

void matmul_rope_kv(const float* x, const float* norm_weight, float eps, std::int64_t n_tokens,
                    std::span<const HeadMatmul> outputs, const PositionStep& step,
                    const StepParams* step_params, cudaStream_t stream) {
  // A warp holds up to 2 pairs (4 rows at T > 2): head_dim / 2 even keeps them in one head.
  const std::string problem = position_step_problem(outputs, step, step_params != nullptr, 4);
  require(problem.empty(), "matmul_rope_kv: " + problem);
  std::array<MatmulOutput, kMaxMatmulOutputs> plain{};  // for check_fused: y is any non-null
  for (std::size_t i = 0; i < outputs.size(); ++i) plain[i] = {outputs[i].w, step.q};
  const bool vector_loads = check_fused("matmul_rope_kv", x, n_tokens,
                                        std::span(plain.data(), outputs.size()), norm_weight);
  if (n_tokens == 0) return;
  LaunchArgs args;
  args.g = norm_weight;
  args.eps = eps;
  args.step = step;
  args.step_params = step_params;
  if (norm_weight != nullptr) {
    return dispatch_tiles<BF16Weights, Pairing::kHeadPairs, NormFused>(x, n_tokens, outputs,
                                                                       vector_loads, stream, args);
  }
  dispatch_tiles<BF16Weights, Pairing::kHeadPairs, Unfused>(x, n_tokens, outputs, vector_loads,
                                                            stream, args);
}

void matmul_small_batch(const float* x, std::int64_t n_tokens, const DeviceWeight& w, float* y,
                        cudaStream_t stream, GemvKernel kernel) {
  const MatmulOutput output{w, y};
  matmul_small_batch(x, n_tokens, std::span<const MatmulOutput>(&output, 1), stream, kernel);
}

}  // namespace selfspec::kernels::cuda
