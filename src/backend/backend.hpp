// The compute backend of one rank: where weights, activations and the KV cache live, and the
// kernels of a forward pass. One implementation per file: CpuBackend (host memory, kernels/cpu,
// AVX2/scalar) and CudaBackend (one GPU, kernels/cuda + cuBLASLt, NCCL for activations).
// LlamaModel::forward is written once against this interface.
//
// A forward pass is one call: run_forward(inputs, shape, launches). `inputs` are the per-call
// values (tokens, positions, KV length, tree mask, logit rows); `shape` is everything that shapes
// the launches (LaunchShape); `launches` issues the ops of the pass in order. The backend stages
// the inputs in its memory, runs the launches and returns when all work is done (the CUDA backend
// waits for its stream under a deadline, so a hung collective becomes an error). All pointers
// passed to ops are backend memory, and ops are only called from inside `launches`.
//
// How the launches run is the backend's business: the CPU backend runs them eagerly; the CUDA
// backend records small recordable passes as CUDA graphs, keyed by launch_key(shape), and replays
// them with new inputs (without calling `launches`). A recorded graph points at backend buffers,
// so the CUDA backend drops its graphs whenever it allocates; the caller only has to describe the
// shape truthfully. This header includes no CUDA or MPI headers.
#pragma once

#include "backend/vocab_shard.hpp"

#include "comm/communicator.hpp"
#include "core/dtype.hpp"
#include "core/weight_format.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace selfspec {

class ShardReductions;

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

