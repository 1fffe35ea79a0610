// The CPU backend: host memory (64-byte aligned) and the kernels of kernels/cpu (AVX2/FMA/F16C
// with a bit-identical scalar fallback, OpenMP threads). Token-count invariance comes from the
// kernels' fixed reduction orders (kernels/cpu/matmul.hpp).
#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/row_compaction.hpp"
#include "kernels/cpu/scatter.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace selfspec {
namespace {

namespace kc = kernels::cpu;

kc::WeightView view(const BackendWeight& w) {
  return {w.dtype, w.data, w.rows, w.cols};
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
  void compact_rows(float* base, std::int64_t blocks, std::int64_t block_stride,
                    std::int64_t rows_per_block, std::int64_t row_floats,
                    std::span<const std::int32_t> from, std::int64_t to) override {
    kc::compact_rows(base, blocks, block_stride, rows_per_block, row_floats, from, to);
  }

  void embedding(const BackendWeight& table, std::int64_t vocab_begin, float* out) override {
    kc::embedding_lookup(view(table), vocab_begin, inputs_.tokens.data(), n_tokens(), out);
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
    kc::matmul(x, rows, view(w), y);
  }
  void add_bias(float* x, const float* bias, std::int64_t rows, std::int64_t dim) override {
    kc::add_bias(x, bias, rows, dim);
  }
  void rope(float* x, std::int64_t row_stride, std::int64_t n_heads, std::int64_t head_dim,
            const float* inv_freq) override {
    kc::apply_rope(x, n_tokens(), row_stride, n_heads, head_dim, inputs_.positions.data(),
                   {inv_freq, static_cast<std::size_t>(head_dim / 2)});
  }
  void write_kv(const float* k, const float* v, std::int64_t kv_heads, std::int64_t head_dim,
                std::int64_t capacity, float* k_cache, float* v_cache) override {
    const std::int64_t width = kv_heads * head_dim;
    for (std::int64_t t = 0; t < n_tokens(); ++t) {
      for (std::int64_t h = 0; h < kv_heads; ++h) {
        const auto slot = static_cast<std::size_t>((h * capacity + inputs_.n_past + t) * head_dim);
        std::memcpy(k_cache + slot, k + t * width + h * head_dim, head_dim * sizeof(float));
        std::memcpy(v_cache + slot, v + t * width + h * head_dim, head_dim * sizeof(float));
      }
    }
  }
  void attention(const float* q, const float* k_cache, const float* v_cache, std::int64_t n_q_heads,
                 std::int64_t n_kv_heads, std::int64_t head_dim, std::int64_t capacity, float scale,
                 float* out) override {
    const kc::AttentionShape shape{n_tokens(), n_q_heads,      n_kv_heads,
                                   head_dim,   inputs_.n_past, capacity};
    kc::attention(q, k_cache, v_cache, shape, inputs_.tree_mask, scale, out);
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
  void begin_forward(const ForwardInputs& inputs) override { inputs_ = inputs; }
  void end_forward() override {}
  std::int64_t n_tokens() const { return static_cast<std::int64_t>(inputs_.tokens.size()); }
  ForwardInputs inputs_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace selfspec
