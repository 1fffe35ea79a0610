// Microbenchmarks of the CUDA kernels (Google Benchmark, manual time from CUDA events).
//
// Decode and verification matmuls (matmul_small_batch, bf16 4096 x 4096 at T = 1 .. 64, the
// verification cost curve; 11008 x 4096 at T = 1 / 4 / 8; the fused launches of a LLaMA-7B
// layer, Wq|Wk|Wv = 3 x 4096 rows and gate|up = 2 x 11008 rows, at T = 1; gate|up with the SwiGLU
// epilogue at T = 1 / 8; the tensor cores' fused forms at T = 1: Wq|Wk|Wv with the RMSNorm
// folded in, and o adding into the residual stream), on the kernel the engine picks (kAuto: the
// CUDA cores unless SELFSPEC_CUDA_GEMV=tensor-cores) and again on the tensor-core GEMV
// (matmul_tensor_cores/..., matmul_swiglu_tensor_cores/...), side by side, and the tensor-core
// GEMV's weight pipelines (tensor_pipeline/<pipeline>/..., 4096 x 4096 at T = 1 / 8 / 16 / 64 and
// the SwiGLU pair 2 x 11008 x 4096 at T = 1 / 8), are memory bound: each call
// uses the next of several copies of the weight matrices, the copies together much larger than the
// L2 cache (SELFSPEC_BENCH_POOL_MB, default 1024 MiB), so GB/s is HBM bandwidth (weights
// + activations moved). The prefill GEMM (cuBLASLt, T = 64 / 512) reports TFLOP/s. Decode
// attention (T = 1 over 160 / 1k / 4k / 16k cached slots, 32 query heads, 8 KV heads, head_dim
// 128, an f32 and a bf16 KV cache) rotates over KV-cache copies the same way and reports GB/s of K
// and V read (4 or 2 bytes an element). RoPE fused with
// the KV write (32 + 32 heads of 128, T = 1) reports GB/s of q, k and v read and written; a 7B
// layer's Q|K|V with its position step (6144 x 4096 bf16, T = 1 / 8), as the RoPE form's one
// launch (matmul_rope_kv/...) and as the CUDA-core GEMV then rope_write_kv
// (qkv_then_rope_write_kv/...), GB/s of the weights. The
// quantized GEMV (GGUF formats as stored: Q4_0, Q8_0, Q4_K, Q6_K, 4096 x 4096 at T = 1, 4, 8;
// activations quantized once per call; and gate|up with the SwiGLU, 2 x 11008 x 4096 Q4_K at
// T = 1 / 8) reports GB/s of its quantized rows read. RMSNorm, add + RMSNorm and the RMSNorm that
// quantizes its output report GB/s of data read and written; so do scatter_columns and compact_rows
// (a whole-model KV cache keeping a verified tree's 8-node accepted path: LLaMA-70B TP-8 and
// SmolLM2-135M shapes). Each benchmark iteration times kInner back-to-back launches between two
// CUDA events on one stream and reports their mean as the iteration time. The theoretical peak
// bandwidth of the device (2 x memory clock x bus width, from the device attributes) is printed and
// attached to every result as peak_GB/s. Without a usable device the program says so and exits 0.
#include "backend/quant_rows_builder.hpp"
#include "core/cuda_check.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"
#include "kernels/cpu/ggml_quantize.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cuda/cublaslt_gemm.hpp"
#include "kernels/cuda/cuda_event.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/cuda_stream.hpp"
#include "kernels/cuda/matmul_tensor_core.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace selfspec::kernels::cuda {
namespace {

constexpr int kInner = 10;
constexpr std::size_t kDefaultPoolBytes = std::size_t{1024} << 20;

double g_peak_gbps = 0.0;

std::size_t pool_bytes() {
  if (const char* env = std::getenv("SELFSPEC_BENCH_POOL_MB")) {
    return static_cast<std::size_t>(std::max(1L, std::atol(env))) << 20;
  }
  return kDefaultPoolBytes;
}

// Owning device memory (RAII over cudaMalloc / cudaFree).
class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t bytes) {
    void* pointer = nullptr;
    SELFSPEC_CUDA_CHECK(cudaMalloc(&pointer, std::max<std::size_t>(bytes, 1)));
    data_.reset(pointer);
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(data_.get());
  }

 private:
  struct Free {
    void operator()(void* pointer) const { (void)cudaFree(pointer); }
  };
  std::unique_ptr<void, Free> data_;
};

using Stream = CudaStream;

using Event = CudaEvent;

// Deterministic pseudo-random values in [-1, 1) (xorshift).
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 1) {}
  float next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return static_cast<float>(static_cast<std::int64_t>(state_ >> 40) - (1 << 23)) /
           static_cast<float>(1 << 23);
  }

 private:
  std::uint64_t state_;
};

