// Elementwise and row-wise CUDA kernels of the LLaMA block: embedding lookup, RMSNorm (plain and
// fused with the residual add), residual add, bias, SwiGLU, RoPE, KV-cache writes, row gathers and
// activation conversion for the cuBLASLt path.
//
// Design: purely elementwise work runs as grid-stride loops (256 threads per block, at most 2^16
// blocks) over 64-bit indices, so any size is covered and every launch shape is legal. Row-wise
// work uses one block per row:
//  - RMSNorm: thread i owns the elements i, i + 256, ... of the row; it loads them (and the norm's
//    weights) all into registers first (dims up to 8192; the loads are independent, so they are
//    in flight together, and stores to x or y come after every load, so y may alias x), sums
//    their squares in double in ascending order, the block sums the per-thread values in a fixed
//    order (warp butterfly, then warps in ascending order), and r = f32(1 / sqrt(mean + eps)) is
//    computed in double as on the CPU; y = weight * (x * r) in f32, the CPU's expression. Results
//    match the CPU up to the rounding of the double sum. rmsnorm_quantize quantizes the
//    normalised values for the quantized GEMV instead of storing them (each warp holds whole
//    groups of 32: quant_activations.cuh), the bits of rmsnorm then quantize_activations.
//    (The first GPU run measured 15 us per row
//    for the previous loop, whose loads each waited on the store before it; this kernel 9.4 us
//    under ncu with cold caches, before its weight loads moved ahead of the reduction.) Wider rows
//    loop the same way.
//  - RoPE: thread i computes cos/sin of angle = double(pos) * inv_freq[i] in double, rounds them
//    to f32 and rotates pair i with rope_rotate (kernels/shared_math.hpp, no FMA contraction) —
//    the CPU's arithmetic. rope_write_kv runs one block per (token, head) of q and k: the pairs of
//    a head in parallel, the rotated K and the V rows of a KV head stored into the cache at once.
// Programmatic dependent launch (cuda_common.cuh): the kernels of the layer loop (RMSNorm, RoPE
// and the KV write, SwiGLU, bias and residual adds, the row gather) wait for the previous kernel
// before their first access and let the next one launch early; the embedding, a forward's first
// kernel after the copies of its inputs, is a plain launch that lets the next one launch early.
// Values that change per step without changing the launch (n_past) are read from StepParams in
// device memory, so these launches can be captured in a CUDA graph.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/position_step.hpp"
#include "kernels/cuda/quant_activations.cuh"
#include "kernels/shared_math.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace selfspec::kernels::cuda {
namespace {

using detail::grid_stride_blocks;
using detail::require;
using detail::str;

constexpr int kThreads = 256;     // grid-stride kernels
constexpr int kRowThreads = 256;  // RMSNorm: one block per row (a multiple of 32)

__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// Exact decoders of one stored weight element.
struct F32Element {
  using Storage = float;
  static __device__ __forceinline__ float load(const float* data, std::int64_t i) {
    return data[i];
  }
};
struct BF16Element {
  using Storage = std::uint16_t;
  static __device__ __forceinline__ float load(const std::uint16_t* data, std::int64_t i) {
    return bf16_bits_to_float(data[i]);
  }
};
struct F16Element {
  using Storage = std::uint16_t;
  static __device__ __forceinline__ float load(const std::uint16_t* data, std::int64_t i) {
    return __half2float(__ushort_as_half(data[i]));
  }
};

// The start of every kernel launched with launch_dependent (cuda_common.cuh).
__device__ __forceinline__ void enter_dependent() {
  detail::allow_dependents();
  detail::wait_for_prerequisites();
}

template <class Element>
__global__ void embedding_kernel(const typename Element::Storage* table, std::int64_t table_rows,
                                 std::int64_t dim, std::int64_t vocab_begin,
                                 const std::int32_t* tokens, std::int64_t n_tokens, float* out) {
  enter_dependent();
  const std::int64_t n = n_tokens * dim;
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    const std::int64_t t = i / dim;
    const std::int64_t c = i - t * dim;
    const std::int64_t row = static_cast<std::int64_t>(tokens[t]) - vocab_begin;
    out[i] = (row >= 0 && row < table_rows) ? Element::load(table, row * dim + c) : 0.0f;
  }
}

