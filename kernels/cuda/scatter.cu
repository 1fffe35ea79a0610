// scatter_columns on the GPU (kernels/cuda/cuda_kernels.hpp): a grid-stride fill of the output,
// then a grid-stride scatter of the compact values, on the same stream (so in that order). A copy,
// no arithmetic: the result is exactly kernels/cpu/scatter.hpp's.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace selfspec::kernels::cuda {
namespace {

using detail::grid_stride_blocks;
using detail::require;
using detail::str;

constexpr int kThreads = 256;

__device__ __forceinline__ std::int64_t thread_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t thread_count() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

__global__ void fill_kernel(float* out, std::int64_t n, float value) {
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) out[i] = value;
}

__global__ void scatter_kernel(const float* values, std::int64_t rows, const std::int32_t* ids,
                               std::int64_t n_ids, std::int64_t width, float* out) {
  const std::int64_t n = rows * n_ids;
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) {
    const std::int64_t r = i / n_ids;
    const std::int64_t j = i - r * n_ids;
    out[r * width + ids[j]] = values[i];
  }
}

}  // namespace

void scatter_columns(const float* values, std::int64_t rows, const std::int32_t* ids,
                     std::int64_t n_ids, std::int64_t width, float fill, float* out,
                     cudaStream_t stream) {
  require(rows >= 0 && n_ids >= 0 && width > 0 && n_ids <= width,
          "scatter_columns: bad shape (rows " + str(rows) + ", ids " + str(n_ids) + ", width " +
              str(width) + ")");
  if (rows == 0) return;
  const std::int64_t n = rows * width;
  fill_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(out, n, fill);
  SELFSPEC_CUDA_CHECK_LAUNCH();
  if (n_ids == 0) return;
  const std::int64_t m = rows * n_ids;
  scatter_kernel<<<grid_stride_blocks(m, kThreads), kThreads, 0, stream>>>(values, rows, ids, n_ids,
                                                                           width, out);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

}  // namespace selfspec::kernels::cuda