// A device buffer of n random values of the given dtype.
DeviceMemory random_device(DType dtype, std::size_t n, std::uint64_t seed) {
  Random rng(seed);
  DeviceMemory memory(n * dtype_size(dtype));
  if (dtype == DType::kF32) {
    std::vector<float> host(n);
    for (float& v : host) v = rng.next();
    SELFSPEC_CUDA_CHECK(
        cudaMemcpy(memory.get(), host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  } else {
    std::vector<std::uint16_t> host(n);
    for (std::uint16_t& v : host) {
      const float f = rng.next();
      v = dtype == DType::kBF16 ? f32_to_bf16(f) : f32_to_f16(f);
    }
    SELFSPEC_CUDA_CHECK(
        cudaMemcpy(memory.get(), host.data(), n * sizeof(std::uint16_t), cudaMemcpyHostToDevice));
  }
  return memory;
}

// `copies` copies of one random buffer of `bytes`, back to back, so that rotating over them
// defeats the L2 cache.
struct Pool {
  std::size_t bytes = 0;
  std::size_t copies = 0;
  std::unique_ptr<DeviceMemory> memory;
  const std::uint8_t* copy(std::int64_t i) const {
    return memory->get<std::uint8_t>() + static_cast<std::size_t>(i) % copies * bytes;
  }
};

Pool make_pool(DType dtype, std::size_t elements, std::uint64_t seed) {
  Pool pool;
  pool.bytes = elements * dtype_size(dtype);
  pool.copies = std::max<std::size_t>(2, (pool_bytes() + pool.bytes - 1) / pool.bytes);
  pool.memory = std::make_unique<DeviceMemory>(pool.bytes * pool.copies);
  const DeviceMemory first = random_device(dtype, elements, seed);
  for (std::size_t c = 0; c < pool.copies; ++c) {
    SELFSPEC_CUDA_CHECK(cudaMemcpy(pool.memory->get<std::uint8_t>() + c * pool.bytes, first.get(),
                                   pool.bytes, cudaMemcpyDeviceToDevice));
  }
  return pool;
}

// Times `launch(call_index)` kInner times per iteration; sets the per-call time and the rates.
template <class Launch>
void run_timed(benchmark::State& state, const Stream& stream, double bytes_per_call,
               double flops_per_call, Launch launch) {
  launch(0);  // warm-up (and algorithm selection for cuBLASLt)
  SELFSPEC_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  Event start;
  Event stop;
  double total_seconds = 0.0;
  std::int64_t calls = 0;
  for (auto _ : state) {
    SELFSPEC_CUDA_CHECK(cudaEventRecord(start.get(), stream.get()));
    for (int i = 0; i < kInner; ++i) launch(calls + i + 1);
    SELFSPEC_CUDA_CHECK(cudaEventRecord(stop.get(), stream.get()));
    SELFSPEC_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float milliseconds = 0.0f;
    SELFSPEC_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start.get(), stop.get()));
    const double seconds = static_cast<double>(milliseconds) * 1e-3;
    state.SetIterationTime(seconds / kInner);
    total_seconds += seconds;
    calls += kInner;
  }
  if (calls == 0 || total_seconds <= 0.0) return;
  state.counters["GB/s"] = bytes_per_call * static_cast<double>(calls) / total_seconds / 1e9;
  if (flops_per_call > 0.0) {
    state.counters["TFLOP/s"] = flops_per_call * static_cast<double>(calls) / total_seconds / 1e12;
  }
  state.counters["peak_GB/s"] = g_peak_gbps;
}