// Element i of the normalised row (row `t`) out: y[i], or with kQuantize into the quantized
// activations' workspace (quant_activations.cuh: element i is lane i % 32 of group i / 32, and the
// warp holding it holds that whole group, since i = thread + k · kRowThreads and dim % 32 == 0).
template <bool kQuantize>
__device__ __forceinline__ void store_normed(float value, std::int64_t t, std::int64_t i,
                                             std::int64_t dim, float* y, std::uint8_t* workspace) {
  if constexpr (kQuantize) {
    const QuantActivationsLayout l = quant_activations_layout(gridDim.x, dim);
    detail::quantize_group(value, static_cast<int>(i % kQuantGroupCols), t, i / kQuantGroupCols,
                           dim, l, workspace);
  } else {
    y[t * dim + i] = value;
  }
}

// kAdd: x_mut[i] = x[i] + delta[i] is stored (x_mut == x), then normalised. kPerThread > 0: the
// row's elements live in registers (dim <= kPerThread * kRowThreads); 0: any dim, in a loop.
// kQuantize: the normalised row goes to the quantized activations (store_normed), not to y.
template <bool kAdd, int kPerThread, bool kQuantize>
__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_kernel(const float* x, float* x_mut, const float* delta, const float* weight, float eps,
                   std::int64_t dim, float* y, std::uint8_t* workspace) {
  __shared__ double scratch[kRowThreads / detail::kWarpSize];
  enter_dependent();
  const std::int64_t row_offset = static_cast<std::int64_t>(blockIdx.x) * dim;
  double sum_squares = 0.0;
  if constexpr (kPerThread > 0) {
    float v[kPerThread];
    float g[kPerThread];  // the norm's weight, loaded with x (not after the reduction)
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const std::int64_t i = threadIdx.x + static_cast<std::int64_t>(k) * kRowThreads;
      v[k] = 0.0f;
      g[k] = 0.0f;
      if (i < dim) {
        v[k] = x[row_offset + i];
        if constexpr (kAdd) v[k] = v[k] + delta[row_offset + i];
        g[k] = weight[i];
      }
    }
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const std::int64_t i = threadIdx.x + static_cast<std::int64_t>(k) * kRowThreads;
      if (i < dim) {
        if constexpr (kAdd) x_mut[row_offset + i] = v[k];
        const double d = v[k];
        sum_squares += d * d;
      }
    }
    const double total = detail::block_sum(sum_squares, scratch);
    const double mean = total / static_cast<double>(dim);
    const float r = static_cast<float>(1.0 / sqrt(mean + static_cast<double>(eps)));
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const std::int64_t i = threadIdx.x + static_cast<std::int64_t>(k) * kRowThreads;
      if (i < dim) store_normed<kQuantize>(g[k] * (v[k] * r), blockIdx.x, i, dim, y, workspace);
    }
  } else {
    for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      float v = x[row_offset + i];
      if constexpr (kAdd) {
        v = v + delta[row_offset + i];
        x_mut[row_offset + i] = v;
      }
      const double d = v;
      sum_squares += d * d;
    }
    const double total = detail::block_sum(sum_squares, scratch);
    const double mean = total / static_cast<double>(dim);
    const float r = static_cast<float>(1.0 / sqrt(mean + static_cast<double>(eps)));
    // Each thread re-reads only the elements it wrote (kAdd) or read itself, so y may alias x.
    for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float v = x[row_offset + i];
      store_normed<kQuantize>(weight[i] * (v * r), blockIdx.x, i, dim, y, workspace);
    }
  }
}

__global__ void add_inplace_kernel(float* x, const float* y, std::int64_t n) {
  enter_dependent();
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) x[i] += y[i];
}

__global__ void add_bias_kernel(float* x, const float* bias, std::int64_t n, std::int64_t dim) {
  enter_dependent();
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) x[i] += bias[i % dim];
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, std::int64_t n) {
  enter_dependent();
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    out[i] = swiglu_value(gate[i], up[i]);
  }
}

// The RoPE table's row of `position` (cosines, then sines at + head_dim / 2), or null when the
// position is outside the table.
__device__ __forceinline__ const float* rope_row(const float* table, std::int64_t table_positions,
                                                 std::int64_t position, std::int64_t head_dim) {
  return position >= 0 && position < table_positions ? table + position * head_dim : nullptr;
}

