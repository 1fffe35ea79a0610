// The compute backend of one rank: where weights, activations and the KV cache live, and the
// kernels of a forward pass. One implementation per file: CpuBackend (host memory, kernels/cpu,
// AVX2/scalar) and CudaBackend (one GPU, kernels/cuda + cuBLASLt, NCCL for activations).
// LlamaModel::forward is written once against this interface.
//
// A forward pass is: begin_forward(inputs) — the per-call values (tokens, positions, KV length,
// tree mask) go to backend memory —, then the ops in order, then end_forward() (the CUDA backend
// waits for its stream there, under the NCCL watchdog). All pointers passed to ops are backend
// memory. This header includes no CUDA or MPI headers.
#pragma once

#include "comm/communicator.hpp"
#include "core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace selfspec {

enum class DeviceKind { kCpu, kCuda };
std::string_view device_kind_name(DeviceKind kind);
// Parses "cpu" / "cuda"; throws naming the option otherwise.
DeviceKind parse_device_kind(std::string_view text);

// An owning allocation in a backend's memory (move-only RAII; release with the backend's
// deallocator).
class DeviceBuffer {
 public:
  using Release = void (*)(void*);
  DeviceBuffer() = default;
  DeviceBuffer(void* data, std::size_t bytes, Release release)
      : data_(data), bytes_(bytes), release_(release) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void reset() noexcept;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Release release_ = nullptr;
};

// A weight matrix view in backend memory: row-major [rows × cols] in its storage dtype.
struct BackendWeight {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// What changes from one forward call to the next.
struct ForwardInputs {
  std::span<const std::int32_t> tokens;
  std::span<const std::int32_t> positions;
  std::int64_t n_past = 0;                   // KV slots before the new tokens
  const std::uint8_t* tree_mask = nullptr;   // host, T × T; nullptr: causal
  std::span<const std::int32_t> logit_rows;  // token rows whose logits are wanted
};

// How a forward pass runs on a backend with graph support (CUDA graphs): the first time a
// launch shape (key) is seen it runs eagerly, which also sizes every buffer; the second time its
// launches are captured into a graph; from then on the graph is replayed with new inputs.
enum class GraphMode { kEager, kCapture, kReplay };

// A device's memory bandwidth: measured with a large device-to-device copy (bytes read + bytes
// written per second, best of several) and the datasheet peak (memory clock × bus width).
struct DeviceBandwidth {
  double measured_copy_gbps = 0.0;
  double peak_gbps = 0.0;
};

// What a backend runs on, for start lines and reports.
struct BackendDescription {
  DeviceKind kind = DeviceKind::kCpu;
  std::string device;    // "cpu", "cuda:0 NVIDIA H200 (139.8 GiB)"
  std::string isa;       // the kernels' instruction set: "avx2" or "scalar" (CPU), "sm_90" (CUDA)
  int host_threads = 0;  // worker threads of this rank
  // "cpu (avx2, 2 threads)", "cuda:0 NVIDIA H200 (139.8 GiB), sm_90".
  std::string summary() const;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual BackendDescription description() const = 0;

  // --- memory -------------------------------------------------------------------------------
  // Zero-initialised.
  virtual DeviceBuffer allocate(std::size_t bytes) = 0;
  virtual void upload(void* dst, const void* host_src, std::size_t bytes) = 0;
  // Waits for pending work on the data first.
  virtual void download(void* host_dst, const void* src, std::size_t bytes) = 0;
  // True when backend memory is ordinary host memory (a checkpoint slice can be read into it).
  virtual bool host_memory() const = 0;
  // For device memory: its bandwidth (benchmarks report decode against it). nullopt for host
  // memory, which the benchmark measures itself.
  virtual std::optional<DeviceBandwidth> measure_device_bandwidth() { return std::nullopt; }

  // --- a forward pass -----------------------------------------------------------------------
  virtual void begin_forward(const ForwardInputs& inputs) = 0;
  // out[t] = embedding row of the current token t (zeros when another rank owns it).
  virtual void embedding(const BackendWeight& table, std::int64_t vocab_begin, float* out) = 0;
  virtual void rmsnorm(const float* x, const float* weight, float eps, std::int64_t rows,
                       std::int64_t dim, float* y) = 0;
  // The residual add fused with the next sublayer's norm: x += delta, then y = rmsnorm(x).
  virtual void add_rmsnorm(float* x, const float* delta, const float* weight, float eps,
                           std::int64_t rows, std::int64_t dim, float* y) = 0;
  // y[r] = x[r] · Wᵀ for `rows` token rows. Per-output reduction order independent of `rows`
  // for the decode and verification sizes (token-count invariance).
  virtual void matmul(const float* x, std::int64_t rows, const BackendWeight& w, float* y) = 0;
  virtual void add_bias(float* x, const float* bias, std::int64_t rows, std::int64_t dim) = 0;
  // RoPE at the current positions on n_heads head vectors per current token row.
  virtual void rope(float* x, std::int64_t row_stride, std::int64_t n_heads, std::int64_t head_dim,
                    const float* inv_freq) = 0;
  // Writes the current tokens' K/V rows into the cache at slots n_past + t.
  virtual void write_kv(const float* k, const float* v, std::int64_t kv_heads,
                        std::int64_t head_dim, std::int64_t capacity, float* k_cache,
                        float* v_cache) = 0;
  // Attention of the current tokens over the cache (n_past, mask of begin_forward).
  virtual void attention(const float* q, const float* k_cache, const float* v_cache,
                         std::int64_t n_q_heads, std::int64_t n_kv_heads, std::int64_t head_dim,
                         std::int64_t capacity, float scale, float* out) = 0;
  virtual void swiglu(const float* gate, const float* up, float* out, std::int64_t n) = 0;
  virtual void add_inplace(float* x, const float* y, std::int64_t n) = 0;
  // dst[i] = src[logit_rows[i]] (rows of `dim` floats; the current forward's logit rows).
  virtual void gather_rows(const float* src, std::int64_t dim, float* dst) = 0;
  // Sum over the tensor-parallel ranks, in place (device collectives where the communicator
  // takes device memory, otherwise through host memory).
  virtual void all_reduce(Communicator& comm, float* data, std::int64_t count) = 0;
  // Completes the forward pass (all work done, errors surfaced).
  virtual void end_forward() = 0;

  // --- graphs (backends that record and replay launches; see GraphMode) ----------------------
  virtual bool graphs_enabled() const { return false; }
  // Turns recording/replay off or on (--cuda-graphs); no effect on backends without graphs.
  virtual void set_graphs_enabled(bool enabled) { (void)enabled; }
  // What to do for a forward with launch shape `key`.
  virtual GraphMode graph_mode(std::uint64_t key) {
    (void)key;
    return GraphMode::kEager;
  }
  // kCapture: begin_capture() before begin_forward, end_capture(key) after the last op (it also
  // launches the recorded work once).
  virtual void begin_capture() {}
  virtual void end_capture(std::uint64_t key) { (void)key; }
  // kReplay: stages `inputs` and launches the recorded work (instead of begin_forward + ops).
  virtual void replay(std::uint64_t key, const ForwardInputs& inputs) {
    (void)key;
    (void)inputs;
  }
  // Forgets every recorded graph (their buffers moved).
  virtual void invalidate_graphs() {}
};

std::unique_ptr<Backend> make_cpu_backend();

// The CUDA backend on `device` (throws when CUDA is not built or no such device).
std::unique_ptr<Backend> make_cuda_backend(int device);
// nullopt when a CUDA device is usable, else why not.
std::optional<std::string> cuda_unavailable_reason();
int cuda_device_count();

}  // namespace selfspec
