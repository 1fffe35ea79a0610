// Internal helpers of the CUDA kernel files (nvcc only; fmt-free): grid sizing for grid-stride
// loops, argument checks that throw selfspec::Error (through cuda_error.cpp), and warp reductions
// whose order is fixed (xor butterflies, so every lane ends with the same bits).
#pragma once

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "core/dtype.hpp"
#include "kernels/shared_math.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

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

// Throws naming `what` unless the kernels take a KV cache of this dtype (f32 or bf16; host side).
inline void require_kv_dtype(const char* what, DType dtype) {
  require(dtype == DType::kF32 || dtype == DType::kBF16,
          std::string(what) + ": a KV cache of " + std::string(dtype_name(dtype)) +
              " (f32 and bf16 caches are supported)");
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

// 1 / rms of a row from its sum of squares: 1 / sqrt(Σx² / cols + eps), in double as the RMSNorm
// kernel's (the GEMVs' folded norms).
__device__ __forceinline__ float inverse_rms(float sum_squares, std::int64_t cols, float eps) {
  const double mean = static_cast<double>(sum_squares) / static_cast<double>(cols);
  return static_cast<float>(1.0 / sqrt(mean + static_cast<double>(eps)));
}

// --- programmatic dependent launch (PDL, sm_90+) -----------------------------------------------
// A kernel launched by launch_dependent() may start while the kernel before it on the stream is
// still running. It must call wait_for_prerequisites() before it reads anything an earlier kernel
// wrote and before its first global store (so it can neither read stale data nor overwrite data
// still being read); before that it may only read memory no kernel writes (weights). Every kernel
// of the forward pass calls allow_dependents() early, which lets the next kernel be scheduled onto
// free SMs and run its prologue (launch latency, first weight loads) under this one's tail. Both
// compile to nothing below sm_90, and launch_dependent() adds the launch attribute only where the
// device supports it and SELFSPEC_CUDA_PDL is not 0 (pdl_enabled(), device.cu).
__device__ __forceinline__ void wait_for_prerequisites() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether models take the GEMVs' fused forms (norm folded in, residual add in the epilogue):
// SELFSPEC_CUDA_FUSE unset or 1; 0 turns them off; any other value throws (read once per
// process, device.cu).
bool gemv_fusion_enabled();

// Whether launches on the current device get the programmatic-serialization attribute: compute
// capability 9.0 or above, and SELFSPEC_CUDA_PDL unset or not "0" (read once per process).
bool pdl_enabled();

// Launches `kernel` on `stream` as a programmatic dependent of the previous kernel on the stream
// (when pdl_enabled() and the stream is one the program created: the legacy and per-thread
// default streams get plain launches), else as a plain launch; checks the launch. The kernel must
// follow the contract above.
// launch_dependent_smem gives the kernel `dynamic_smem_bytes` of dynamic shared memory.
template <class... KernelArgs, class... Args>
void launch_dependent_smem(void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                           std::size_t dynamic_smem_bytes, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = dynamic_smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1]{};
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  const bool created_stream =
      stream != nullptr && stream != cudaStreamLegacy && stream != cudaStreamPerThread;
  config.numAttrs = created_stream && pdl_enabled() ? 1 : 0;
  SELFSPEC_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

template <class... KernelArgs, class... Args>
void launch_dependent(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, cudaStream_t stream,
                      Args&&... args) {
  launch_dependent_smem(kernel, grid, block, 0, stream, std::forward<Args>(args)...);
}

// A kernel's dynamic shared memory above the default 48 KiB, allowed once per device.
template <class... Args>
void allow_dynamic_smem(void (*kernel)(Args...), std::size_t bytes) {
  constexpr int kDevices = 64;
  static std::atomic<bool> allowed[kDevices];  // per instantiation; static: zero-initialised
  int device = 0;
  SELFSPEC_CUDA_CHECK(cudaGetDevice(&device));
  require(device >= 0 && device < kDevices, "allow_dynamic_smem: device " + str(device));
  if (allowed[device].load(std::memory_order_acquire)) return;
  SELFSPEC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bytes)));
  allowed[device].store(true, std::memory_order_release);
}

}  // namespace selfspec::kernels::cuda::detail
