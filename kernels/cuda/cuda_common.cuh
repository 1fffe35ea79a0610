// Internal helpers of the CUDA kernel files (nvcc only; fmt-free): grid sizing for grid-stride
// loops, argument checks that throw selfspec::Error (through cuda_error.cpp), and warp reductions
// whose order is fixed (xor butterflies, so every lane ends with the same bits).
#pragma once

#include "core/check.hpp"
#include "core/cuda_check.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace selfspec::kernels::cuda::detail {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xffffffffu;

// Throws selfspec::Error with `message` unless `condition` holds (host side, before launches;
// core/check.hpp's throw_error, since fmt-based core/error.hpp does not compile under nvcc).
inline void require(bool condition, const std::string& message) {
  if (!condition) ::selfspec::detail::throw_error(message);
}

inline std::string str(std::int64_t value) {
  return std::to_string(value);
}

// Blocks for a grid-stride loop over n elements with `threads` threads per block: enough to fill
// the GPU, capped well below the 2^31 - 1 limit of gridDim.x.
inline unsigned grid_stride_blocks(std::int64_t n, int threads) {
  constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 16;
  const std::int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

inline bool is_aligned(const void* pointer, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
}

// Sum over the warp by an xor butterfly (offsets 16, 8, 4, 2, 1): a fixed order, and since
// a + b == b + a bit for bit, every lane ends with the identical result.
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(kFullMask, value, offset);
  }
  return value;
}

__device__ __forceinline__ double warp_sum(double value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(kFullMask, value, offset);
  }
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  }
  return value;
}

// Sum of one double per thread over the block, in a fixed order (butterfly within each warp, then
// the warp sums in ascending warp order by every thread). Every thread of the block must call it
// (it contains __syncthreads); `scratch` holds one double per warp and may be reused after the
// call returns (a trailing barrier protects it). blockDim.x must be a multiple of 32.
__device__ __forceinline__ double block_sum(double value, double* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  value = warp_sum(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < n_warps; ++w) total += scratch[w];
  __syncthreads();
  return total;
}

}  // namespace selfspec::kernels::cuda::detail