// Runs a benchmark body, turning a selfspec::Error (or any exception) into a skipped result.
template <class Body>
void guarded(benchmark::State& state, Body body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void bm_matmul_small_batch(benchmark::State& state, std::int64_t rows, std::int64_t cols,
                           std::int64_t n_tokens, GemvKernel kernel) {
  guarded(state, [&] {
    const Stream stream;
    const Pool weights = make_pool(DType::kBF16, static_cast<std::size_t>(rows * cols), 1);
    const DeviceMemory x = random_device(DType::kF32, static_cast<std::size_t>(n_tokens * cols), 2);
    const DeviceMemory y(static_cast<std::size_t>(n_tokens * rows) * sizeof(float));
    const double bytes = static_cast<double>(rows * cols) * 2.0 +
                         static_cast<double>(n_tokens * (cols + rows)) * 4.0;
    run_timed(state, stream, bytes, 2.0 * static_cast<double>(n_tokens * rows * cols),
              [&](std::int64_t call) {
                const DeviceWeight w{DType::kBF16, weights.copy(call), rows, cols};
                matmul_small_batch(x.get<float>(), n_tokens, w, y.get<float>(), stream.get(),
                                   kernel);
              });
  });
}

// The gate|up GEMV with the SwiGLU in its epilogue (one launch over both matrices).
void bm_matmul_swiglu(benchmark::State& state, std::int64_t rows, std::int64_t cols,
                      std::int64_t n_tokens, GemvKernel kernel) {
  guarded(state, [&] {
    const Stream stream;
    const std::size_t matrix = static_cast<std::size_t>(rows * cols);
    const Pool weights = make_pool(DType::kBF16, matrix * 2, 15);
    const DeviceMemory x =
        random_device(DType::kF32, static_cast<std::size_t>(n_tokens * cols), 16);
    const DeviceMemory y(static_cast<std::size_t>(n_tokens * rows) * sizeof(float));
    const double bytes = static_cast<double>(2 * rows * cols) * 2.0 +
                         static_cast<double>(n_tokens * (cols + rows)) * 4.0;
    run_timed(state, stream, bytes, 4.0 * static_cast<double>(n_tokens * rows * cols),
              [&](std::int64_t call) {
                const DeviceWeight gate{DType::kBF16, weights.copy(call), rows, cols};
                const DeviceWeight up{DType::kBF16, weights.copy(call) + matrix * 2, rows, cols};
                matmul_swiglu(x.get<float>(), n_tokens, gate, up, y.get<float>(), stream.get(),
                              kernel);
              });
  });
}

// The tensor-core GEMV with a named weight pipeline (detail::TensorPipeline; the same bits each):
// one rows x cols matrix, or (swiglu) a gate|up pair of them, at T tokens.
void bm_tensor_pipeline(benchmark::State& state, std::int64_t rows, std::int64_t cols,
                        std::int64_t n_tokens, bool swiglu, detail::TensorPipeline pipeline) {
  guarded(state, [&] {
    if (!tensor_core_gemv_supported()) throw Error("no tensor-core GEMV on this device");
    const Stream stream;
    const std::int64_t mats = swiglu ? 2 : 1;
    const std::size_t matrix = static_cast<std::size_t>(rows * cols);
    const Pool weights = make_pool(DType::kBF16, matrix * static_cast<std::size_t>(mats), 21);
    const DeviceMemory x =
        random_device(DType::kF32, static_cast<std::size_t>(n_tokens * cols), 22);
    const DeviceMemory y(static_cast<std::size_t>(n_tokens * rows) * sizeof(float));
    const double bytes = static_cast<double>(mats * rows * cols) * 2.0 +
                         static_cast<double>(n_tokens * (cols + rows)) * 4.0;
    run_timed(state, stream, bytes, 2.0 * static_cast<double>(mats * n_tokens * rows * cols),
              [&](std::int64_t call) {
                std::vector<MatmulOutput> outputs;
                for (std::int64_t m = 0; m < mats; ++m) {
                  const DeviceWeight w{
                      DType::kBF16, weights.copy(call) + static_cast<std::size_t>(m) * matrix * 2,
                      rows, cols};
                  outputs.push_back({w, y.get<float>()});
                }
                detail::matmul_tensor_cores(x.get<float>(), n_tokens, outputs, swiglu,
                                            cols % 8 == 0, {}, stream.get(), pipeline);
              });
  });
}

// One launch over `parts` matrices of rows x cols each (a fused Wq|Wk|Wv or gate|up), T = 1.
// What a fused-launch bench runs around the product of `parts` matrices at T = 1.
enum class FusedForm {
  kPlain,       // one launch over the matrices (Wq|Wk|Wv, gate|up)
  kNormed,      // the same with the RMSNorm folded in (tensor cores)
  kAccumulate,  // one matrix adding into the residual stream (o, down; tensor cores)
};

void bm_matmul_fused(benchmark::State& state, std::int64_t parts, std::int64_t rows,
                     std::int64_t cols, FusedForm form) {
  guarded(state, [&] {
    if (form != FusedForm::kPlain && !tensor_core_gemv_supported()) {
      throw Error("no tensor-core GEMV on this device");
    }
    const Stream stream;
    const std::size_t matrix = static_cast<std::size_t>(rows * cols);
    const Pool weights = make_pool(DType::kBF16, matrix * static_cast<std::size_t>(parts), 13);
    const DeviceMemory x = random_device(DType::kF32, static_cast<std::size_t>(cols), 14);
    const DeviceMemory g = random_device(DType::kF32, static_cast<std::size_t>(cols), 19);
    const DeviceMemory y(static_cast<std::size_t>(parts * rows) * sizeof(float));
    // Weights, x (and the norm's weight), y (read too when accumulating).
    const std::int64_t vectors = cols * (form == FusedForm::kNormed ? 2 : 1) +
                                 parts * rows * (form == FusedForm::kAccumulate ? 2 : 1);
    const double bytes =
        static_cast<double>(parts * rows * cols) * 2.0 + static_cast<double>(vectors) * 4.0;
    run_timed(
        state, stream, bytes, 2.0 * static_cast<double>(parts * rows * cols),
        [&](std::int64_t call) {
          std::vector<MatmulOutput> outputs;
          for (std::int64_t i = 0; i < parts; ++i) {
            const DeviceWeight w{DType::kBF16,
                                 weights.copy(call) + static_cast<std::size_t>(i) * matrix * 2,
                                 rows, cols};
            outputs.push_back({w, y.get<float>() + i * rows});
          }
          switch (form) {
            case FusedForm::kPlain:
              return matmul_small_batch(x.get<float>(), 1, outputs, stream.get());
            case FusedForm::kNormed:
              return matmul_normed(x.get<float>(), g.get<float>(), 1e-5F, 1, outputs, stream.get());
            case FusedForm::kAccumulate:
              return matmul_accumulate(x.get<float>(), 1, outputs.front().w, y.get<float>(),
                                       stream.get());
          }
        });
  });
}

// A pass's position step on the device: LLaMA's RoPE table (theta 10000) for every slot of a
// kCapacity-slot f32 cache, as the model uploads it (one row of head_dim floats read per token,
// not counted in the benchmarks' bytes: under 0.5% of them), the tokens at positions and slots
// 1000 + t, and the two caches.
struct PositionSetup {
  static constexpr std::int64_t kCapacity = 4096;
  static constexpr std::int64_t kHeadDim = 128;
  DeviceMemory table{static_cast<std::size_t>(kCapacity * kHeadDim) * sizeof(float)};
  DeviceMemory positions{static_cast<std::size_t>(kSmallBatch) * sizeof(std::int32_t)};
  DeviceMemory step{sizeof(StepParams)};
  DeviceMemory k_cache;
  DeviceMemory v_cache;

  explicit PositionSetup(std::int64_t kv_heads)
      : k_cache(static_cast<std::size_t>(kv_heads * kCapacity * kHeadDim) * sizeof(float)),
        v_cache(static_cast<std::size_t>(kv_heads * kCapacity * kHeadDim) * sizeof(float)) {
    std::vector<float> inv_freq(kHeadDim / 2);
    for (std::size_t i = 0; i < inv_freq.size(); ++i) {
      inv_freq[i] = static_cast<float>(
          1.0 / std::pow(10000.0, static_cast<double>(2 * i) / static_cast<double>(kHeadDim)));
    }
    std::vector<float> table_host(static_cast<std::size_t>(kCapacity * kHeadDim));
    cpu::fill_rope_table(inv_freq, 0, kCapacity, table_host.data());
    SELFSPEC_CUDA_CHECK(cudaMemcpy(table.get(), table_host.data(),
                                   table_host.size() * sizeof(float), cudaMemcpyHostToDevice));
    std::vector<std::int32_t> position_host(static_cast<std::size_t>(kSmallBatch));
    for (std::size_t t = 0; t < position_host.size(); ++t) {
      position_host[t] = 1000 + static_cast<std::int32_t>(t);
    }
    SELFSPEC_CUDA_CHECK(cudaMemcpy(positions.get(), position_host.data(),
                                   position_host.size() * sizeof(std::int32_t),
                                   cudaMemcpyHostToDevice));
    const StepParams step_host{1000, 0};
    SELFSPEC_CUDA_CHECK(
        cudaMemcpy(step.get(), &step_host, sizeof step_host, cudaMemcpyHostToDevice));
  }
  // rope_write_kv's arguments for q [T][q_heads · 128], k and v [T][kv_heads · 128].
  RopeKvArgs args(float* q, std::int64_t q_heads, float* k, const float* v,
                  std::int64_t kv_heads) const {
    return {.q = q,
            .q_stride = q_heads * kHeadDim,
            .n_q_heads = q_heads,
            .k = k,
            .k_stride = kv_heads * kHeadDim,
            .v = v,
            .kv_heads = kv_heads,
            .head_dim = kHeadDim,
            .capacity = kCapacity};
  }
  void rope_write(const RopeKvArgs& a, std::int64_t n_tokens, cudaStream_t stream) const {
    rope_write_kv(a, n_tokens, positions.get<std::int32_t>(), table.get<float>(), kCapacity,
                  step.get<StepParams>(), k_cache.get<float>(), v_cache.get<float>(), stream);
  }
  // The RoPE form's operands (q rows of q_heads heads).
  PositionStep fused(float* q, std::int64_t q_heads) const {
    return {.q = q,
            .q_rows = q_heads * kHeadDim,
            .k_cache = k_cache.get<float>(),
            .v_cache = v_cache.get<float>(),
            .capacity = kCapacity,
            .head_dim = kHeadDim,
            .positions = positions.get<std::int32_t>(),
            .table = table.get<float>(),
            .table_positions = kCapacity};
  }
};

// RoPE on 32 q and 32 k heads of 128 and the K/V write into a 4096-slot cache, T = 1.
void bm_rope_write_kv(benchmark::State& state) {
  guarded(state, [&] {
    const Stream stream;
    constexpr std::int64_t kHeads = 32;
    const PositionSetup setup(kHeads);
    const std::size_t row = static_cast<std::size_t>(kHeads * PositionSetup::kHeadDim);
    const DeviceMemory q = random_device(DType::kF32, row, 15);
    const DeviceMemory k = random_device(DType::kF32, row, 16);
    const DeviceMemory v = random_device(DType::kF32, row, 17);
    const RopeKvArgs args =
        setup.args(q.get<float>(), kHeads, k.get<float>(), v.get<float>(), kHeads);
    // q and k read and written, v read, K and V rows written.
    const double bytes = 7.0 * static_cast<double>(row) * sizeof(float);
    run_timed(state, stream, bytes, 0.0,
              [&](std::int64_t) { setup.rope_write(args, 1, stream.get()); });
  });
}

// A 7B attention sublayer's Q|K|V (32 q and 8 KV heads of 128, 4096 columns, bf16) and its
// position step: the RoPE form (matmul_rope_kv, one launch) or the CUDA-core GEMV of the three
// matrices then rope_write_kv (two launches, K and V through f32 buffers). GB/s of the weights.
void bm_qkv_position_step(benchmark::State& state, bool fused, std::int64_t n_tokens) {
  guarded(state, [&] {
    const Stream stream;
    constexpr std::int64_t kQHeads = 32;
    constexpr std::int64_t kKvHeads = 8;
    constexpr std::int64_t kCols = 4096;
    const std::int64_t rows[] = {kQHeads * PositionSetup::kHeadDim,
                                 kKvHeads * PositionSetup::kHeadDim,
                                 kKvHeads * PositionSetup::kHeadDim};
    const std::int64_t all_rows = rows[0] + rows[1] + rows[2];
    const PositionSetup setup(kKvHeads);
    const Pool weights = make_pool(DType::kBF16, static_cast<std::size_t>(all_rows * kCols), 22);
    const DeviceMemory x =
        random_device(DType::kF32, static_cast<std::size_t>(n_tokens * kCols), 23);
    const DeviceMemory y(static_cast<std::size_t>(n_tokens * all_rows) * sizeof(float));
    float* q = y.get<float>();
    float* k = q + n_tokens * rows[0];
    float* v = k + n_tokens * rows[1];
    const RopeKvArgs args = setup.args(q, kQHeads, k, v, kKvHeads);
    const PositionStep step = setup.fused(q, kQHeads);
    const double bytes = static_cast<double>(all_rows * kCols) * 2.0;
    run_timed(state, stream, bytes, 2.0 * static_cast<double>(n_tokens * all_rows * kCols),
              [&](std::int64_t call) {
                const std::uint8_t* base = weights.copy(call);
                DeviceWeight w[3];
                std::int64_t first_row = 0;
                for (int i = 0; i < 3; ++i) {
                  w[i] = {DType::kBF16, base + static_cast<std::size_t>(first_row * kCols) * 2,
                          rows[i], kCols};
                  first_row += rows[i];
                }
                if (fused) {
                  const HeadMatmul heads[] = {{w[0], HeadOutput::kRotated},
                                              {w[1], HeadOutput::kRotatedIntoCache},
                                              {w[2], HeadOutput::kIntoCache}};
                  matmul_rope_kv(x.get<float>(), nullptr, 1e-5F, n_tokens, heads, step,
                                 setup.step.get<StepParams>(), stream.get());
                  return;
                }
                const MatmulOutput outputs[] = {{w[0], q}, {w[1], k}, {w[2], v}};
                matmul_small_batch(x.get<float>(), n_tokens, outputs, stream.get(),
                                   GemvKernel::kCudaCores);
                setup.rope_write(args, n_tokens, stream.get());
              });
  });
}

// A rows x cols matrix in `type` (random f32 values quantized by ggml's rules), as the CUDA
// backend's quantized rows on the device, `copies` times back to back (to defeat the L2).
struct QuantPool {
  std::size_t bytes = 0;
  std::size_t copies = 0;
  std::unique_ptr<DeviceMemory> memory;
  const void* copy(std::int64_t i) const {
    return memory->get<std::uint8_t>() + static_cast<std::size_t>(i) % copies * bytes;
  }
};

QuantPool make_quant_pool(GgmlType type, WeightFormat format, std::int64_t rows,
                          std::int64_t cols) {
  Random rng(19);
  std::vector<float> values(static_cast<std::size_t>(rows * cols));
  for (float& v : values) v = 0.02f * rng.next();
  const std::uint64_t row_bytes = ggml_row_bytes(type, cols);
  std::vector<std::byte> blocks(static_cast<std::size_t>(rows) * row_bytes);
  quantize_ggml(type, values, blocks);
  const std::vector<std::byte> host = build_quant_rows(
      {format, rows, cols, blocks.data(), static_cast<std::int64_t>(row_bytes), 0});
  QuantPool pool;
  pool.bytes = host.size();
  pool.copies = std::max<std::size_t>(2, (pool_bytes() + pool.bytes - 1) / pool.bytes);
  pool.memory = std::make_unique<DeviceMemory>(pool.bytes * pool.copies);
  for (std::size_t c = 0; c < pool.copies; ++c) {
    SELFSPEC_CUDA_CHECK(cudaMemcpy(pool.memory->get<std::uint8_t>() + c * pool.bytes, host.data(),
                                   pool.bytes, cudaMemcpyHostToDevice));
  }
  return pool;
}

void bm_quant_matmul(benchmark::State& state, GgmlType type, WeightFormat format, std::int64_t rows,
                     std::int64_t cols, std::int64_t n_tokens) {
  guarded(state, [&] {
    const Stream stream;
    const QuantPool weights = make_quant_pool(type, format, rows, cols);
    const DeviceMemory x =
        random_device(DType::kF32, static_cast<std::size_t>(n_tokens * cols), 20);
    const DeviceMemory acts(quant_activations_bytes(n_tokens, cols));
    const DeviceMemory y(static_cast<std::size_t>(n_tokens * rows) * sizeof(float));
    const double bytes = static_cast<double>(weights.bytes);
    run_timed(state, stream, bytes, 2.0 * static_cast<double>(n_tokens * rows * cols),
              [&](std::int64_t call) {
                quantize_activations(x.get<float>(), n_tokens, cols, acts.get(), stream.get());
                const QuantWeight w{format, weights.copy(call), rows, cols};
                quant_matmul(acts.get(), n_tokens, w, y.get<float>(), stream.get());
              });
  });
}

// gate|up with the SwiGLU in one quantized launch (quant_matmul_swiglu): GB/s of both matrices'
// quantized rows read.
void bm_quant_matmul_swiglu(benchmark::State& state, GgmlType type, WeightFormat format,
                            std::int64_t rows, std::int64_t cols, std::int64_t n_tokens) {
  guarded(state, [&] {
    const Stream stream;
    const QuantPool gate = make_quant_pool(type, format, rows, cols);
    const QuantPool up = make_quant_pool(type, format, rows, cols);
    const DeviceMemory x =
        random_device(DType::kF32, static_cast<std::size_t>(n_tokens * cols), 21);
    const DeviceMemory acts(quant_activations_bytes(n_tokens, cols));
    const DeviceMemory out(static_cast<std::size_t>(n_tokens * rows) * sizeof(float));
    const double bytes = static_cast<double>(gate.bytes + up.bytes);
    run_timed(state, stream, bytes, 4.0 * static_cast<double>(n_tokens * rows * cols),
              [&](std::int64_t call) {
                quantize_activations(x.get<float>(), n_tokens, cols, acts.get(), stream.get());
                quant_matmul_swiglu(acts.get(), n_tokens, {format, gate.copy(call), rows, cols},
                                    {format, up.copy(call), rows, cols}, out.get<float>(),
                                    stream.get());
              });
  });
}

void bm_cublaslt(benchmark::State& state, std::int64_t rows, std::int64_t cols,
                 std::int64_t n_tokens) {
  guarded(state, [&] {
    const Stream stream;
    CublasLtGemm gemm;
    const Pool weights = make_pool(DType::kBF16, static_cast<std::size_t>(rows * cols), 3);
    const DeviceMemory x =
        random_device(DType::kBF16, static_cast<std::size_t>(n_tokens * cols), 4);
    const DeviceMemory y(static_cast<std::size_t>(n_tokens * rows) * sizeof(float));
    const double bytes = static_cast<double>(rows * cols) * 2.0 +
                         static_cast<double>(n_tokens * cols) * 2.0 +
                         static_cast<double>(n_tokens * rows) * 4.0;
    run_timed(state, stream, bytes, 2.0 * static_cast<double>(n_tokens * rows * cols),
              [&](std::int64_t call) {
                const DeviceWeight w{DType::kBF16, weights.copy(call), rows, cols};
                gemm.matmul(x.get(), n_tokens, w, y.get<float>(), stream.get());
              });
  });
}

// Decode attention over a KV cache of kv_dtype (f32 or bf16).
void bm_attention(benchmark::State& state, std::int64_t n_past, DType kv_dtype) {
  guarded(state, [&] {
    const Stream stream;
    AttentionDims dims;
    dims.n_tokens = 1;
    dims.n_q_heads = 32;
    dims.n_kv_heads = 8;
    dims.head_dim = 128;
    dims.capacity = n_past + 1;
    dims.kv_dtype = kv_dtype;
    const auto cache_elements =
        static_cast<std::size_t>(dims.n_kv_heads * dims.capacity * dims.head_dim);
    const std::size_t element = dtype_size(kv_dtype);
    // K and V of one copy live side by side in one pool entry.
    const Pool caches = make_pool(kv_dtype, 2 * cache_elements, 5);
    const DeviceMemory q =
        random_device(DType::kF32, static_cast<std::size_t>(dims.n_q_heads * dims.head_dim), 6);
    const DeviceMemory out(static_cast<std::size_t>(dims.n_q_heads * dims.head_dim) *
                           sizeof(float));
    const DeviceMemory workspace(attention_workspace_bytes(dims));
    SELFSPEC_CUDA_CHECK(cudaMemset(workspace.get(), 0, attention_workspace_bytes(dims)));
    const StepParams step_host{static_cast<std::int32_t>(n_past), 0};
    const DeviceMemory step(sizeof(StepParams));
    SELFSPEC_CUDA_CHECK(
        cudaMemcpy(step.get(), &step_host, sizeof step_host, cudaMemcpyHostToDevice));
    const float scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
    // K and V rows actually read: the n_past + 1 visible slots of every KV head.
    const double bytes = 2.0 * static_cast<double>(dims.n_kv_heads * (n_past + 1) * dims.head_dim) *
                         static_cast<double>(element);
    run_timed(state, stream, bytes, 0.0, [&](std::int64_t call) {
      const std::uint8_t* k_cache = caches.copy(call);
      const std::uint8_t* v_cache = k_cache + cache_elements * element;
      attention(q.get<float>(), k_cache, v_cache, dims, step.get<StepParams>(), nullptr, scale,
                out.get<float>(), workspace.get(), stream.get());
    });
  });
}

// RMSNorm's forms: plain (read x, write y), with the residual add (read x and delta, write x
// and y) and quantizing its output for the quantized GEMV (read x, write 1 byte an element and
// 24 bytes of statistics a group of 32); plus the norm's weight.
enum class NormForm { kPlain, kAdd, kQuantize };

void bm_rmsnorm(benchmark::State& state, std::int64_t n_tokens, NormForm form) {
  guarded(state, [&] {
    const Stream stream;
    const std::int64_t dim = 4096;
    const auto n = static_cast<std::size_t>(n_tokens * dim);
    const DeviceMemory x = random_device(DType::kF32, n, 7);
    const DeviceMemory delta = random_device(DType::kF32, n, 8);
    const DeviceMemory weight = random_device(DType::kF32, static_cast<std::size_t>(dim), 9);
    const DeviceMemory y(n * sizeof(float));
    const DeviceMemory acts(quant_activations_bytes(n_tokens, dim));
    const double elements = static_cast<double>(n);
    const double moved = form == NormForm::kAdd        ? elements * sizeof(float) * 4.0
                         : form == NormForm::kQuantize ? elements * (sizeof(float) + 1.75)
                                                       : elements * sizeof(float) * 2.0;
    const double bytes = moved + static_cast<double>(dim) * sizeof(float);
    run_timed(state, stream, bytes, 0.0, [&](std::int64_t) {
      switch (form) {
        case NormForm::kAdd:
          // Adding the same delta each call keeps x bounded enough for a timing run.
          add_rmsnorm(x.get<float>(), delta.get<float>(), weight.get<float>(), 1e-5f, n_tokens, dim,
                      y.get<float>(), stream.get());
          break;
        case NormForm::kQuantize:
          rmsnorm_quantize(x.get<float>(), weight.get<float>(), 1e-5f, n_tokens, dim, acts.get(),
                           stream.get());
          break;
        case NormForm::kPlain:
          rmsnorm(x.get<float>(), weight.get<float>(), 1e-5f, n_tokens, dim, y.get<float>(),
                  stream.get());
          break;
      }
    });
  });
}

// A pruned draft vocabulary's logits (n_ids per row, every width / n_ids-th column) scattered
// into vocab rows of `width`, -inf elsewhere: GB/s of the rows written plus values and ids read.
void bm_scatter(benchmark::State& state, std::int64_t rows, std::int64_t width,
                std::int64_t n_ids) {
  guarded(state, [&] {
    const Stream stream;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(n_ids));
    for (std::int64_t j = 0; j < n_ids; ++j) {
      ids[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(j * (width / n_ids));
    }
    const DeviceMemory d_ids(ids.size() * sizeof(std::int32_t));
    SELFSPEC_CUDA_CHECK(cudaMemcpy(d_ids.get(), ids.data(), ids.size() * sizeof(std::int32_t),
                                   cudaMemcpyHostToDevice));
    const DeviceMemory values =
        random_device(DType::kF32, static_cast<std::size_t>(rows * n_ids), 10);
    const DeviceMemory out(static_cast<std::size_t>(rows * width) * sizeof(float));
    const double bytes = 4.0 * static_cast<double>(rows * width + rows * n_ids + n_ids);
    run_timed(state, stream, bytes, 0.0, [&](std::int64_t) {
      scatter_columns(values.get<float>(), rows, d_ids.get<std::int32_t>(), n_ids, width, -INFINITY,
                      out.get<float>(), stream.get());
    });
  });
}

// Device-side verification's reductions over one verification's logit rows (K + 1 rows of a
// vocab shard): row_stats over every row, then a softmax walk over row 0 (a sampled draw). GB/s
// of the logits read (every row once, plus row 0 once more by the walk).
void bm_verify_reductions(benchmark::State& state, std::int64_t rows, std::int64_t vocab) {
  guarded(state, [&] {
    const Stream stream;
    const DeviceMemory logits =
        random_device(DType::kF32, static_cast<std::size_t>(rows * vocab), 12);
    const DeviceMemory stats(static_cast<std::size_t>(rows) * sizeof(RowStatsRecord));
    const DeviceMemory draw(sizeof(DrawRecord));
    const double bytes = 4.0 * static_cast<double>(rows * vocab + vocab);
    run_timed(state, stream, bytes, 0.0, [&](std::int64_t call) {
      row_stats(logits.get<float>(), rows, vocab, 0, 1.0, stats.get<RowStatsRecord>(),
                stream.get());
      walk_softmax(logits.get<float>(), vocab, 0, 1.0, stats.get<RowStatsRecord>(),
                   static_cast<double>(call % 7) * 0.1, draw.get<DrawRecord>(), stream.get());
    });
  });
}

// A whole model's KV cache of 2048 slots ([layer][K, V][kv_head] blocks of [capacity][head_dim])
// keeping an 8-node accepted path of a tree verified after slot 1000, every row moving: one
// launch. GB/s of the rows read and written (2 x blocks x 8 rows x head_dim floats); the rows stay
// L2 resident from one call to the next, as they are after the verification forward that wrote
// them.
void bm_compact_rows(benchmark::State& state, std::int64_t layers, std::int64_t kv_heads,
                     std::int64_t head_dim) {
  guarded(state, [&] {
    const Stream stream;
    constexpr std::int64_t kCapacity = 2048;
    constexpr std::int64_t kTo = 1001;  // the first tree slot
    const std::vector<std::int32_t> from = {kTo + 1,  kTo + 3,  kTo + 6,  kTo + 10,
                                            kTo + 15, kTo + 21, kTo + 28, kTo + 36};
    const std::int64_t blocks = layers * 2 * kv_heads;
    const DeviceMemory cache =
        random_device(DType::kF32, static_cast<std::size_t>(blocks * kCapacity * head_dim), 11);
    const double bytes = 2.0 * static_cast<double>(blocks) * static_cast<double>(from.size()) *
                         static_cast<double>(head_dim) * sizeof(float);
    constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));
    run_timed(state, stream, bytes, 0.0, [&](std::int64_t) {
      compact_rows(cache.get(), blocks, kCapacity * head_dim * kFloat, kCapacity, head_dim * kFloat,
                   from, kTo, stream.get());
    });
  });
}

