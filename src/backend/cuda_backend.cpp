// The CUDA backend: one GPU per rank (local_rank % device_count). Weights, activations and the KV
// cache live in device memory; the ops are kernels/cuda on one non-blocking stream; decode and
// verification matmuls (T <= kSmallBatch = 64) use the token-count-invariant matmul_small_batch
// (bf16 on the tensor cores where the device has them; Wq|Wk|Wv in one launch: matmul_many;
// gate|up and the SwiGLU in one: matmul_swiglu), prefill chunks cuBLASLt (bf16/f16 activations,
// f32 accumulation). On the tensor-core GEMV the backend offers the fused forms: a sublayer's
// input RMSNorm folded into Q|K|V and gate|up (norm_matmul_many, norm_matmul_swiglu) and the
// residual add into o and down (matmul_accumulate), for every T <= 64 alike; with quantized
// weights the norm quantizes its output in the same launch and the GEMV adds into the residual
// stream (the unfused bits, fewer launches). GGUF's quantized
// formats run as stored (quant_matmul: the activations quantized once per input, the CPU's
// canonical arithmetic, so the same bits as the CPU backend at every T <= 64; matrices of one
// format in one launch, gate|up with the SwiGLU in one: quant_matmul_swiglu; prefill chunks
// dequantize each matrix to a bf16 scratch for cuBLASLt). The per-forward inputs (tokens,
// positions, KV length, tree mask, logit rows) are staged in pinned host memory and copied on the
// stream, and kernels read the KV length from device memory (StepParams), so the same launches can
// be captured in a CUDA graph and replayed. Activations are all-reduced with NCCL on the stream
// when the communicator takes device memory, through host memory otherwise. Every forward pass ends
// by waiting for the stream with a deadline (SELFSPEC_GPU_TIMEOUT_S, default 300 s) so a hung
// collective becomes an error that ends the job.
//
// CUDA graphs (forward_pass): a recordable pass of at most kSmallBatch tokens (decode, draft,
// verification) runs eagerly the first time its launch shape is seen, which sizes every internal
// buffer; the second time its launches are captured into a graph (and the graph launched once);
// from then on the graph is replayed with the new inputs, without calling the launches. Graphs
// are found by the whole shape (GraphKey: every field launch_key hashes, compared in full, so two
// shapes whose hashes collide never share a graph). A shape whose graph fails to instantiate is
// marked and runs eagerly from then on (one warning), instead of being captured again on every
// forward. Prefill chunks, unrecordable passes and --cuda-graphs off run eagerly. A graph points
// at the buffers it was recorded with, so every allocation (allocate(), or an internal buffer
// growing) drops all graphs: a buffer a graph used is only replaced, or its address reused,
// through an allocation.
// Every entry point makes the backend's device current first (a rank's thread may have used
// another device in between), every forward checks n_past + T against the KV capacity of its
// shape (the kernels never write outside the cache, so an overflow would otherwise be silent),
// and host copies wait for the stream under the deadline before a pageable copy can block.
#include "backend/backend.hpp"
#include "backend/quant_rows_builder.hpp"
#include "backend/shard_reductions.hpp"
#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "kernels/cuda/cublaslt_gemm.hpp"
#include "kernels/cuda/cuda_event.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/quant_rows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace selfspec {
namespace {

namespace kcu = kernels::cuda;

// The dense kernels' view of a dense weight (row-major).
kcu::DeviceWeight device_weight(const BackendWeight& w) {
  return {*dense_dtype(w.format), w.data, w.rows, w.cols};
}
// The quantized kernels' view of a quantized weight (make_weight's quantized rows).
kcu::QuantWeight quant_weight(const BackendWeight& w) {
  return {w.format, w.data, w.rows, w.cols};
}

// The whole launch shape, as the graph map's key (launch_key is its hash, computed once). The
// map is searched with a LaunchShape itself (heterogeneous lookup), so a forward builds a key
// only when its shape is new.
struct GraphKey {
  std::vector<std::uint64_t> plan_words;
  std::int64_t n_tokens = 0;
  bool tree_mask = false;
  std::vector<std::int32_t> logit_rows;
  const void* kv_cache = nullptr;
  std::int64_t kv_capacity = 0;
  const void* draft_vocabulary = nullptr;
  bool early_exit = false;
  bool draft_weights = false;
  bool segmented = false;
  std::uint64_t hash = 0;