// One block per token; thread i handles the pair (i, i + half) of every head.
__global__ void rope_kernel(float* x, std::int64_t row_stride, std::int64_t n_heads,
                            std::int64_t head_dim, const std::int32_t* positions,
                            const float* table, std::int64_t table_positions) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t half = head_dim / 2;
  const float* cos_sin = rope_row(table, table_positions, positions[t], head_dim);
  if (cos_sin == nullptr) return;  // block-uniform
  float* row = x + t * row_stride;
  for (std::int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const float c = __ldg(cos_sin + i);
    const float s = __ldg(cos_sin + half + i);
    for (std::int64_t h = 0; h < n_heads; ++h) {
      float* first = row + h * head_dim;
      float* second = first + half;
      const RopePair rotated = rope_rotate(first[i], second[i], c, s);
      first[i] = rotated.first;
      second[i] = rotated.second;
    }
  }
}

__global__ void write_kv_kernel(const float* k, const float* v, std::int64_t n_tokens,
                                std::int64_t kv_heads, std::int64_t head_dim, std::int64_t capacity,
                                const StepParams* step, void* k_cache, void* v_cache,
                                DType kv_dtype) {
  const std::int64_t n_past = step->n_past;
  const std::int64_t row = kv_heads * head_dim;
  const std::int64_t n = n_tokens * row;
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    const std::int64_t t = i / row;
    const std::int64_t r = i - t * row;
    const std::int64_t h = r / head_dim;
    const std::int64_t d = r - h * head_dim;
    const std::int64_t slot = n_past + t;
    if (slot < 0 || slot >= capacity) continue;  // a bad n_past must not write out of bounds
    const std::int64_t dst = (h * capacity + slot) * head_dim + d;
    store_kv(k_cache, kv_dtype, dst, k[i]);
    store_kv(v_cache, kv_dtype, dst, v[i]);
  }
}

// One block per (token, head) of q (heads [0, n_q_heads)) and k (the next kv_heads): thread i
// rotates pair i of the head, as rope_kernel; a KV head's block also stores its rotated K pair and
// V pair into the cache at slot n_past + t, as write_kv_kernel.
__global__ void rope_write_kv_kernel(const RopeKvArgs a, const std::int32_t* positions,
                                     const float* table, std::int64_t table_positions,
                                     const StepParams* step, void* k_cache, void* v_cache) {
  enter_dependent();
  const std::int64_t heads = a.n_q_heads + a.kv_heads;
  const std::int64_t t = blockIdx.x / heads;
  const std::int64_t head = blockIdx.x - t * heads;
  const bool is_q = head < a.n_q_heads;
  const std::int64_t kv_head = head - a.n_q_heads;
  const std::int64_t half = a.head_dim / 2;
  float* row =
      is_q ? a.q + t * a.q_stride + head * a.head_dim : a.k + t * a.k_stride + kv_head * a.head_dim;
  const std::int64_t slot = static_cast<std::int64_t>(step->n_past) + t;
  const bool store = !is_q && slot >= 0 && slot < a.capacity;
  const std::int64_t dst = (kv_head * a.capacity + slot) * a.head_dim;
  const float* v_row = a.v + t * a.kv_heads * a.head_dim + kv_head * a.head_dim;
  const float* cos_sin = rope_row(table, table_positions, positions[t], a.head_dim);
  if (cos_sin == nullptr) return;  // block-uniform: neither rotated nor written
  for (std::int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const float c = __ldg(cos_sin + i);
    const float s = __ldg(cos_sin + half + i);
    const RopePair rotated = rope_rotate(row[i], row[i + half], c, s);
    row[i] = rotated.first;
    row[i + half] = rotated.second;
    if (store) {
      store_kv(k_cache, a.kv_dtype, dst + i, rotated.first);
      store_kv(k_cache, a.kv_dtype, dst + i + half, rotated.second);
      store_kv(v_cache, a.kv_dtype, dst + i, v_row[i]);
      store_kv(v_cache, a.kv_dtype, dst + i + half, v_row[i + half]);
    }
  }
}

__global__ void gather_rows_kernel(const float* src, const std::int32_t* rows, std::int64_t n_rows,
                                   std::int64_t dim, float* dst) {
  enter_dependent();
  const std::int64_t n = n_rows * dim;
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    const std::int64_t r = i / dim;
    const std::int64_t c = i - r * dim;
    dst[i] = src[static_cast<std::int64_t>(rows[r]) * dim + c];
  }
}

__global__ void to_bf16_kernel(const float* in, __nv_bfloat16* out, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    out[i] = __float2bfloat16_rn(in[i]);
  }
}