void configure(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

// The bf16 GEMVs (both kernels, the tensor cores' pipelines, the fused forms) and cuBLASLt.
void register_dense_matmul_benchmarks() {
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{4096, 4096},
                                   std::pair<std::int64_t, std::int64_t>{11008, 4096}}) {
    const std::vector<std::int64_t> sweep =
        rows == 4096 ? std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 64}
                     : std::vector<std::int64_t>{1, 4, 8};
    // matmul_small_batch: the kernel the engine runs (kAuto: the CUDA cores unless
    // SELFSPEC_CUDA_GEMV=tensor-cores); matmul_tensor_cores: the tensor-core GEMV beside it.
    for (const auto& [prefix, kernel] :
         {std::pair{"matmul_small_batch", GemvKernel::kAuto},
          std::pair{"matmul_tensor_cores", GemvKernel::kTensorCores}}) {
      for (const std::int64_t t : sweep) {
        const std::string name = std::string(prefix) + "/bf16/" + std::to_string(rows) + "x" +
                                 std::to_string(cols) + "/T:" + std::to_string(t);
        configure(benchmark::RegisterBenchmark(name.c_str(),
                                               [rows, cols, t, kernel](benchmark::State& s) {
                                                 bm_matmul_small_batch(s, rows, cols, t, kernel);
                                               }));
      }
    }
    for (const std::int64_t t : {64, 512}) {
      const std::string name = "cublaslt/bf16/" + std::to_string(rows) + "x" +
                               std::to_string(cols) + "/T:" + std::to_string(t);
      configure(benchmark::RegisterBenchmark(
          name.c_str(), [rows, cols, t](benchmark::State& s) { bm_cublaslt(s, rows, cols, t); }));
    }
  }
  for (const auto& [parts, rows] : {std::pair<std::int64_t, std::int64_t>{3, 4096},
                                    std::pair<std::int64_t, std::int64_t>{2, 11008}}) {
    const std::string name =
        "matmul_fused/bf16/" + std::to_string(parts) + "x" + std::to_string(rows) + "x4096/T:1";
    configure(benchmark::RegisterBenchmark(name.c_str(), [parts, rows](benchmark::State& s) {
      bm_matmul_fused(s, parts, rows, 4096, FusedForm::kPlain);
    }));
  }
  // The tensor-core GEMV's weight pipelines side by side (tensor_pipeline/<pipeline>/...).
  for (const auto& [label, pipeline] : {std::pair{"ring", detail::TensorPipeline::kRing},
                                        std::pair{"ping_pong", detail::TensorPipeline::kPingPong},
                                        std::pair{"bulk", detail::TensorPipeline::kBulk}}) {
    for (const std::int64_t t : {1, 8, 16, 64}) {
      const std::string name =
          "tensor_pipeline/" + std::string(label) + "/bf16/4096x4096/T:" + std::to_string(t);
      configure(benchmark::RegisterBenchmark(name.c_str(), [t, p = pipeline](benchmark::State& s) {
        bm_tensor_pipeline(s, 4096, 4096, t, false, p);
      }));
    }
    for (const std::int64_t t : {1, 8}) {
      const std::string name =
          "tensor_pipeline/" + std::string(label) + "/swiglu/2x11008x4096/T:" + std::to_string(t);
      configure(benchmark::RegisterBenchmark(name.c_str(), [t, p = pipeline](benchmark::State& s) {
        bm_tensor_pipeline(s, 11008, 4096, t, true, p);
      }));
    }
  }
  configure(benchmark::RegisterBenchmark(
      "matmul_normed/bf16/3x4096x4096/T:1",
      [](benchmark::State& s) { bm_matmul_fused(s, 3, 4096, 4096, FusedForm::kNormed); }));
  configure(benchmark::RegisterBenchmark(
      "matmul_accumulate/bf16/4096x4096/T:1",
      [](benchmark::State& s) { bm_matmul_fused(s, 1, 4096, 4096, FusedForm::kAccumulate); }));

  for (const auto& [prefix, kernel] :
       {std::pair{"matmul_swiglu", GemvKernel::kAuto},
        std::pair{"matmul_swiglu_tensor_cores", GemvKernel::kTensorCores}}) {
    for (const std::int64_t t : {1, 8}) {
      const std::string name = std::string(prefix) + "/bf16/2x11008x4096/T:" + std::to_string(t);
      configure(benchmark::RegisterBenchmark(name.c_str(), [t, kernel](benchmark::State& s) {
        bm_matmul_swiglu(s, 11008, 4096, t, kernel);
      }));
    }
  }
}

