// Small-batch matrix product y[t][n] = Σ_k x[t][k] · w[n][k] for T <= kSmallBatch tokens: the
// decode (T = 1) and verification (T = K + 1) GEMVs. Memory bound: the weights are streamed once
// per call for all T tokens.
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
// dtype, cols and the lane schedule — not on T, on kRows, or on whether the 16-byte vector loads
// (taken when w, x and cols are 16-byte aligned) or the scalar fallback loads were used. So a
// token's output is bit-identical whether it is computed alone or among T tokens.
// Launch: 128 threads (4 warps) per block, ceil(rows / (4 · kRows)) blocks; warps past the last
// row exit at once (no barriers in this kernel); rows past the end inside a warp's group are
// computed on a clamped valid row and not stored, so every lane stays in the shuffles.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/shared_math.hpp"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace selfspec::kernels::cuda {
namespace {

using detail::kFullMask;
using detail::kWarpSize;
using detail::require;
using detail::str;

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;

template <int kTokens>
constexpr int rows_per_warp() {
  return kTokens <= 2 ? 2 : 4;
}

// Weight decoding per dtype: kVec elements per 16-byte chunk.
struct F32Weights {
  using Storage = float;
  static constexpr int kVec = 4;
  static __device__ __forceinline__ void load_vec(const float* p, float (&out)[kVec]) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p));
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  }
  static __device__ __forceinline__ float load(const float* p) { return __ldg(p); }
};

struct BF16Weights {
  using Storage = std::uint16_t;
  static constexpr int kVec = 8;
  static __device__ __forceinline__ void load_vec(const std::uint16_t* p, float (&out)[kVec]) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
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
  static __device__ __forceinline__ void load_vec(const std::uint16_t* p, float (&out)[kVec]) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
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
    Weights::load_vec(p, out);
  } else {
#pragma unroll
    for (int i = 0; i < Weights::kVec; ++i) out[i] = Weights::load(p + i);
  }
}

// The full chunks of a lane, ascending, with vector or scalar loads (same arithmetic).
template <class Weights, int kTokens, int kRows, bool kVectorLoads>
__device__ __forceinline__ void accumulate_full_chunks(
    const float* __restrict__ x, const typename Weights::Storage* (&w_rows)[kRows],
    std::int64_t cols, std::int64_t n_full, int lane, float (&acc)[kRows][kTokens]) {
  constexpr int kVec = Weights::kVec;
  // Unrolling lets the loads of later chunks issue before this chunk's FMAs (more bytes in
  // flight); it does not reorder the FMAs into any accumulator. T <= 2 unrolls 8 (was 4): on an
  // H200, 11008 x 4096 bf16 at T 1 went from 30.2 to 25.3 us (0.62 -> 0.74 of peak bandwidth).
  constexpr int kUnroll = kTokens <= 2 ? 8 : (kTokens <= 8 ? 2 : 1);
#pragma unroll(kUnroll)
  for (std::int64_t c = lane; c < n_full; c += kWarpSize) {
    const std::int64_t k0 = c * kVec;
    float w[kRows][kVec];
#pragma unroll
    for (int r = 0; r < kRows; ++r) load_w<Weights, kVectorLoads>(w_rows[r] + k0, w[r]);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      float xv[kVec];
      load_x<kVec, kVectorLoads>(x + t * cols + k0, xv);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[r][t] = fmaf(xv[e], w[r][e], acc[r][t]);
      }
    }
  }
}

template <class Weights, int kTokens>
__global__ void __launch_bounds__(kThreads)
    matmul_small_batch_kernel(const float* __restrict__ x,
                              const typename Weights::Storage* __restrict__ w, std::int64_t rows,
                              std::int64_t cols, bool vector_loads, float* __restrict__ y) {
  constexpr int kRows = rows_per_warp<kTokens>();
  constexpr int kVec = Weights::kVec;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t warp =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const std::int64_t row0 = warp * kRows;
  if (row0 >= rows) return;  // warp-uniform; no block-level barrier follows

  const typename Weights::Storage* w_rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const std::int64_t row = row0 + r < rows ? row0 + r : rows - 1;  // clamped, never stored
    w_rows[r] = w + row * cols;
  }
  float acc[kRows][kTokens];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;
  }

  const std::int64_t n_full = cols / kVec;
  if (vector_loads) {
    accumulate_full_chunks<Weights, kTokens, kRows, true>(x, w_rows, cols, n_full, lane, acc);
  } else {
    accumulate_full_chunks<Weights, kTokens, kRows, false>(x, w_rows, cols, n_full, lane, acc);
  }
  // The partial last chunk: lane n_full % 32, element by element (after its full chunks, which
  // all have smaller indices, so its per-lane order stays ascending).
  const std::int64_t tail_begin = n_full * kVec;
  if (tail_begin < cols && lane == static_cast<int>(n_full % kWarpSize)) {
    for (std::int64_t k = tail_begin; k < cols; ++k) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float wv = Weights::load(w_rows[r] + k);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) acc[r][t] = fmaf(__ldg(x + t * cols + k), wv, acc[r][t]);
      }
    }
  }

  // Butterfly reduction (all lanes converge here): every lane ends with every sum.
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      float v = acc[r][t];
#pragma unroll
      for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        v += __shfl_xor_sync(kFullMask, v, offset);
      }
      acc[r][t] = v;
    }
  }
  // Spread the stores over the lanes.
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if (lane == (r * kTokens + t) % kWarpSize && row0 + r < rows) {
        y[t * rows + row0 + r] = acc[r][t];
      }
    }
  }
}