// A weight matrix [rows × cols] in backend memory, in its format and in the backend's layout for
// that format: row-major for f32 and f16 everywhere and for bf16 on the CUDA backend; row panels
// for bf16 and the quantized formats on the CPU backend (kernels/cpu/packed_weights.hpp). Only the
// backend that made a weight (make_weight) reads its data.
struct BackendWeight {
  WeightFormat format = WeightFormat::kF32;
  const void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// A weight matrix in host memory as the loader read it, for make_weight: dense formats row-major
// [rows × cols] (row_stride = cols elements); quantized formats as a GGUF file stores a slice
// (kernels/cpu/packed_weights.hpp's GgufRows: whole blocks per row, row_stride bytes apart, the
// slice's columns [skip, skip + cols) of them).
struct HostWeight {
  WeightFormat format = WeightFormat::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const void* data = nullptr;
  std::int64_t row_stride_bytes = 0;  // quantized formats
  std::int64_t skip = 0;              // quantized formats
};

// One layer's K and V in a KV cache (model/kv_cache.hpp), in backend memory: each is
// [kv_heads][head_stride slots][head_dim] elements of `dtype`, f32 or bf16. A bf16 cache stores
// every written f32 value rounded to nearest even (core/dtype.hpp's f32_to_bf16) and reads it
// widened exactly, so attention over a bf16 cache equals, bit for bit, attention over an f32 cache
// holding the same rounded values (the exact reference of the bf16 kernels' tests).
struct KvLayer {
  void* keys = nullptr;
  void* values = nullptr;
  DType dtype = DType::kF32;
  std::int64_t head_stride = 0;  // slots from one KV head's rows to the next
};

// A RoPE table in backend memory (kernels/cpu/rope.hpp's layout): for positions [0, positions),
// row p holds head_dim / 2 cosines then head_dim / 2 sines, f32, made on the host once (what
// kernels/cpu/rope.hpp computes per call), so RoPE is loads on every backend and the same bits.
// Every current position must be below `positions` (LlamaModel grows the table before a forward).
struct RopeTable {
  const float* cos_sin = nullptr;
  std::int64_t positions = 0;
};

// One independent sequence of a forward over several (model/sequence_batch.hpp): its tokens are
// rows [first_token, first_token + n_tokens) of the pass; its KV rows live at cache slots
// [kv_offset, kv_offset + capacity) of every head, its past at [kv_offset, kv_offset + n_past);
// its new tokens' K/V go to slots kv_offset + n_past + i, and each of them attends to its own
// sequence's slots only: causally, or under the segment's tree mask (a verified token tree: new
// token i sees its past and the new tokens j with tree_mask[i·n_tokens + j] != 0).
struct KvSegment {
  std::int64_t first_token = 0;
  std::int64_t n_tokens = 0;
  std::int64_t kv_offset = 0;
  std::int64_t n_past = 0;
  const std::uint8_t* tree_mask = nullptr;  // host, n_tokens × n_tokens; nullptr: causal
};

// What changes from one forward call to the next.
struct ForwardInputs {
  std::span<const std::int32_t> tokens;
  std::span<const std::int32_t> positions;
  std::int64_t n_past = 0;                   // KV slots before the new tokens
  const std::uint8_t* tree_mask = nullptr;   // host, T × T; nullptr: causal
  std::span<const std::int32_t> logit_rows;  // token rows whose logits are wanted
  // Empty: one sequence (n_past, tree_mask). Otherwise the pass's independent sequences, in
  // token order, covering every token (each with its own tree mask if any: tree_mask and n_past
  // are unused). Host-memory
  // backends only: a device backend throws.
  std::span<const KvSegment> segments;
};

// What shapes the launches of a forward pass, in backend terms: two passes with equal shapes and
// no allocation between them issue the same launches on the same buffers; they differ only in
// their ForwardInputs' values (tokens, positions, KV length, tree-mask entries). One exception:
// on a host-memory backend the LM head writes straight into the caller's logits vector, which may
// move between passes — so only device-memory backends may record launches. The spans must stay
// valid during run_forward.
struct LaunchShape {
  std::span<const std::uint64_t> plan_words;  // which sublayers run (the layer plan's wire words)
  std::int64_t n_tokens = 0;                  // T (= inputs.tokens.size())
  bool tree_mask = false;                     // a tree mask (= inputs.tree_mask != nullptr)
  std::span<const std::int32_t> logit_rows;   // (= inputs.logit_rows)
  // The KV cache the launches read and write, by identity (e.g. its layer-0 key buffer) and
  // capacity. A cache belongs to one model, so it also tells the models on a backend apart.
  const void* kv_cache = nullptr;
  std::int64_t kv_capacity = 0;
  // The pruned draft vocabulary whose LM head the launches use, by identity (its buffers);
  // nullptr: the full LM head.
  const void* draft_vocabulary = nullptr;
  // An early-exit draft forward (the model's first layers, then its exit head).
  bool early_exit = false;
  // A draft forward on the model's quantized draft copy of its weights.
  bool draft_weights = false;
  // Several independent sequences (= !inputs.segments.empty()).
  bool segmented = false;
  // False when the launches cannot be recorded: they call back into the host (observers) or run
  // collectives through host memory. Such passes always run eagerly.
  bool recordable = true;
};

// A hash of everything in `shape` but `recordable`: the graph key of recording backends.
std::uint64_t launch_key(const LaunchShape& shape);

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
  // Moves rows within blocks of backend memory, as one device operation ordered after earlier
  // work and before later work (the KV cache keeping a verified token tree's accepted path,
  // KvCache::keep_rows). Block b < blocks starts at base + b * block_stride bytes and holds
  // rows_per_block rows of row_bytes bytes; in every block, row to + i = row from[i] for
  // i = 0, 1, ... in that order. `from` is host memory, ascends strictly, from[i] >= to + i, at
  // most kernels::kMaxCompactedRows (64) rows (kernels/row_compaction_contract.hpp); throws
  // otherwise. Called between forward passes, never inside `launches`. A copy: exact everywhere.
  virtual void compact_rows(void* base, std::int64_t blocks, std::int64_t block_stride,
                            std::int64_t rows_per_block, std::int64_t row_bytes,
                            std::span<const std::int32_t> from, std::int64_t to) = 0;
  // True when backend memory is ordinary host memory (a checkpoint slice can be read into it).
  virtual bool host_memory() const = 0;
  // The per-row reductions of logit rows held in this backend's memory, for this rank's
  // vocabulary slice (backend/shard_reductions.hpp): over device memory on a device backend, so
  // that verification reads the rows where the LM head wrote them; over host memory otherwise.
  virtual std::unique_ptr<ShardReductions> make_shard_reductions(VocabShard shard) = 0;