// The quantized GEMV (GGUF formats as stored) and its SwiGLU form.
void register_quant_matmul_benchmarks() {
  for (const auto& [type, format] : {std::pair{GgmlType::kQ4_0, WeightFormat::kQ4_0},
                                     std::pair{GgmlType::kQ8_0, WeightFormat::kQ8_0},
                                     std::pair{GgmlType::kQ4_K, WeightFormat::kQ4_K},
                                     std::pair{GgmlType::kQ6_K, WeightFormat::kQ6_K}}) {
    for (const std::int64_t t : {1, 4, 8}) {
      const std::string name = "quant_matmul/" + std::string(weight_format_name(format)) +
                               "/4096x4096/T:" + std::to_string(t);
      configure(benchmark::RegisterBenchmark(name.c_str(), [type, format, t](benchmark::State& s) {
        bm_quant_matmul(s, type, format, 4096, 4096, t);
      }));
      if (format != WeightFormat::kQ4_K) break;  // the T sweep for Q4_K only
    }
  }
  for (const std::int64_t t : {1, 8}) {
    const std::string name = "quant_matmul_swiglu/q4_k/2x11008x4096/T:" + std::to_string(t);
    configure(benchmark::RegisterBenchmark(name.c_str(), [t](benchmark::State& s) {
      bm_quant_matmul_swiglu(s, GgmlType::kQ4_K, WeightFormat::kQ4_K, 11008, 4096, t);
    }));
  }
}