__global__ void to_f16_kernel(const float* in, __half* out, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads())
    out[i] = __float2half_rn(in[i]);
}

template <class Element>
void launch_embedding(const DeviceWeight& table, std::int64_t vocab_begin,
                      const std::int32_t* tokens, std::int64_t n_tokens, float* out,
                      cudaStream_t stream) {
  const std::int64_t n = n_tokens * table.cols;
  // A plain launch: the forward's first kernel follows the copies of its inputs, not a kernel.
  embedding_kernel<Element><<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      static_cast<const typename Element::Storage*>(table.data), table.rows, table.cols,
      vocab_begin, tokens, n_tokens, out);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

void check_rows(std::int64_t n_tokens, std::int64_t dim, const char* what) {
  require(n_tokens >= 0 && dim > 0,
          std::string(what) + ": bad shape (tokens " + str(n_tokens) + ", dim " + str(dim) + ")");
  require(n_tokens <= 0x7fffffff,
          std::string(what) + ": too many rows for one launch (" + str(n_tokens) + ")");
}

}  // namespace

void embedding(const DeviceWeight& table, std::int64_t vocab_begin, const std::int32_t* tokens,
               std::int64_t n_tokens, float* out, cudaStream_t stream) {
  require(n_tokens >= 0 && table.rows >= 0 && table.cols > 0 && vocab_begin >= 0,
          "embedding: bad shape (tokens " + str(n_tokens) + ", rows " + str(table.rows) +
              ", cols " + str(table.cols) + ", vocab_begin " + str(vocab_begin) + ")");
  require(table.rows == 0 || table.data != nullptr, "embedding: null table");
  if (n_tokens == 0) return;
  switch (table.dtype) {
    case DType::kF32:
      launch_embedding<F32Element>(table, vocab_begin, tokens, n_tokens, out, stream);
      return;
    case DType::kBF16:
      launch_embedding<BF16Element>(table, vocab_begin, tokens, n_tokens, out, stream);
      return;
    case DType::kF16:
      launch_embedding<F16Element>(table, vocab_begin, tokens, n_tokens, out, stream);
      return;
  }
  require(false, "embedding: unsupported table dtype " + str(static_cast<int>(table.dtype)));
}

namespace {

// The row's output: y, or (kQuantize) the quantized activations' workspace.
struct NormOutput {
  float* y = nullptr;
  std::uint8_t* workspace = nullptr;
};

template <bool kAdd, int kPerThread, bool kQuantize>
void launch_rmsnorm(const float* x, float* x_mut, const float* delta, const float* weight,
                    float eps, std::int64_t n_tokens, std::int64_t dim, const NormOutput& out,
                    cudaStream_t stream) {
  detail::launch_dependent(rmsnorm_kernel<kAdd, kPerThread, kQuantize>,
                           dim3(static_cast<unsigned>(n_tokens)), dim3(kRowThreads), stream, x,
                           x_mut, delta, weight, eps, dim, out.y, out.workspace);
}

// The register-resident kernel for rows of up to 32 * 256 elements, the loop beyond.
template <bool kAdd, bool kQuantize = false>
void dispatch_rmsnorm(const float* x, float* x_mut, const float* delta, const float* weight,
                      float eps, std::int64_t n_tokens, std::int64_t dim, const NormOutput& out,
                      cudaStream_t stream) {
  const std::int64_t per_thread = (dim + kRowThreads - 1) / kRowThreads;
  if (per_thread <= 2) {
    launch_rmsnorm<kAdd, 2, kQuantize>(x, x_mut, delta, weight, eps, n_tokens, dim, out, stream);
  } else if (per_thread <= 8) {
    launch_rmsnorm<kAdd, 8, kQuantize>(x, x_mut, delta, weight, eps, n_tokens, dim, out, stream);
  } else if (per_thread <= 16) {
    launch_rmsnorm<kAdd, 16, kQuantize>(x, x_mut, delta, weight, eps, n_tokens, dim, out, stream);
  } else if (per_thread <= 32) {
    launch_rmsnorm<kAdd, 32, kQuantize>(x, x_mut, delta, weight, eps, n_tokens, dim, out, stream);
  } else {
    launch_rmsnorm<kAdd, 0, kQuantize>(x, x_mut, delta, weight, eps, n_tokens, dim, out, stream);
  }
}

}  // namespace