  // --- weights --------------------------------------------------------------------------------
  // Whether matmuls run on weights in this format (CPU: every format; CUDA: the dense ones).
  virtual bool runs_format(WeightFormat format) const = 0;
  // The weight in this backend's memory and layout; throws naming the format when it does not run
  // it, or when the host data is malformed (a quantized block with a non-finite scale).
  virtual DeviceBuffer make_weight(const HostWeight& host) = 0;
  // A new weight holding the given rows of w in that order (a draft vocabulary's LM-head rows).
  virtual DeviceBuffer select_weight_rows(const BackendWeight& w,
                                          std::span<const std::int32_t> rows) = 0;
  // A new weight holding the columns [begin, end) of w (a fixed-partition chunk; quantized
  // formats: multiples of 32).
  virtual DeviceBuffer select_weight_cols(const BackendWeight& w, std::int64_t begin,
                                          std::int64_t end) = 0;
  // For device memory: its bandwidth (benchmarks report decode against it). nullopt for host
  // memory, which the benchmark measures itself.
  virtual std::optional<DeviceBandwidth> measure_device_bandwidth() { return std::nullopt; }
  // The stream (a cudaStream_t) on which a device backend orders its work, for device work
  // outside forward passes that must be ordered with them (device-side verification's kernels
  // and their NCCL exchange); nullptr for host memory.
  virtual void* native_stream() const { return nullptr; }

  // --- a forward pass -----------------------------------------------------------------------
  // Runs one forward pass: `launches` issues every op of it (ops are called from nowhere else).
  // Returns when the pass is complete (all work done, errors surfaced). Throws when `shape`
  // disagrees with `inputs` (token count, tree-mask presence, logit rows).
  void run_forward(const ForwardInputs& inputs, const LaunchShape& shape,
                   const std::function<void()>& launches);

