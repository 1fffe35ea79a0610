// The tensor-core GEMV for bf16 weights (matmul_tensor_core.cu), behind matmul_small_batch and
// matmul_swiglu (matmul_small_batch.cu checks the arguments and picks the kernel).
#pragma once

#include "kernels/cuda/cuda_kernels.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

namespace selfspec::kernels::cuda::detail {

// What the tensor-core GEMV computes around the product. norm_weight non-null: RMSNorm folded in,
// y = r_t · Σ_k w[n][k] · (g[k] · x[t][k]) with r_t = 1 / sqrt(Σ_k x[t][k]² / cols + eps), the
// squares summed in the kernel's fixed order (the normalised x is never stored). accumulate: the
// residual add in the epilogue, y += x · Wᵀ (one matrix, no norm, no SwiGLU).
struct TensorGemvFusion {
  const float* norm_weight = nullptr;
  float eps = 0.0f;
  bool accumulate = false;
};

// How a warp gets its chunks of weights; every pipeline gives the same bits (the chunks are
// consumed in the same order by the same arithmetic). kRing: kLoadsInFlight loads in a register
// ring refilled chunk by chunk. kPingPong: two register buffers of kLoadsInFlight loads, one
// loading while the other is consumed. kBulk (compute capability 9.0, 16-byte aligned rows; else
// the ring): the copy engine (cp.async.bulk) fills stages in shared memory, whole row stretches of
// 512 bytes, six stages in flight per block, no registers held by loads in flight. On an H200
// (2026-11-29) the ring and the ping-pong ran 4096 x 4096 alike (17.8 / 17.7 us at T = 1) and the
// ping-pong the SwiGLU pair 2 x 11008 x 4096 in 74.1 against 92.6 us; an L1 prefetch of the
// activations made both slower (25.8 us at 4096 x 4096 with the ping-pong) and was dropped. The
// bulk pipeline has not run on a GPU yet.
enum class TensorPipeline { kRing, kPingPong, kBulk };
inline constexpr TensorPipeline kDefaultTensorPipeline = TensorPipeline::kRing;

// y = x · Wᵀ for every output (bf16 weights of one cols, 1 <= n_tokens <= kSmallBatch), or, with
// `swiglu`, outputs[0].y = swiglu(x · gateᵀ, x · upᵀ) for outputs = {gate, up}, with `fusion`.
// vector_loads: cols a multiple of 8 and x, every matrix and the norm's weight (when given)
// 16-byte aligned (the same values are loaded either way, so the bits do not depend on it).
void matmul_tensor_cores(const float* x, std::int64_t n_tokens,
                         std::span<const MatmulOutput> outputs, bool swiglu, bool vector_loads,
                         const TensorGemvFusion& fusion, cudaStream_t stream,
                         TensorPipeline pipeline = kDefaultTensorPipeline);

// Whether the current device can run the tensor-core GEMV: compute capability 8.0 or above (bf16
// mma.sync).
bool tensor_core_gemv_supported();
// Whether kAuto picks it for bf16 weights: supported, and SELFSPEC_CUDA_GEMV=tensor-cores (read
// once per process: auto, tensor-cores or cuda-cores, unset meaning auto; any other value throws).
// Auto is the CUDA-core GEMV: on an H200 it decodes a 7B model 1.71x faster (231 vs 135 tok/s,
// docs/results/2026-11-29-gpu-tensor-core-gemv.md), the tensor cores' cost being flat in T only.
bool tensor_core_gemv_enabled();
// Whether the current device has the bulk copy engine the kBulk pipeline uses (compute
// capability 9.0 or above).
bool bulk_copy_supported();

}  // namespace selfspec::kernels::cuda::detail