void rmsnorm(const float* x, const float* weight, float eps, std::int64_t n_tokens,
             std::int64_t dim, float* y, cudaStream_t stream) {
  check_rows(n_tokens, dim, "rmsnorm");
  if (n_tokens == 0) return;
  dispatch_rmsnorm<false>(x, nullptr, nullptr, weight, eps, n_tokens, dim, {y, nullptr}, stream);
}

void rmsnorm_quantize(const float* x, const float* weight, float eps, std::int64_t n_tokens,
                      std::int64_t dim, void* workspace, cudaStream_t stream) {
  check_rows(n_tokens, dim, "rmsnorm_quantize");
  require(dim % kQuantGroupCols == 0,
          "rmsnorm_quantize: " + str(dim) + " columns (a multiple of 32)");
  if (n_tokens == 0) return;
  require(workspace != nullptr && detail::is_aligned(workspace, 256),
          "rmsnorm_quantize: null or misaligned workspace");
  dispatch_rmsnorm<false, true>(x, nullptr, nullptr, weight, eps, n_tokens, dim,
                                {nullptr, static_cast<std::uint8_t*>(workspace)}, stream);
}

void add_rmsnorm(float* x, const float* delta, const float* weight, float eps,
                 std::int64_t n_tokens, std::int64_t dim, float* y, cudaStream_t stream) {
  check_rows(n_tokens, dim, "add_rmsnorm");
  if (n_tokens == 0) return;
  dispatch_rmsnorm<true>(x, x, delta, weight, eps, n_tokens, dim, {y, nullptr}, stream);
}

void add_inplace(float* x, const float* y, std::int64_t n, cudaStream_t stream) {
  require(n >= 0, "add_inplace: negative length " + str(n));
  if (n == 0) return;
  detail::launch_dependent(add_inplace_kernel, dim3(grid_stride_blocks(n, kThreads)),
                           dim3(kThreads), stream, x, y, n);
}

void add_bias(float* x, const float* bias, std::int64_t n_tokens, std::int64_t dim,
              cudaStream_t stream) {
  require(n_tokens >= 0 && dim >= 0,
          "add_bias: bad shape (tokens " + str(n_tokens) + ", dim " + str(dim) + ")");
  const std::int64_t n = n_tokens * dim;
  if (n == 0) return;
  detail::launch_dependent(add_bias_kernel, dim3(grid_stride_blocks(n, kThreads)), dim3(kThreads),
                           stream, x, bias, n, dim);
}

void swiglu(const float* gate, const float* up, float* out, std::int64_t n, cudaStream_t stream) {
  require(n >= 0, "swiglu: negative length " + str(n));
  if (n == 0) return;
  detail::launch_dependent(swiglu_kernel, dim3(grid_stride_blocks(n, kThreads)), dim3(kThreads),
                           stream, gate, up, out, n);
}