template <class Weights, int kTokens>
void launch(const float* x, const DeviceWeight& w, bool vector_loads, float* y,
            cudaStream_t stream) {
  constexpr std::int64_t kRowsPerBlock = std::int64_t{kWarpsPerBlock} * rows_per_warp<kTokens>();
  const std::int64_t blocks = (w.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  matmul_small_batch_kernel<Weights, kTokens>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          x, static_cast<const typename Weights::Storage*>(w.data), w.rows, w.cols, vector_loads,
          y);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

template <class Weights>
void dispatch_tokens(const float* x, std::int64_t n_tokens, const DeviceWeight& w,
                     bool vector_loads, float* y, cudaStream_t stream) {
  switch (n_tokens) {
    case 1:
      return launch<Weights, 1>(x, w, vector_loads, y, stream);
    case 2:
      return launch<Weights, 2>(x, w, vector_loads, y, stream);
    case 3:
      return launch<Weights, 3>(x, w, vector_loads, y, stream);
    case 4:
      return launch<Weights, 4>(x, w, vector_loads, y, stream);
    case 5:
      return launch<Weights, 5>(x, w, vector_loads, y, stream);
    case 6:
      return launch<Weights, 6>(x, w, vector_loads, y, stream);
    case 7:
      return launch<Weights, 7>(x, w, vector_loads, y, stream);
    case 8:
      return launch<Weights, 8>(x, w, vector_loads, y, stream);
    case 9:
      return launch<Weights, 9>(x, w, vector_loads, y, stream);
    case 10:
      return launch<Weights, 10>(x, w, vector_loads, y, stream);
    case 11:
      return launch<Weights, 11>(x, w, vector_loads, y, stream);
    case 12:
      return launch<Weights, 12>(x, w, vector_loads, y, stream);
    case 13:
      return launch<Weights, 13>(x, w, vector_loads, y, stream);
    case 14:
      return launch<Weights, 14>(x, w, vector_loads, y, stream);
    case 15:
      return launch<Weights, 15>(x, w, vector_loads, y, stream);
    case 16:
      return launch<Weights, 16>(x, w, vector_loads, y, stream);
    default:
      break;
  }
  require(false, "matmul_small_batch: token count " + str(n_tokens) + " outside [1, 16]");
}

}  // namespace

void matmul_small_batch(const float* x, std::int64_t n_tokens, const DeviceWeight& w, float* y,
                        cudaStream_t stream) {
  static_assert(kSmallBatch == 16, "dispatch_tokens instantiates T = 1 .. 16");
  require(n_tokens >= 0 && n_tokens <= kSmallBatch, "matmul_small_batch: token count " +
                                                        str(n_tokens) + " outside [0, " +
                                                        str(kSmallBatch) + "]");
  require(w.rows >= 0 && w.cols > 0,
          "matmul_small_batch: bad weight shape (" + str(w.rows) + " x " + str(w.cols) + ")");
  if (n_tokens == 0 || w.rows == 0) return;
  require(w.data != nullptr && x != nullptr && y != nullptr, "matmul_small_batch: null pointer");
  const std::int64_t vec = w.dtype == DType::kF32 ? 4 : 8;
  const std::int64_t max_rows_per_block = std::int64_t{kWarpsPerBlock} * 2;
  require((w.rows + max_rows_per_block - 1) / max_rows_per_block <= 0x7fffffff,
          "matmul_small_batch: too many rows (" + str(w.rows) + ")");
  // Vector loads need every weight row and every x row to start on a 16-byte boundary.
  const bool vector_loads =
      w.cols % vec == 0 && detail::is_aligned(w.data, 16) && detail::is_aligned(x, 16);
  switch (w.dtype) {
    case DType::kF32:
      return dispatch_tokens<F32Weights>(x, n_tokens, w, vector_loads, y, stream);
    case DType::kBF16:
      return dispatch_tokens<BF16Weights>(x, n_tokens, w, vector_loads, y, stream);
    case DType::kF16:
      return dispatch_tokens<F16Weights>(x, n_tokens, w, vector_loads, y, stream);
  }
  require(false, "matmul_small_batch: unsupported weight dtype " + str(static_cast<int>(w.dtype)));
}

}  // namespace selfspec::kernels::cuda