  // The ops, valid inside run_forward's `launches` (they use the pass's inputs).
  // out[t] = embedding row of the current token t (zeros when another rank owns it).
  virtual void embedding(const BackendWeight& table, std::int64_t vocab_begin, float* out) = 0;
  virtual void rmsnorm(const float* x, const float* weight, float eps, std::int64_t rows,
                       std::int64_t dim, float* y) = 0;
  // The residual add fused with the next sublayer's norm: x += delta, then y = rmsnorm(x).
  virtual void add_rmsnorm(float* x, const float* delta, const float* weight, float eps,
                           std::int64_t rows, std::int64_t dim, float* y) = 0;
  // y[r] = x[r] · Wᵀ for `rows` token rows. Per-output reduction order independent of `rows`
  // for the decode and verification sizes (token-count invariance); on the CPU for every size.
  virtual void matmul(const float* x, std::int64_t rows, const BackendWeight& w, float* y) = 0;
  // ys[i] = x · ws[i]ᵀ for every i (the same `rows` token rows times several matrices: Wq|Wk|Wv,
  // gate|up). Each result equals matmul(x, rows, ws[i], ys[i]) bit for bit; a backend may run them
  // in one launch (the CUDA backend does for matrices of one format and column count). The
  // default calls matmul once per matrix.
  virtual void matmul_many(const float* x, std::int64_t rows, std::span<const BackendWeight> ws,
                           std::span<float* const> ys);
  // out = swiglu(x · w_gateᵀ, x · w_upᵀ) for `rows` token rows (the MLP's input to its down
  // projection); up_scratch holds rows × w_up.rows floats the default may use. The same bits as
  // matmul_many({w_gate, w_up}) then swiglu; the CUDA backend runs it as one launch.
  virtual void matmul_swiglu(const float* x, std::int64_t rows, const BackendWeight& w_gate,
                             const BackendWeight& w_up, float* up_scratch, float* out);
  // Fused forms a backend may offer (the CUDA backend on either GEMV: bf16 weights,
  // decode and verification sizes). The model asks first (fuses_norm, fuses_residual_add) and
  // otherwise runs the plain ops; a backend answers for a given `rows` and weights the same way
  // every time, and alike for every rows <= 64, so that decode steps and verifications take the
  // same path (token-count invariance). The defaults offer nothing, and their ops throw.
  // rmsnorm folded into the matmuls that read it: ys[i] = rmsnorm(x) · ws[i]ᵀ (x: rows × cols of
  // the ws, all of one format and cols; the normalised x is never stored). Within rounding of
  // rmsnorm then matmul_many, not their bits.
  virtual bool fuses_norm(std::int64_t rows, std::span<const BackendWeight> ws) const;
  virtual void norm_matmul_many(const float* x, const float* norm_weight, float eps,
                                std::int64_t rows, std::span<const BackendWeight> ws,
                                std::span<float* const> ys);
  // out = swiglu(rmsnorm(x) · w_gateᵀ, rmsnorm(x) · w_upᵀ) (fuses_norm of {w_gate, w_up}).
  virtual void norm_matmul_swiglu(const float* x, const float* norm_weight, float eps,
                                  std::int64_t rows, const BackendWeight& w_gate,
                                  const BackendWeight& w_up, float* out);
  // y += x · wᵀ: the residual add in the matmul's epilogue, with the bits of matmul into a scratch
  // then add_inplace.
  virtual bool fuses_residual_add(std::int64_t rows, const BackendWeight& w) const;
  virtual void matmul_accumulate(const float* x, std::int64_t rows, const BackendWeight& w,
                                 float* y);
  virtual void add_bias(float* x, const float* bias, std::int64_t rows, std::int64_t dim) = 0;
  // RoPE at the current positions on n_heads head vectors per current token row.
  virtual void rope(float* x, std::int64_t row_stride, std::int64_t n_heads, std::int64_t head_dim,
                    const RopeTable& table) = 0;
  // Writes the current tokens' K/V rows into the cache at slots n_past + t (with segments: each
  // sequence's at kv_offset + n_past + i), in the cache's dtype.
  virtual void write_kv(const float* k, const float* v, std::int64_t kv_heads,
                        std::int64_t head_dim, const KvLayer& cache) = 0;
  // The attention sublayer's position step in one op: rope(q) when q is not null (n_q_heads per
  // row of q_stride floats), rope(k) (kv_heads per row of kv_heads * head_dim floats), then
  // write_kv(k, v). Same results as those calls; the default makes them, the CUDA backend runs
  // one kernel.
  struct RopeKv {
    float* q = nullptr;
    std::int64_t q_stride = 0;
    std::int64_t n_q_heads = 0;
    float* k = nullptr;
    const float* v = nullptr;
    std::int64_t kv_heads = 0;
    std::int64_t head_dim = 0;
  };
  virtual void rope_write_kv(const RopeKv& args, const RopeTable& table, const KvLayer& cache);
  // Q|K|V and the position step in one op (the RoPE form): ws = {Wq, Wk, Wv} times x (normalised
  // first when norm_weight is not null, as norm_matmul_many: ask fuses_norm), args.q rotated,
  // the rotated K and the V rows written into the cache; the bits of (norm_)matmul_many into
  // args.q, args.k and args.v followed by rope_write_kv(args), except that K and V are not left
  // in args.k and args.v (the CUDA backend stores them into the cache from its GEMV's
  // registers). A backend offers it (fuses_rope_kv) alike for every rows <= 64, or not at all for
  // those weights and head_dim; the default offers nothing, and its matmul_rope_kv throws.
  virtual bool fuses_rope_kv(std::int64_t rows, std::span<const BackendWeight> ws,
                             std::int64_t head_dim) const;
  virtual void matmul_rope_kv(const float* x, const float* norm_weight, float eps,
                              std::int64_t rows, std::span<const BackendWeight> ws,
                              const RopeKv& args, const RopeTable& table, const KvLayer& cache);
  // Attention of the current tokens over the cache (n_past and mask of the inputs; with segments,
  // each sequence's tokens over its own slots).
  virtual void attention(const float* q, const KvLayer& cache, std::int64_t n_q_heads,
                         std::int64_t n_kv_heads, std::int64_t head_dim, float scale,
                         float* out) = 0;
  virtual void swiglu(const float* gate, const float* up, float* out, std::int64_t n) = 0;
  virtual void add_inplace(float* x, const float* y, std::int64_t n) = 0;
  // dst[i] = src[logit_rows[i]] (rows of `dim` floats; the current forward's logit rows).
  virtual void gather_rows(const float* src, std::int64_t dim, float* dst) = 0;
  // out[r][i] = fill for i < width, then out[r][ids[j]] = values[r][j] for r < rows, j < n_ids:
  // values [rows × n_ids], out [rows × width], ids (backend memory) distinct in [0, width). A
  // copy, so the result is exact on every backend (a pruned draft vocabulary's logits, -inf
  // elsewhere).
  virtual void scatter_columns(const float* values, std::int64_t rows, const std::int32_t* ids,
                               std::int64_t n_ids, std::int64_t width, float fill, float* out) = 0;
  // Sum over the tensor-parallel ranks, in place (device collectives where the communicator
  // takes device memory, otherwise through host memory).
  virtual void all_reduce(Communicator& comm, float* data, std::int64_t count) = 0;