void rope(float* x, std::int64_t n_tokens, std::int64_t row_stride, std::int64_t n_heads,
          std::int64_t head_dim, const std::int32_t* positions, const float* table,
          std::int64_t table_positions, cudaStream_t stream) {
  require(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim " + str(head_dim) + " must be even");
  require(table != nullptr && table_positions > 0, "rope: no RoPE table");
  require(n_tokens >= 0 && n_heads >= 0 && row_stride >= n_heads * head_dim,
          "rope: bad shape (tokens " + str(n_tokens) + ", heads " + str(n_heads) + ", head_dim " +
              str(head_dim) + ", row stride " + str(row_stride) + ")");
  require(n_tokens <= 0x7fffffff, "rope: too many tokens for one launch (" + str(n_tokens) + ")");
  if (n_tokens == 0 || n_heads == 0) return;
  const std::int64_t half = head_dim / 2;
  // One thread per pair, rounded up to whole warps, at most 256.
  const std::int64_t warps = (half + detail::kWarpSize - 1) / detail::kWarpSize;
  const int threads = static_cast<int>(warps > 8 ? 256 : warps * detail::kWarpSize);
  rope_kernel<<<static_cast<unsigned>(n_tokens), threads, 0, stream>>>(
      x, row_stride, n_heads, head_dim, positions, table, table_positions);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

void write_kv(const float* k, const float* v, std::int64_t n_tokens, std::int64_t kv_heads,
              std::int64_t head_dim, std::int64_t capacity, const StepParams* step, void* k_cache,
              void* v_cache, DType kv_dtype, cudaStream_t stream) {
  require(n_tokens >= 0 && kv_heads > 0 && head_dim > 0 && capacity >= n_tokens,
          "write_kv: bad shape (tokens " + str(n_tokens) + ", kv heads " + str(kv_heads) +
              ", head_dim " + str(head_dim) + ", capacity " + str(capacity) + ")");
  require(step != nullptr, "write_kv: null step parameters");
  detail::require_kv_dtype("write_kv", kv_dtype);
  const std::int64_t n = n_tokens * kv_heads * head_dim;
  if (n == 0) return;
  write_kv_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      k, v, n_tokens, kv_heads, head_dim, capacity, step, k_cache, v_cache, kv_dtype);
  SELFSPEC_CUDA_CHECK_LAUNCH();
}

void rope_write_kv(const RopeKvArgs& args, std::int64_t n_tokens, const std::int32_t* positions,
                   const float* table, std::int64_t table_positions, const StepParams* step,
                   void* k_cache, void* v_cache, cudaStream_t stream) {
  const std::int64_t n_q = args.q != nullptr ? args.n_q_heads : 0;
  const std::int64_t head_dim = args.head_dim;
  require(head_dim > 0 && head_dim % 2 == 0,
          "rope_write_kv: head_dim " + str(head_dim) + " must be even");
  require(n_tokens >= 0 && n_q >= 0 && args.kv_heads > 0 && args.capacity >= n_tokens &&
              args.k_stride >= args.kv_heads * head_dim &&
              (n_q == 0 || args.q_stride >= n_q * head_dim),
          "rope_write_kv: bad shape (tokens " + str(n_tokens) + ", q heads " + str(n_q) +
              ", kv heads " + str(args.kv_heads) + ", head_dim " + str(head_dim) + ", capacity " +
              str(args.capacity) + ")");
  require(args.k != nullptr && args.v != nullptr && positions != nullptr && table != nullptr &&
              table_positions > 0 && step != nullptr && k_cache != nullptr && v_cache != nullptr,
          "rope_write_kv: null pointer");
  detail::require_kv_dtype("rope_write_kv", args.kv_dtype);
  const std::int64_t blocks = n_tokens * (n_q + args.kv_heads);
  require(blocks <= 0x7fffffff, "rope_write_kv: too many (token, head) blocks");
  if (blocks == 0) return;
  RopeKvArgs a = args;
  a.n_q_heads = n_q;
  // One thread per pair, rounded up to whole warps, at most 256.
  const std::int64_t warps = (head_dim / 2 + detail::kWarpSize - 1) / detail::kWarpSize;
  const int threads = static_cast<int>(warps > 8 ? 256 : warps * detail::kWarpSize);
  detail::launch_dependent(rope_write_kv_kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads),
                           stream, a, positions, table, table_positions, step, k_cache, v_cache);
}

void gather_rows(const float* src, const std::int32_t* rows, std::int64_t n_rows, std::int64_t dim,
                 float* dst, cudaStream_t stream) {
  require(n_rows >= 0 && dim > 0,
          "gather_rows: bad shape (rows " + str(n_rows) + ", dim " + str(dim) + ")");
  if (n_rows == 0) return;
  const std::int64_t n = n_rows * dim;
  detail::launch_dependent(gather_rows_kernel, dim3(grid_stride_blocks(n, kThreads)),
                           dim3(kThreads), stream, src, rows, n_rows, dim, dst);
}

void convert_activations(const float* in, DType out_dtype, void* out, std::int64_t n,
                         cudaStream_t stream) {
  require(n >= 0, "convert_activations: negative length " + str(n));
  if (n == 0) return;
  switch (out_dtype) {
    case DType::kF32:
      if (static_cast<const void*>(in) != out) {
        SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(out, in, static_cast<std::size_t>(n) * sizeof(float),
                                            cudaMemcpyDeviceToDevice, stream));
      }
      return;
    case DType::kBF16:
      to_bf16_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
          in, static_cast<__nv_bfloat16*>(out), n);
      SELFSPEC_CUDA_CHECK_LAUNCH();
      return;
    case DType::kF16:
      to_f16_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
          in, static_cast<__half*>(out), n);
      SELFSPEC_CUDA_CHECK_LAUNCH();
      return;
  }
  require(false, "convert_activations: unsupported dtype " + str(static_cast<int>(out_dtype)));
}

}  // namespace selfspec::kernels::cuda