// RoPE and the KV write, alone and in Q|K|V's epilogue.
void register_position_step_benchmarks() {
  configure(benchmark::RegisterBenchmark("rope_write_kv/32x128/T:1",
                                         [](benchmark::State& s) { bm_rope_write_kv(s); }));
  for (const std::int64_t t : {1, 8}) {
    for (const auto& [fused, form] :
         {std::pair{false, "qkv_then_rope_write_kv"}, std::pair{true, "matmul_rope_kv"}}) {
      const std::string name = std::string(form) + "/bf16/6144x4096/T:" + std::to_string(t);
      configure(benchmark::RegisterBenchmark(
          name.c_str(), [f = fused, t](benchmark::State& s) { bm_qkv_position_step(s, f, t); }));
    }
  }
}

// Attention, the LM head's scatter, the KV cache's row compaction, the verification reductions
// and the norms.
void register_memory_bound_benchmarks() {
  // "attention/..." is the f32 cache (the name kept from before bf16 caches),
  // "attention/bf16-kv/..." the bf16 cache.
  for (const DType kv_dtype : {DType::kF32, DType::kBF16}) {
    for (const std::int64_t slots : {160, 1024, 4096, 16384}) {
      const std::string name =
          std::string(kv_dtype == DType::kBF16 ? "attention/bf16-kv" : "attention") +
          "/T:1/slots:" + std::to_string(slots);
      configure(benchmark::RegisterBenchmark(name.c_str(), [slots, kv_dtype](benchmark::State& s) {
        bm_attention(s, slots, kv_dtype);
      }));
    }
  }
  for (const std::int64_t n_ids : {4096, 16384}) {
    for (const std::int64_t width : {49152, 151936}) {
      const std::string name =
          "scatter_columns/T:1/" + std::to_string(width) + "/" + std::to_string(n_ids);
      configure(benchmark::RegisterBenchmark(
          name.c_str(), [width, n_ids](benchmark::State& s) { bm_scatter(s, 1, width, n_ids); }));
    }
  }
  struct CacheShape {
    const char* name;
    std::int64_t layers, kv_heads, head_dim;
  };
  for (const CacheShape& c :
       {CacheShape{"llama70b-tp8", 80, 1, 128}, CacheShape{"smollm2-135m", 30, 3, 64}}) {
    const std::string name = "compact_rows/" + std::string(c.name) + "/" +
                             std::to_string(c.layers * 2 * c.kv_heads) + "x" +
                             std::to_string(c.head_dim) + "/n8";
    configure(benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& s) {
      bm_compact_rows(s, c.layers, c.kv_heads, c.head_dim);
    }));
  }
  for (const std::int64_t vocab :
       {std::int64_t{32000}, std::int64_t{151936}, std::int64_t{128256 / 8}}) {
    const std::string name = "verify_reductions/5x" + std::to_string(vocab);
    configure(benchmark::RegisterBenchmark(
        name.c_str(), [vocab](benchmark::State& s) { bm_verify_reductions(s, 5, vocab); }));
  }
  for (const auto& [form, label] :
       {std::pair{NormForm::kPlain, "rmsnorm"}, std::pair{NormForm::kAdd, "add_rmsnorm"},
        std::pair{NormForm::kQuantize, "rmsnorm_quantize"}}) {
    for (const std::int64_t t : {1, 64}) {
      const std::string name = std::string(label) + "/4096/T:" + std::to_string(t);
      configure(benchmark::RegisterBenchmark(
          name.c_str(), [t, form](benchmark::State& s) { bm_rmsnorm(s, t, form); }));
    }
  }
}