  explicit GraphKey(const LaunchShape& shape)
      : plan_words(shape.plan_words.begin(), shape.plan_words.end()),
        n_tokens(shape.n_tokens),
        tree_mask(shape.tree_mask),
        logit_rows(shape.logit_rows.begin(), shape.logit_rows.end()),
        kv_cache(shape.kv_cache),
        kv_capacity(shape.kv_capacity),
        draft_vocabulary(shape.draft_vocabulary),
        early_exit(shape.early_exit),
        draft_weights(shape.draft_weights),
        segmented(shape.segmented),
        hash(launch_key(shape)) {}
  // Every field launch_key hashes (recordable apart), compared in full.
  bool matches(const LaunchShape& shape) const {
    return std::ranges::equal(plan_words, shape.plan_words) && n_tokens == shape.n_tokens &&
           tree_mask == shape.tree_mask && std::ranges::equal(logit_rows, shape.logit_rows) &&
           kv_cache == shape.kv_cache && kv_capacity == shape.kv_capacity &&
           draft_vocabulary == shape.draft_vocabulary && early_exit == shape.early_exit &&
           draft_weights == shape.draft_weights && segmented == shape.segmented;
  }
  bool operator==(const GraphKey&) const = default;
};
struct GraphKeyHash {
  using is_transparent = void;
  std::size_t operator()(const GraphKey& key) const { return key.hash; }
  std::size_t operator()(const LaunchShape& shape) const { return launch_key(shape); }
};
struct GraphKeyEqual {
  using is_transparent = void;
  bool operator()(const GraphKey& a, const GraphKey& b) const { return a == b; }
  bool operator()(const GraphKey& a, const LaunchShape& b) const { return a.matches(b); }
  bool operator()(const LaunchShape& a, const GraphKey& b) const { return b.matches(a); }
};

void release_device(void* p) {
  cudaFree(p);
}
void release_pinned(void* p) {
  cudaFreeHost(p);
}

double gpu_timeout_seconds() {
  if (const char* env = std::getenv("SELFSPEC_GPU_TIMEOUT_S")) {
    const double value = std::atof(env);
    if (value > 0.0) return value;
  }
  return 300.0;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    SELFSPEC_CUDA_CHECK(cudaSetDevice(device_));
    cudaDeviceProp props{};
    SELFSPEC_CUDA_CHECK(cudaGetDeviceProperties(&props, device_));
    name_ = props.name;
    total_memory_ = props.totalGlobalMem;
    compute_major_ = props.major;
    compute_minor_ = props.minor;
    SELFSPEC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    step_device_ = allocate(sizeof(kcu::StepParams));
    step_host_ = allocate_pinned(sizeof(kcu::StepParams));
    gemm_ = std::make_unique<kcu::CublasLtGemm>();
  }

