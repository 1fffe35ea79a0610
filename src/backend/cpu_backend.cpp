// The CPU backend: host memory (64-byte aligned; weights 2 MiB aligned and advised onto
// transparent huge pages) and the kernels of kernels/cpu (AVX-512, AVX2 and a bit-identical
// scalar fallback; OpenMP threads). Weight layouts: f32 and f16 row-major (kernels/cpu/matmul.hpp),
// bf16 and the quantized formats in row panels (kernels/cpu/packed_weights.hpp, bf16_matmul.hpp,
// quant_matmul.hpp). Token-count invariance comes from the kernels' fixed reduction orders.
#include "backend/backend.hpp"
#include "backend/shard_reductions.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/amx_probe.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/bf16_matmul.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/row_compaction.hpp"
#include "kernels/cpu/scatter.hpp"

#include <fmt/format.h>

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace selfspec {
namespace {

namespace kc = kernels::cpu;

// Weights in row panels: bf16 and the quantized formats.
bool packed(WeightFormat format) {
  return format == WeightFormat::kBF16 || is_quantized(format);
}

kc::WeightView dense_view(const BackendWeight& w) {
  return {*dense_dtype(w.format), w.data, w.rows, w.cols};
}

kc::PackedView packed_view(const BackendWeight& w) {
  return {w.format, w.data, w.rows, w.cols};
}

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Weight memory: 2 MiB aligned and, from one huge page up, advised onto transparent huge pages
// before it is first touched (a decode step streams every weight once; 4 KiB pages cost a TLB
// miss every 4 KiB of the stream). Zeroed.
DeviceBuffer allocate_weight_memory(std::size_t bytes) {
  if (bytes == 0) return {};
  void* data = nullptr;
  const std::size_t alignment = bytes >= kHugePage ? kHugePage : 64;
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  if (posix_memalign(&data, alignment, rounded) != 0) throw std::bad_alloc();
  if (bytes >= kHugePage) (void)madvise(data, rounded / kHugePage * kHugePage, MADV_HUGEPAGE);
  std::memset(data, 0, rounded);
  return DeviceBuffer(data, bytes, [](void* p) { std::free(p); });
}

DeviceBuffer weight_from(const std::vector<std::byte>& bytes) {
  DeviceBuffer out = allocate_weight_memory(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

class CpuBackend final : public Backend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  BackendDescription description() const override {
    return {DeviceKind::kCpu, "cpu", std::string(kc::isa_name(kc::active_isa())), num_threads()};
  }

  DeviceBuffer allocate(std::size_t bytes) override {
    if (bytes == 0) return {};
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    void* data = std::aligned_alloc(64, rounded);
    if (data == nullptr) throw std::bad_alloc();
    std::memset(data, 0, rounded);
    return DeviceBuffer(data, bytes, [](void* p) { std::free(p); });
  }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  bool host_memory() const override { return true; }
  std::unique_ptr<ShardReductions> make_shard_reductions(VocabShard shard) override {
    return make_host_shard_reductions(std::move(shard));
  }
  void compact_rows(void* base, std::int64_t blocks, std::int64_t block_stride,
                    std::int64_t rows_per_block, std::int64_t row_bytes,
                    std::span<const std::int32_t> from, std::int64_t to) override {
    kc::compact_rows(base, blocks, block_stride, rows_per_block, row_bytes, from, to);
  }

  bool runs_format(WeightFormat /*format*/) const override { return true; }
  DeviceBuffer make_weight(const HostWeight& host) override {
    SELFSPEC_CHECK(host.rows > 0 && host.cols > 0 && host.data != nullptr,
                   "make_weight: empty {} matrix [{} x {}]", weight_format_name(host.format),
                   host.rows, host.cols);
    if (is_quantized(host.format)) {
      const kc::GgufRows rows{host.format, static_cast<const std::byte*>(host.data),
                              host.rows,   host.row_stride_bytes,
                              host.skip,   host.cols};
      DeviceBuffer out = allocate_weight_memory(static_cast<std::size_t>(
          kc::packed_quant_bytes(host.format, host.rows, host.cols, host.skip)));
      kc::pack_quant_rows(rows, {out.as<std::byte>(), out.bytes()});
      return out;
    }
    if (host.format == WeightFormat::kBF16) {
      DeviceBuffer out = allocate_weight_memory(
          static_cast<std::size_t>(kc::packed_bf16_bytes(host.rows, host.cols)));
      kc::pack_bf16_rows(static_cast<const std::uint16_t*>(host.data), host.rows, host.cols,
                         host.cols, {out.as<std::byte>(), out.bytes()});
      return out;
    }
    const std::size_t bytes =
        static_cast<std::size_t>(host.rows * host.cols) * dense_element_bytes(host.format);
    DeviceBuffer out = allocate_weight_memory(bytes);
    std::memcpy(out.data(), host.data, bytes);
    return out;
  }
  DeviceBuffer select_weight_rows(const BackendWeight& w,
                                  std::span<const std::int32_t> rows) override {
    if (!packed(w.format)) return select_dense_rows(*this, w, rows);
    return weight_from(kc::select_packed_rows(packed_view(w), rows));
  }
  DeviceBuffer select_weight_cols(const BackendWeight& w, std::int64_t begin,
                                  std::int64_t end) override {
    if (!packed(w.format)) return select_dense_cols(*this, w, begin, end);
    return weight_from(kc::select_packed_cols(packed_view(w), begin, end));
  }

  void embedding(const BackendWeight& table, std::int64_t vocab_begin, float* out) override {
    if (packed(table.format)) {
      kc::embedding_lookup(packed_view(table), vocab_begin, inputs_.tokens.data(), n_tokens(), out);
    } else {
      kc::embedding_lookup(dense_view(table), vocab_begin, inputs_.tokens.data(), n_tokens(), out);
    }
  }
  void rmsnorm(const float* x, const float* weight, float eps, std::int64_t rows, std::int64_t dim,
               float* y) override {
    kc::rmsnorm(x, weight, eps, rows, dim, y);
  }
  // Two passes on the CPU (the same bits as an unfused add followed by the norm).
  void add_rmsnorm(float* x, const float* delta, const float* weight, float eps, std::int64_t rows,
                   std::int64_t dim, float* y) override {
    kc::add_inplace(x, delta, rows * dim);
    kc::rmsnorm(x, weight, eps, rows, dim, y);
  }
  void matmul(const float* x, std::int64_t rows, const BackendWeight& w, float* y) override {
    if (w.format == WeightFormat::kBF16) {
      kc::bf16_matmul(x, rows, packed_view(w), y);
    } else if (is_quantized(w.format)) {
      kc::quant_matmul(x, rows, packed_view(w), y);
    } else {
      kc::matmul(x, rows, dense_view(w), y);
    }
  }
  void add_bias(float* x, const float* bias, std::int64_t rows, std::int64_t dim) override {
    kc::add_bias(x, bias, rows, dim);
  }
  void rope(float* x, std::int64_t row_stride, std::int64_t n_heads, std::int64_t head_dim,
            const RopeTable& table) override {
    kc::apply_rope_table(x, n_tokens(), row_stride, n_heads, head_dim, inputs_.positions.data(),
                         table.cos_sin, table.positions);
  }
  void write_kv(const float* k, const float* v, std::int64_t kv_heads, std::int64_t head_dim,
                const KvLayer& cache) override {
    const std::int64_t width = kv_heads * head_dim;
    for (const KvSegment& segment : segments()) {
      for (std::int64_t i = 0; i < segment.n_tokens; ++i) {
        const std::int64_t t = segment.first_token + i;
        const std::int64_t slot = segment.kv_offset + segment.n_past + i;
        for (std::int64_t h = 0; h < kv_heads; ++h) {
          const std::int64_t at = (h * cache.head_stride + slot) * head_dim;
          kc::store_as(k + t * width + h * head_dim, head_dim, cache.dtype, cache.keys, at);
          kc::store_as(v + t * width + h * head_dim, head_dim, cache.dtype, cache.values, at);
        }
      }
    }
  }
  // Each sequence attends over its own slots: the kernel sees the cache from the sequence's
  // offset on (the head stride stays the cache's capacity), so a token's attention is computed
  // exactly as in a forward over its sequence alone.
  void attention(const float* q, const KvLayer& cache, std::int64_t n_q_heads,
                 std::int64_t n_kv_heads, std::int64_t head_dim, float scale, float* out) override {
    const std::int64_t q_width = n_q_heads * head_dim;
    const auto element = static_cast<std::int64_t>(dtype_size(cache.dtype));
    for (const KvSegment& segment : segments()) {
      const kc::AttentionShape shape{segment.n_tokens, n_q_heads,         n_kv_heads, head_dim,
                                     segment.n_past,   cache.head_stride, cache.dtype};
      const std::int64_t offset = segment.kv_offset * head_dim * element;
      kc::attention(q + segment.first_token * q_width,
                    static_cast<const std::byte*>(cache.keys) + offset,
                    static_cast<const std::byte*>(cache.values) + offset, shape, segment.tree_mask,
                    scale, out + segment.first_token * q_width);
    }
  }
  void swiglu(const float* gate, const float* up, float* out, std::int64_t n) override {
    kc::swiglu(gate, up, out, n);
  }
  void add_inplace(float* x, const float* y, std::int64_t n) override { kc::add_inplace(x, y, n); }
  void gather_rows(const float* src, std::int64_t dim, float* dst) override {
    const std::span<const std::int32_t> rows = inputs_.logit_rows;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::memcpy(dst + static_cast<std::int64_t>(i) * dim, src + rows[i] * dim,
                  static_cast<std::size_t>(dim) * sizeof(float));
    }
  }
  void scatter_columns(const float* values, std::int64_t rows, const std::int32_t* ids,
                       std::int64_t n_ids, std::int64_t width, float fill, float* out) override {
    kc::scatter_columns(values, rows, ids, n_ids, width, fill, out);
  }
  void all_reduce(Communicator& comm, float* data, std::int64_t count) override {
    comm.all_reduce_sum({data, static_cast<std::size_t>(count)});
  }

 private:
  // Passes run eagerly (Backend::forward_pass); the ops read the inputs from the caller's memory.
  void begin_forward(const ForwardInputs& inputs) override {
    inputs_ = inputs;
    whole_ = {0, n_tokens(), 0, inputs.n_past, inputs.tree_mask};
  }
  void end_forward() override {}
  std::int64_t n_tokens() const { return static_cast<std::int64_t>(inputs_.tokens.size()); }
  // The pass's sequences: its segments, or the one sequence of all its tokens.
  std::span<const KvSegment> segments() const {
    return inputs_.segments.empty() ? std::span<const KvSegment>(&whole_, 1) : inputs_.segments;
  }
  ForwardInputs inputs_;
  KvSegment whole_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() {
  // No kernel has an AMX rung yet; where cpuid lists AMX, say whether it could run and why not,
  // so that a later rung is chosen by the probe, never by the flag.
  const kc::AmxProbe& amx = kc::amx_probe();
  if (amx.listed_by_cpuid && !amx.usable) {
    log::warn("cpuid lists AMX, but it cannot run here: {}; the kernels use {}", amx.reason,
              kc::isa_name(kc::active_isa()));
  }
  return std::make_unique<CpuBackend>();
}

std::string cpu_kernel_isa() {
  return std::string(kc::isa_name(kc::active_isa()));
}

}  // namespace selfspec