void register_benchmarks() {
  register_dense_matmul_benchmarks();
  register_quant_matmul_benchmarks();
  register_position_step_benchmarks();
  register_memory_bound_benchmarks();
}

// Prints the device and its theoretical peak bandwidth; false (with the reason) without one.
bool describe_device() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("cuda_kernel_bench: no CUDA device (%s); nothing to benchmark.\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount() = 0");
    return false;
  }
  int device = 0;
  cudaDeviceProp prop{};
  int memory_clock_khz = 0;
  int bus_width_bits = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, device) !=
          cudaSuccess) {
    std::printf("cuda_kernel_bench: cannot query the CUDA device; nothing to benchmark.\n");
    return false;
  }
  // Double data rate: two transfers per memory clock.
  g_peak_gbps = 2.0 * memory_clock_khz * 1e3 * (bus_width_bits / 8.0) / 1e9;
  std::printf(
      "cuda_kernel_bench: %s (sm_%d%d), %d SMs, %.0f MiB L2, memory clock %d MHz, bus %d "
      "bits: theoretical peak %.0f GB/s\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize / 1048576.0,
      memory_clock_khz / 1000, bus_width_bits, g_peak_gbps);
  benchmark::AddCustomContext("device", prop.name);
  benchmark::AddCustomContext("peak_bandwidth_GBps", std::to_string(g_peak_gbps));
  return true;
}

}  // namespace
}  // namespace selfspec::kernels::cuda

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (!selfspec::kernels::cuda::describe_device()) return 0;
  selfspec::kernels::cuda::register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