  ~CudaBackend() override {
    invalidate_graphs();
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  BackendDescription description() const override {
    return {DeviceKind::kCuda,
            fmt::format("cuda:{} {} ({:.1f} GiB)", device_, name_,
                        static_cast<double>(total_memory_) / (1ull << 30)),
            fmt::format("sm_{}{}", compute_major_, compute_minor_), num_threads()};
  }

  DeviceBuffer allocate(std::size_t bytes) override {
    bind_device();
    invalidate_graphs();  // the new buffer may replace one a graph uses, or take its address
    return allocate_device(bytes);
  }
  // A copy from or to pageable host memory can block the calling thread until the stream's
  // earlier work is done, with no deadline: so the stream is drained under the deadline first,
  // and the copy then waits for nothing but itself.
  void upload(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    bind_device();
    wait_for_stream("upload");
    SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    wait_for_stream("upload");  // src may be pageable and reused
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    bind_device();
    wait_for_stream("download");
    SELFSPEC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    wait_for_stream("download");
  }
  bool host_memory() const override { return false; }
  std::unique_ptr<ShardReductions> make_shard_reductions(VocabShard shard) override {
    return make_cuda_shard_reductions(*this, std::move(shard));
  }

  // Dense formats row-major; ggml's quantized formats as stored, in the quantized-rows layout
  // (kernels/cuda/quant_rows.hpp, built on the host from the CPU's packed values).
  bool runs_format(WeightFormat format) const override {
    return !is_quantized(format) || kcu::quant_rows_layout(format, 1, 32).bits != 0;
  }
  DeviceBuffer make_weight(const HostWeight& host) override {
    SELFSPEC_CHECK(runs_format(host.format), "the CUDA backend does not run {} weights",
                   weight_format_name(host.format));
    if (is_quantized(host.format)) {
      // Built in one host buffer reused by every matrix (it grows to the largest: a few hundred
      // MB for 70B), so the pages are faulted in once and the zeroing is parallel.
      const std::size_t bytes = quant_rows_bytes(host);
      if (quant_staging_.size() < bytes) quant_staging_ = std::vector<std::byte>(bytes);
      const std::span<std::byte> rows(quant_staging_.data(), bytes);
      build_quant_rows_into(host, rows);
      DeviceBuffer out = allocate(bytes);
      upload(out.data(), rows.data(), bytes);
      return out;
    }
    const std::size_t bytes =
        static_cast<std::size_t>(host.rows * host.cols) * dense_element_bytes(host.format);
    DeviceBuffer out = allocate(bytes);
    upload(out.data(), host.data, bytes);
    return out;
  }
  DeviceBuffer select_weight_rows(const BackendWeight& w,
                                  std::span<const std::int32_t> rows) override {
    if (!is_quantized(w.format)) return select_dense_rows(*this, w, rows);
    const kcu::QuantRowsLayout l = kcu::quant_rows_layout(w.format, w.rows, w.cols);
    std::vector<std::byte> bytes(static_cast<std::size_t>(l.bytes));
    download(bytes.data(), w.data, bytes.size());
    return upload_bytes(select_quant_rows(bytes, rows));
  }
  DeviceBuffer select_weight_cols(const BackendWeight& w, std::int64_t begin,
                                  std::int64_t end) override {
    SELFSPEC_CHECK(!is_quantized(w.format),
                   "the CUDA backend selects no columns of {} weights (a fixed-partition "
                   "projection of quantized weights runs on the CPU backend)",
                   weight_format_name(w.format));
    return select_dense_cols(*this, w, begin, end);
  }
  void* native_stream() const override { return stream_; }
  // One kernel on the stream: later forwards, downloads and waits are ordered after it, and a
  // kernel fault surfaces at the next wait. Never recorded: the row list is an argument value.
  void compact_rows(void* base, std::int64_t blocks, std::int64_t block_stride,
                    std::int64_t rows_per_block, std::int64_t row_bytes,
                    std::span<const std::int32_t> from, std::int64_t to) override {
    SELFSPEC_CHECK(!capturing_ && !stage_only_,
                   "compact_rows called inside a forward pass (it runs between passes)");
    bind_device();
    kcu::compact_rows(base, blocks, block_stride, rows_per_block, row_bytes, from, to, stream_);
  }

  std::optional<DeviceBandwidth> measure_device_bandwidth() override {
    bind_device();
    DeviceBandwidth result;
    int clock_khz = 0;
    int bus_bits = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device_) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device_) ==
            cudaSuccess) {
      result.peak_gbps = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) * 1e-9;  // double data rate
    }
    cudaGetLastError();  // the attributes are optional
    // 1 GiB copied device to device (far beyond the L2), best of 5.
    const std::size_t bytes = std::size_t{1} << 30;
    DeviceBuffer a = allocate(bytes);
    DeviceBuffer b = allocate(bytes);
    const kcu::CudaEvent start;
    const kcu::CudaEvent stop;
    float best_ms = 0.0f;
    for (int rep = 0; rep < 6; ++rep) {
      SELFSPEC_CUDA_CHECK(cudaEventRecord(start.get(), stream_));
      SELFSPEC_CUDA_CHECK(
          cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream_));
      SELFSPEC_CUDA_CHECK(cudaEventRecord(stop.get(), stream_));
      wait_for_stream("bandwidth measurement");
      const float ms = kcu::CudaEvent::elapsed_ms(start, stop);
      if (rep > 0 && (best_ms == 0.0f || ms < best_ms)) best_ms = ms;  // rep 0 warms up
    }
    result.measured_copy_gbps = best_ms > 0.0f ? 2.0 * bytes / (best_ms * 1e-3) * 1e-9 : 0.0;
    return result;
  }

  void embedding(const BackendWeight& table, std::int64_t vocab_begin, float* out) override {
    if (is_quantized(table.format)) {
      kcu::quant_embedding(quant_weight(table), vocab_begin,
                           tokens_device_.as<const std::int32_t>(), n_tokens_, out, stream_);
      return;
    }
    kcu::embedding(device_weight(table), vocab_begin, tokens_device_.as<const std::int32_t>(),
                   n_tokens_, out, stream_);
  }
  void rmsnorm(const float* x, const float* weight, float eps, std::int64_t rows, std::int64_t dim,
               float* y) override {
    kcu::rmsnorm(x, weight, eps, rows, dim, y, stream_);
  }
  void add_rmsnorm(float* x, const float* delta, const float* weight, float eps, std::int64_t rows,
                   std::int64_t dim, float* y) override {
    kcu::add_rmsnorm(x, delta, weight, eps, rows, dim, y, stream_);
  }
  void matmul(const float* x, std::int64_t rows, const BackendWeight& w, float* y) override {
    if (is_quantized(w.format) && rows > kcu::kSmallBatch) {
      const BackendWeight one[] = {w};
      float* const out[] = {y};
      quantized_prefill(x, rows, one, out);
      return;
    }
    if (is_quantized(w.format)) {
      quantize_input(x, rows, w.cols);
      kcu::quant_matmul(quantized_input_.data(), rows, quant_weight(w), y, stream_);
      return;
    }
    if (rows <= kcu::kSmallBatch) {
      kcu::matmul_small_batch(x, rows, device_weight(w), y, stream_);
      return;
    }
    const void* operand = x;
    const DType dtype = *dense_dtype(w.format);
    if (dtype != DType::kF32) {
      ensure(converted_, static_cast<std::size_t>(rows * w.cols) * dtype_size(dtype));
      kcu::convert_activations(x, dtype, converted_.data(), rows * w.cols, stream_);
      operand = converted_.data();
    }
    gemm_->matmul(operand, rows, device_weight(w), y, stream_);
  }
  // One fused launch for decode and verification sizes when the matrices share a dtype and a
  // column count (each output bit-identical to its own matmul); otherwise one matmul each.
  void matmul_many(const float* x, std::int64_t rows, std::span<const BackendWeight> ws,
                   std::span<float* const> ys) override {
    SELFSPEC_CHECK(ws.size() == ys.size(), "matmul_many: {} matrices but {} outputs", ws.size(),
                   ys.size());
    if (!ws.empty() && all_quantized_with_cols(ws, ws.front().cols) && rows > kcu::kSmallBatch) {
      quantized_prefill(x, rows, ws, ys);
      return;
    }
    if (!ws.empty() && all_quantized_with_cols(ws, ws.front().cols)) {
      quantize_input(x, rows, ws.front().cols);  // once for every matrix
      quant_matmuls(rows, ws, ys);
      return;
    }
    if (rows <= kcu::kSmallBatch && fusable(ws)) {
      std::array<kcu::MatmulOutput, kcu::kMaxMatmulOutputs> outputs{};
      for (std::size_t i = 0; i < ws.size(); ++i) outputs[i] = {device_weight(ws[i]), ys[i]};
      kcu::matmul_small_batch(x, rows, std::span(outputs.data(), ws.size()), stream_);
      return;
    }
    Backend::matmul_many(x, rows, ws, ys);
  }
  void matmul_swiglu(const float* x, std::int64_t rows, const BackendWeight& w_gate,
                     const BackendWeight& w_up, float* up_scratch, float* out) override {
    const BackendWeight both[] = {w_gate, w_up};
    if (rows <= kcu::kSmallBatch && all_quantized_with_cols(both, w_gate.cols) &&
        w_gate.format == w_up.format && w_gate.rows == w_up.rows) {
      quantize_input(x, rows, w_gate.cols);
      kcu::quant_matmul_swiglu(quantized_input_.data(), rows, quant_weight(w_gate),
                               quant_weight(w_up), out, stream_);
      return;
    }
    if (rows <= kcu::kSmallBatch && fusable(both) && w_gate.rows == w_up.rows) {
      kcu::matmul_swiglu(x, rows, device_weight(w_gate), device_weight(w_up), out, stream_);
      return;
    }
    Backend::matmul_swiglu(x, rows, w_gate, w_up, up_scratch, out);
  }
  // The fused forms, for 1 to kSmallBatch rows (decode and verification sizes alike), unless
  // SELFSPEC_CUDA_FUSE=0: bf16 weights fusable into one launch on the GEMV auto picks (CUDA or
  // tensor cores: the norm folded into the product), and quantized weights of one format (the
  // norm quantizing its output, rmsnorm_quantize, then the quantized GEMVs: the unfused bits).
  bool fuses_norm(std::int64_t rows, std::span<const BackendWeight> ws) const override {
    if (rows < 1 || rows > kcu::kSmallBatch || ws.empty()) return false;
    if (quant_fusable(ws)) return true;
    return fusable(ws) && ws.front().format == WeightFormat::kBF16 &&
           kcu::fused_gemv_available(DType::kBF16);
  }
  void norm_matmul_many(const float* x, const float* norm_weight, float eps, std::int64_t rows,
                        std::span<const BackendWeight> ws, std::span<float* const> ys) override {
    SELFSPEC_CHECK(ws.size() == ys.size() && fuses_norm(rows, ws),
                   "norm_matmul_many: {} matrices, {} outputs, {} rows: not a fused launch",
                   ws.size(), ys.size(), rows);
    if (quant_fusable(ws)) {
      norm_quantize_input(x, norm_weight, eps, rows, ws.front().cols);
      quant_matmuls(rows, ws, ys);
      return;
    }
    std::array<kcu::MatmulOutput, kcu::kMaxMatmulOutputs> outputs{};
    for (std::size_t i = 0; i < ws.size(); ++i) outputs[i] = {device_weight(ws[i]), ys[i]};
    kcu::matmul_normed(x, norm_weight, eps, rows, std::span(outputs.data(), ws.size()), stream_);
  }
  void norm_matmul_swiglu(const float* x, const float* norm_weight, float eps, std::int64_t rows,
                          const BackendWeight& w_gate, const BackendWeight& w_up,
                          float* out) override {
    const BackendWeight both[] = {w_gate, w_up};
    SELFSPEC_CHECK(fuses_norm(rows, both) && w_gate.rows == w_up.rows,
                   "norm_matmul_swiglu: gate {} x {}, up {} x {}, {} rows: not a fused launch",
                   w_gate.rows, w_gate.cols, w_up.rows, w_up.cols, rows);
    if (quant_fusable(both)) {
      norm_quantize_input(x, norm_weight, eps, rows, w_gate.cols);
      kcu::quant_matmul_swiglu(quantized_input_.data(), rows, quant_weight(w_gate),
                               quant_weight(w_up), out, stream_);
      return;
    }
    kcu::matmul_normed_swiglu(x, norm_weight, eps, rows, device_weight(w_gate), device_weight(w_up),
                              out, stream_);
  }
  bool fuses_residual_add(std::int64_t rows, const BackendWeight& w) const override {
    return fuses_norm(rows, std::span(&w, 1));
  }
  void matmul_accumulate(const float* x, std::int64_t rows, const BackendWeight& w,
                         float* y) override {
    SELFSPEC_CHECK(fuses_residual_add(rows, w), "matmul_accumulate: {} rows of {} x {}: not fused",
                   rows, w.rows, w.cols);
    if (is_quantized(w.format)) {
      quantize_input(x, rows, w.cols);
      kcu::quant_matmul_accumulate(quantized_input_.data(), rows, quant_weight(w), y, stream_);
      return;
    }
    kcu::matmul_accumulate(x, rows, device_weight(w), y, stream_);
  }
  void add_bias(float* x, const float* bias, std::int64_t rows, std::int64_t dim) override {
    kcu::add_bias(x, bias, rows, dim, stream_);
  }
  void rope(float* x, std::int64_t row_stride, std::int64_t n_heads, std::int64_t head_dim,
            const RopeTable& table) override {
    kcu::rope(x, n_tokens_, row_stride, n_heads, head_dim,
              positions_device_.as<const std::int32_t>(), table.cos_sin, table.positions, stream_);
  }
  void write_kv(const float* k, const float* v, std::int64_t kv_heads, std::int64_t head_dim,
                const KvLayer& cache) override {
    kcu::write_kv(k, v, n_tokens_, kv_heads, head_dim, cache.head_stride,
                  step_device_.as<const kcu::StepParams>(), cache.keys, cache.values, cache.dtype,
                  stream_);
  }
  void rope_write_kv(const RopeKv& args, const RopeTable& table, const KvLayer& cache) override {
    kcu::RopeKvArgs a;
    a.q = args.q;
    a.q_stride = args.q_stride;
    a.n_q_heads = args.n_q_heads;
    a.k = args.k;
    a.k_stride = args.kv_heads * args.head_dim;
    a.v = args.v;
    a.kv_heads = args.kv_heads;
    a.head_dim = args.head_dim;
    a.capacity = cache.head_stride;
    a.kv_dtype = cache.dtype;
    kcu::rope_write_kv(a, n_tokens_, positions_device_.as<const std::int32_t>(), table.cos_sin,
                       table.positions, step_device_.as<const kcu::StepParams>(), cache.keys,
                       cache.values, stream_);
  }
  // The RoPE form (kernels/cuda/position_step.hpp) for 1 to kSmallBatch rows alike, unless
  // SELFSPEC_CUDA_FUSE=0: Wq|Wk|Wv in bf16 on the CUDA-core GEMV (the one auto picks for bf16;
  // the tensor-core GEMV has no RoPE form), head_dim a multiple of 4; or quantized of one cols
  // (a launch per run of one format: Q4_K_M's Wq|Wk, then its Q6_K Wv), head_dim a multiple of 8.
  bool fuses_rope_kv(std::int64_t rows, std::span<const BackendWeight> ws,
                     std::int64_t head_dim) const override {
    if (rows < 1 || rows > kcu::kSmallBatch || ws.size() != 3 || head_dim <= 0) return false;
    if (all_quantized_with_cols(ws, ws.front().cols)) {
      return kcu::quant_fusion_available() && head_dim % 8 == 0;
    }
    return fusable(ws) && ws.front().format == WeightFormat::kBF16 &&
           kcu::fused_gemv_available(DType::kBF16) &&
           kcu::auto_gemv_kernel(DType::kBF16) == kcu::GemvKernel::kCudaCores && head_dim % 4 == 0;
  }
  void matmul_rope_kv(const float* x, const float* norm_weight, float eps, std::int64_t rows,
                      std::span<const BackendWeight> ws, const RopeKv& args, const RopeTable& table,
                      const KvLayer& cache) override {
    SELFSPEC_CHECK(
        fuses_rope_kv(rows, ws, args.head_dim) && (norm_weight == nullptr || fuses_norm(rows, ws)),
        "matmul_rope_kv: {} matrices, {} rows, head_dim {}: not a fused launch", ws.size(), rows,
        args.head_dim);
    const kcu::PositionStep step = position_step(args, table, cache);
    const auto* step_params = step_device_.as<const kcu::StepParams>();
    constexpr kcu::HeadOutput kOutputs[] = {
        kcu::HeadOutput::kRotated, kcu::HeadOutput::kRotatedIntoCache, kcu::HeadOutput::kIntoCache};
    if (!is_quantized(ws.front().format)) {
      std::array<kcu::HeadMatmul, 3> outputs{};
      for (std::size_t i = 0; i < 3; ++i) outputs[i] = {device_weight(ws[i]), kOutputs[i]};
      kcu::matmul_rope_kv(x, norm_weight, eps, rows, outputs, step, step_params, stream_);
      return;
    }
    if (norm_weight != nullptr) {
      norm_quantize_input(x, norm_weight, eps, rows, ws.front().cols);
    } else {
      quantize_input(x, rows, ws.front().cols);
    }
    for_each_format_run(ws, [&](std::size_t begin, std::size_t n) {
      std::array<kcu::QuantHeadMatmul, 3> run{};
      for (std::size_t i = 0; i < n; ++i) {
        run[i] = {quant_weight(ws[begin + i]), kOutputs[begin + i]};
      }
      kcu::quant_matmul_rope_kv(quantized_input_.data(), rows, std::span(run.data(), n), step,
                                step_params, stream_);
    });
  }
  void attention(const float* q, const KvLayer& cache, std::int64_t n_q_heads,
                 std::int64_t n_kv_heads, std::int64_t head_dim, float scale, float* out) override {
    const kcu::AttentionDims dims{n_tokens_, n_q_heads,         n_kv_heads,
                                  head_dim,  cache.head_stride, cache.dtype};
    ensure(attention_workspace_, kcu::attention_workspace_bytes(dims));
    kcu::attention(q, cache.keys, cache.values, dims, step_device_.as<const kcu::StepParams>(),
                   has_mask_ ? mask_device_.as<const std::uint8_t>() : nullptr, scale, out,
                   attention_workspace_.data(), stream_);
  }
  void swiglu(const float* gate, const float* up, float* out, std::int64_t n) override {
    kcu::swiglu(gate, up, out, n, stream_);
  }
  void add_inplace(float* x, const float* y, std::int64_t n) override {
    kcu::add_inplace(x, y, n, stream_);
  }
  void gather_rows(const float* src, std::int64_t dim, float* dst) override {
    kcu::gather_rows(src, rows_device_.as<const std::int32_t>(), n_rows_, dim, dst, stream_);
  }
  void scatter_columns(const float* values, std::int64_t rows, const std::int32_t* ids,
                       std::int64_t n_ids, std::int64_t width, float fill, float* out) override {
    kcu::scatter_columns(values, rows, ids, n_ids, width, fill, out, stream_);
  }
  void all_reduce(Communicator& comm, float* data, std::int64_t count) override {
    if (comm.supports_device_buffers()) {
      comm.all_reduce_sum_device(data, static_cast<std::size_t>(count), stream_);
      return;
    }
    // Host communicator (e.g. several ranks sharing a GPU for logic tests): stage through host.
    host_staging_.resize(static_cast<std::size_t>(count));
    download(host_staging_.data(), data, host_staging_.size() * sizeof(float));
    comm.all_reduce_sum(host_staging_);
    upload(data, host_staging_.data(), host_staging_.size() * sizeof(float));
  }
  bool graphs_enabled() const override { return graphs_enabled_; }
  void set_graphs_enabled(bool enabled) override {
    if (!enabled) invalidate_graphs();
    graphs_enabled_ = enabled;
  }

 private:
  void forward_pass(const ForwardInputs& inputs, const LaunchShape& shape,
                    const std::function<void()>& launches) override {
    bind_device();
    check_kv_room(inputs, shape);
    if (!graphs_enabled_ || !shape.recordable || shape.n_tokens > kcu::kSmallBatch) {
      Backend::forward_pass(inputs, shape, launches);
      return;
    }
    // Not used after the launches: a growing buffer clears graphs_.
    Graph& graph = graph_of(shape);
    if (graph.exec != nullptr) {
      replay(graph.exec, inputs);
    } else if (graph.failed || graph.seen++ == 0) {
      begin_forward(inputs);
      launches();
    } else if (!capture(shape, inputs, launches)) {
      begin_forward(inputs);  // the capture ran nothing: run the pass eagerly
      launches();
    }
    end_forward();
  }

  // The kernels never write a K/V row outside the cache; an input that would needs an error here.
  static void check_kv_room(const ForwardInputs& inputs, const LaunchShape& shape) {
    if (shape.kv_capacity <= 0 || shape.segmented) return;
    SELFSPEC_CHECK(inputs.n_past >= 0 && inputs.n_past + shape.n_tokens <= shape.kv_capacity,
                   "a forward of {} tokens after {} cached needs {} KV slots; the cache holds {}",
                   shape.n_tokens, inputs.n_past, inputs.n_past + shape.n_tokens,
                   shape.kv_capacity);
  }

  // The position step's operands for the RoPE-form GEMVs (the pass's positions, the cache).
  kcu::PositionStep position_step(const RopeKv& args, const RopeTable& table,
                                  const KvLayer& cache) const {
    return {.q = args.q,
            .q_rows = args.q_stride,
            .k_cache = cache.keys,
            .v_cache = cache.values,
            .capacity = cache.head_stride,
            .kv_dtype = cache.dtype,
            .head_dim = args.head_dim,
            .positions = positions_device_.as<const std::int32_t>(),
            .table = table.cos_sin,
            .table_positions = table.positions};
  }

  // Dense matrices of one format and column count (one fused GEMV launch).
  static bool fusable(std::span<const BackendWeight> ws) {
    if (ws.empty() || ws.size() > static_cast<std::size_t>(kcu::kMaxMatmulOutputs)) return false;
    for (const BackendWeight& w : ws) {
      if (is_quantized(w.format) || w.format != ws.front().format || w.cols != ws.front().cols) {
        return false;
      }
    }
    return true;
  }
  // Quantized matrices of one format and cols, as many as one launch takes, and fusion on.
  static bool quant_fusable(std::span<const BackendWeight> ws) {
    if (ws.empty() || ws.size() > static_cast<std::size_t>(kcu::kMaxMatmulOutputs)) return false;
    for (const BackendWeight& w : ws) {
      if (!is_quantized(w.format) || w.format != ws.front().format || w.cols != ws.front().cols) {
        return false;
      }
    }
    return kcu::quant_fusion_available();
  }
  static bool all_quantized_with_cols(std::span<const BackendWeight> ws, std::int64_t cols) {
    for (const BackendWeight& w : ws) {
      if (!is_quantized(w.format) || w.cols != cols) return false;
    }
    return true;
  }

  // A prefill chunk (more than kSmallBatch rows) times quantized matrices of one cols: x
  // converted to bf16 once, each matrix dequantized to bf16 into a scratch the size of the
  // largest, then cuBLASLt (the dense prefill's path: close to quant_matmul's products, shared
  // by the plain and the speculative run). The GEMV would stream the weights once per 8 tokens.
  void quantized_prefill(const float* x, std::int64_t rows, std::span<const BackendWeight> ws,
                         std::span<float* const> ys) {
    const std::int64_t cols = ws.front().cols;
    ensure(converted_, static_cast<std::size_t>(rows * cols) * sizeof(std::uint16_t));
    kcu::convert_activations(x, DType::kBF16, converted_.data(), rows * cols, stream_);
    for (std::size_t i = 0; i < ws.size(); ++i) {
      const BackendWeight& w = ws[i];
      ensure(dequantized_, static_cast<std::size_t>(w.rows * w.cols) * sizeof(std::uint16_t));
      kcu::quant_dequantize_bf16(quant_weight(w), dequantized_.data(), stream_);
      gemm_->matmul(converted_.data(), rows,
                    kcu::DeviceWeight{DType::kBF16, dequantized_.data(), w.rows, w.cols}, ys[i],
                    stream_);
    }
  }
  // launch(begin, n) for each run ws[begin, begin + n) of one format, at most kMaxMatmulOutputs
  // long: the quantized GEMVs' launches (a Q4_K_M file mixes Q4_K and Q6_K).
  template <class Launch>
  static void for_each_format_run(std::span<const BackendWeight> ws, Launch&& launch) {
    std::size_t begin = 0;
    while (begin < ws.size()) {
      std::size_t n = 1;
      while (begin + n < ws.size() && n < static_cast<std::size_t>(kcu::kMaxMatmulOutputs) &&
             ws[begin + n].format == ws[begin].format) {
        ++n;
      }
      launch(begin, n);
      begin += n;
    }
  }
  // The quantized matrices times quantized_input_, a launch per run of one format, every output
  // the bits of its own launch.
  void quant_matmuls(std::int64_t rows, std::span<const BackendWeight> ws,
                     std::span<float* const> ys) {
    for_each_format_run(ws, [&](std::size_t begin, std::size_t n) {
      std::array<kcu::QuantMatmulOutput, kcu::kMaxMatmulOutputs> run{};
      for (std::size_t i = 0; i < n; ++i) run[i] = {quant_weight(ws[begin + i]), ys[begin + i]};
      kcu::quant_matmul(quantized_input_.data(), rows, std::span(run.data(), n), stream_);
    });
  }
  // rmsnorm(x) quantized into quantized_input_ (one launch; the normalised x is not stored).
  void norm_quantize_input(const float* x, const float* norm_weight, float eps, std::int64_t rows,
                           std::int64_t cols) {
    ensure(quantized_input_, kcu::quant_activations_bytes(rows, cols));
    kcu::rmsnorm_quantize(x, norm_weight, eps, rows, cols, quantized_input_.data(), stream_);
  }
  // x [rows × cols] quantized into quantized_input_ (the quantized matmuls' activations).
  void quantize_input(const float* x, std::int64_t rows, std::int64_t cols) {
    ensure(quantized_input_, kcu::quant_activations_bytes(rows, cols));
    kcu::quantize_activations(x, rows, cols, quantized_input_.data(), stream_);
  }
  // A device copy of host bytes (a new weight).
  DeviceBuffer upload_bytes(const std::vector<std::byte>& bytes) {
    DeviceBuffer out = allocate(bytes.size());
    upload(out.data(), bytes.data(), bytes.size());
    return out;
  }

  // Makes this backend's device current for the calling thread.
  void bind_device() const { SELFSPEC_CUDA_CHECK(cudaSetDevice(device_)); }

  void begin_forward(const ForwardInputs& inputs) override {
    n_tokens_ = static_cast<std::int64_t>(inputs.tokens.size());
    has_mask_ = inputs.tree_mask != nullptr;
    const std::size_t token_bytes = inputs.tokens.size() * sizeof(std::int32_t);
    const std::size_t mask_bytes = has_mask_ ? inputs.tokens.size() * inputs.tokens.size() : 0;
    ensure(tokens_device_, token_bytes);
    ensure(positions_device_, token_bytes);
    ensure_pinned(tokens_host_, token_bytes);
    ensure_pinned(positions_host_, token_bytes);
    std::memcpy(tokens_host_.data(), inputs.tokens.data(), token_bytes);
    std::memcpy(positions_host_.data(), inputs.positions.data(), token_bytes);
    copy_async(tokens_device_, tokens_host_, token_bytes);
    copy_async(positions_device_, positions_host_, token_bytes);
    step_host_.as<kcu::StepParams>()->n_past = static_cast<std::int32_t>(inputs.n_past);
    copy_async(step_device_, step_host_, sizeof(kcu::StepParams));
    if (has_mask_) {
      ensure(mask_device_, mask_bytes);
      ensure_pinned(mask_host_, mask_bytes);
      std::memcpy(mask_host_.data(), inputs.tree_mask, mask_bytes);
      copy_async(mask_device_, mask_host_, mask_bytes);
    }
    n_rows_ = static_cast<std::int64_t>(inputs.logit_rows.size());
    const std::size_t row_bytes = inputs.logit_rows.size() * sizeof(std::int32_t);
    ensure(rows_device_, row_bytes);
    ensure_pinned(rows_host_, row_bytes);
    std::memcpy(rows_host_.data(), inputs.logit_rows.data(), row_bytes);
    copy_async(rows_device_, rows_host_, row_bytes);
  }
  void end_forward() override { wait_for_stream("forward pass"); }

  // Records the pass's launches (begin_forward's copies included) as the graph of `shape`, then
  // launches the graph once. When the graph cannot be instantiated, marks the shape to run eagerly
  // from now on and returns false (nothing of the pass has run then).
  bool capture(const LaunchShape& shape, const ForwardInputs& inputs,
               const std::function<void()>& launches) {
    SELFSPEC_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    try {
      begin_forward(inputs);
      launches();
    } catch (...) {
      abandon_capture();
      throw;
    }
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    SELFSPEC_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    Graph& entry = graph_of(shape);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      entry.failed = true;
      if (!warned_instantiation_) {
        warned_instantiation_ = true;
        log::warn("CUDA graph instantiation failed ({}): passes of that shape run eagerly",
                  cudaGetErrorString(status));
      }
      return false;
    }
    entry.exec = exec;
    SELFSPEC_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    return true;
  }
  // Ends a capture that failed part-way, so the stream takes work again.
  void abandon_capture() noexcept {
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) {
      cudaGraphDestroy(graph);
    }
    cudaGetLastError();  // the error being thrown is the one to report
  }
  // Stages `inputs` in the pinned buffers the recorded copies read from and launches the graph
  // (the recorded launches never change shape: see cuda_kernels.hpp).
  void replay(cudaGraphExec_t exec, const ForwardInputs& inputs) {
    stage_only_ = true;  // begin_forward's copies are part of the graph
    try {
      begin_forward(inputs);
    } catch (...) {
      stage_only_ = false;
      throw;
    }
    stage_only_ = false;
    SELFSPEC_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
  }
  // Forgets every recorded graph (and how often each key was seen).
  void invalidate_graphs() {
    for (auto& [key, graph] : graphs_) {
      if (graph.exec != nullptr) cudaGraphExecDestroy(graph.exec);
    }
    graphs_.clear();
  }
  DeviceBuffer allocate_device(std::size_t bytes) {
    if (bytes == 0) return {};
    void* data = nullptr;
    SELFSPEC_CUDA_CHECK(cudaMalloc(&data, bytes));
    DeviceBuffer buffer(data, bytes, release_device);
    SELFSPEC_CUDA_CHECK(cudaMemsetAsync(data, 0, bytes, stream_));
    SELFSPEC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return buffer;
  }
  DeviceBuffer allocate_pinned(std::size_t bytes) {
    void* data = nullptr;
    SELFSPEC_CUDA_CHECK(cudaMallocHost(&data, bytes));
    std::memset(data, 0, bytes);
    return DeviceBuffer(data, bytes, release_pinned);
  }
  void ensure(DeviceBuffer& buffer, std::size_t bytes) {
    if (buffer.bytes() < bytes) grow(buffer, bytes, false);
  }
  void ensure_pinned(DeviceBuffer& buffer, std::size_t bytes) {
    if (buffer.bytes() < bytes) grow(buffer, bytes, true);
  }
  void grow(DeviceBuffer& buffer, std::size_t bytes, bool pinned) {
    // A key's first (eager) forward sizes every buffer, so capture and replay never get here.
    if (capturing_ || stage_only_) {
      fail("CUDA graph recording needs a buffer to grow ({} bytes); record after an eager run",
           bytes);
    }
    wait_for_stream("reallocation");  // the old buffer may still be in use by queued work
    invalidate_graphs();              // recorded launches point at the old buffer
    buffer = pinned ? allocate_pinned(bytes) : allocate_device(bytes);
  }
  void copy_async(DeviceBuffer& device, const DeviceBuffer& host, std::size_t bytes) {
    if (bytes == 0 || stage_only_) return;
    SELFSPEC_CUDA_CHECK(
        cudaMemcpyAsync(device.data(), host.data(), bytes, cudaMemcpyHostToDevice, stream_));
  }
  // Polls the stream with a deadline instead of blocking forever on a collective whose peer died.
  void wait_for_stream(const char* what) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(gpu_timeout_seconds());
    for (;;) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) SELFSPEC_CUDA_CHECK(status);
      if (std::chrono::steady_clock::now() > deadline) {
        fail(
            "the GPU did not finish the {} within {:.0f} s (a collective may be waiting for a "
            "rank that died; SELFSPEC_GPU_TIMEOUT_S sets the deadline)",
            what, gpu_timeout_seconds());
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  int device_;
  std::string name_;
  std::size_t total_memory_ = 0;
  int compute_major_ = 0;
  int compute_minor_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<kcu::CublasLtGemm> gemm_;
  struct Graph {
    int seen = 0;
    bool failed = false;  // instantiation failed: always eager
    cudaGraphExec_t exec = nullptr;
  };
  std::unordered_map<GraphKey, Graph, GraphKeyHash, GraphKeyEqual> graphs_;
  // The graph record of `shape`, made on its first sight.
  Graph& graph_of(const LaunchShape& shape) {
    const auto it = graphs_.find(shape);
    if (it != graphs_.end()) return it->second;
    return graphs_.emplace(GraphKey(shape), Graph{}).first->second;
  }
  bool warned_instantiation_ = false;
  bool graphs_enabled_ = true;
  bool capturing_ = false;
  bool stage_only_ = false;
  std::int64_t n_tokens_ = 0;
  std::int64_t n_rows_ = 0;
  bool has_mask_ = false;
  DeviceBuffer step_device_, step_host_;
  DeviceBuffer tokens_device_, tokens_host_, positions_device_, positions_host_;
  DeviceBuffer mask_device_, mask_host_, rows_device_, rows_host_;
  DeviceBuffer converted_, attention_workspace_, quantized_input_;
  DeviceBuffer dequantized_;              // a quantized prefill's bf16 weights (quantized_prefill)
  std::vector<std::byte> quant_staging_;  // make_weight's quantized rows on the host
  std::vector<float> host_staging_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) {
  return std::make_unique<CudaBackend>(device);
}

int cuda_device_count() {
  return kcu::device_count();
}

std::optional<std::string> cuda_unavailable_reason() {
  if (kcu::device_count() > 0) return std::nullopt;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    return std::string("no CUDA device (") + cudaGetErrorString(status) + ")";
  return std::string("no CUDA device (cudaGetDeviceCount() = 0)");
}

}  // namespace selfspec