  // --- graphs (backends that record and replay launches) ------------------------------------
  virtual bool graphs_enabled() const { return false; }
  // Turns recording/replay off or on (--cuda-graphs); no effect on backends without graphs.
  virtual void set_graphs_enabled(bool enabled) { (void)enabled; }

 protected:
  // How this backend runs a pass whose shape run_forward has checked against its inputs. The
  // default runs it eagerly: begin_forward(inputs), launches(), end_forward().
  virtual void forward_pass(const ForwardInputs& inputs, const LaunchShape& shape,
                            const std::function<void()>& launches);
  // Stages the per-call values for the ops that follow.
  virtual void begin_forward(const ForwardInputs& inputs) = 0;
  // Completes the pass (all work done, errors surfaced).
  virtual void end_forward() = 0;
};

// Row-major helpers for backends whose weights of a dense format are row-major: the selected rows
// or columns copied through host memory (download, then upload of the new weight).
DeviceBuffer select_dense_rows(Backend& backend, const BackendWeight& w,
                               std::span<const std::int32_t> rows);
DeviceBuffer select_dense_cols(Backend& backend, const BackendWeight& w, std::int64_t begin,
                               std::int64_t end);
// Bytes per element of a dense format; throws for a quantized one.
std::size_t dense_element_bytes(WeightFormat format);

std::unique_ptr<Backend> make_cpu_backend();
// The instruction set the CPU kernels run with ("avx512", "avx2", "scalar": detected, or
// SELFSPEC_CPU_ISA's lower rung); throws naming the variable when it asks for too much.
std::string cpu_kernel_isa();

// The CUDA backend on `device` (throws when CUDA is not built or no such device).
std::unique_ptr<Backend> make_cuda_backend(int device);
// nullopt when a CUDA device is usable, else why not.
std::optional<std::string> cuda_unavailable_reason();
int cuda_device_count();

}  // namespace selfspec
