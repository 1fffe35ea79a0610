// A backend that offers the fused forms (Backend::fuses_norm, fuses_residual_add, fuses_rope_kv)
// on top of another backend, composing each from that backend's plain ops: norm_matmul_many =
// rmsnorm into a scratch, then matmul_many; matmul_accumulate = matmul into a scratch, then
// add_inplace; matmul_rope_kv = (norm_)matmul_many with K and V into a scratch, then
// rope_write_kv from there, and NaN left in the caller's K and V buffers (which the fused form
// does not fill, so a model reading them afterwards fails the bit comparison). On the
// CPU these are the plain path's bits (add_rmsnorm is add_inplace then rmsnorm), so a model on it
// must give the plain model's logits bit for bit: the tests of LlamaModel's fused branch (which
// buffers it reads and writes, when it leaves a delta pending) run without a GPU this way. Every
// other op is forwarded unchanged.
#pragma once

#include "backend/backend.hpp"
#include "backend/shard_reductions.hpp"

#include <cstdint>
#include <memory>
#include <span>

namespace selfspec::testing {

class ComposedFusionBackend : public Backend {
 public:
  // Offers the fused forms for 1 .. max_rows rows of dense weights.
  explicit ComposedFusionBackend(std::unique_ptr<Backend> inner, std::int64_t max_rows = 64);

  // How often the model took each fused form (for tests that it did).
  std::int64_t fused_norm_calls() const { return fused_norm_calls_; }
  std::int64_t fused_residual_calls() const { return fused_residual_calls_; }
  std::int64_t fused_rope_kv_calls() const { return fused_rope_kv_calls_; }

  bool fuses_norm(std::int64_t rows, std::span<const BackendWeight> ws) const override;
  void norm_matmul_many(const float* x, const float* norm_weight, float eps, std::int64_t rows,
                        std::span<const BackendWeight> ws, std::span<float* const> ys) override;
  void norm_matmul_swiglu(const float* x, const float* norm_weight, float eps, std::int64_t rows,
                          const BackendWeight& w_gate, const BackendWeight& w_up,
                          float* out) override;
  bool fuses_residual_add(std::int64_t rows, const BackendWeight& w) const override;
  void matmul_accumulate(const float* x, std::int64_t rows, const BackendWeight& w,
                         float* y) override;
  bool fuses_rope_kv(std::int64_t rows, std::span<const BackendWeight> ws,
                     std::int64_t head_dim) const override;
  void matmul_rope_kv(const float* x, const float* norm_weight, float eps, std::int64_t rows,
                      std::span<const BackendWeight> ws, const RopeKv& args, const RopeTable& table,
                      const KvLayer& cache) override;

  // Forwarded.
  DeviceKind kind() const override { return inner_->kind(); }
  BackendDescription description() const override { return inner_->description(); }
  DeviceBuffer allocate(std::size_t bytes) override { return inner_->allocate(bytes); }
  void upload(void* dst, const void* host_src, std::size_t bytes) override {
    inner_->upload(dst, host_src, bytes);
  }
  void download(void* host_dst, const void* src, std::size_t bytes) override {
    inner_->download(host_dst, src, bytes);
  }
  void compact_rows(void* base, std::int64_t blocks, std::int64_t block_stride,
                    std::int64_t rows_per_block, std::int64_t row_bytes,
                    std::span<const std::int32_t> from, std::int64_t to) override {
    inner_->compact_rows(base, blocks, block_stride, rows_per_block, row_bytes, from, to);
  }
  bool host_memory() const override { return inner_->host_memory(); }
  std::unique_ptr<ShardReductions> make_shard_reductions(VocabShard shard) override {
    return inner_->make_shard_reductions(shard);
  }
  bool runs_format(WeightFormat format) const override { return inner_->runs_format(format); }
  DeviceBuffer make_weight(const HostWeight& host) override { return inner_->make_weight(host); }
  DeviceBuffer select_weight_rows(const BackendWeight& w,
                                  std::span<const std::int32_t> rows) override {
    return inner_->select_weight_rows(w, rows);
  }
  DeviceBuffer select_weight_cols(const BackendWeight& w, std::int64_t begin,
                                  std::int64_t end) override {
    return inner_->select_weight_cols(w, begin, end);
  }
  void embedding(const BackendWeight& table, std::int64_t vocab_begin, float* out) override {
    inner_->embedding(table, vocab_begin, out);
  }
  void rmsnorm(const float* x, const float* weight, float eps, std::int64_t rows, std::int64_t dim,
               float* y) override {
    inner_->rmsnorm(x, weight, eps, rows, dim, y);
  }
  void add_rmsnorm(float* x, const float* delta, const float* weight, float eps, std::int64_t rows,
                   std::int64_t dim, float* y) override {
    inner_->add_rmsnorm(x, delta, weight, eps, rows, dim, y);
  }
  void matmul(const float* x, std::int64_t rows, const BackendWeight& w, float* y) override {
    inner_->matmul(x, rows, w, y);
  }
  void matmul_many(const float* x, std::int64_t rows, std::span<const BackendWeight> ws,
                   std::span<float* const> ys) override {
    inner_->matmul_many(x, rows, ws, ys);
  }
  void matmul_swiglu(const float* x, std::int64_t rows, const BackendWeight& w_gate,
                     const BackendWeight& w_up, float* up_scratch, float* out) override {
    inner_->matmul_swiglu(x, rows, w_gate, w_up, up_scratch, out);
  }
  void add_bias(float* x, const float* bias, std::int64_t rows, std::int64_t dim) override {
    inner_->add_bias(x, bias, rows, dim);
  }
  void rope(float* x, std::int64_t row_stride, std::int64_t n_heads, std::int64_t head_dim,
            const RopeTable& table) override {
    inner_->rope(x, row_stride, n_heads, head_dim, table);
  }
  void write_kv(const float* k, const float* v, std::int64_t kv_heads, std::int64_t head_dim,
                const KvLayer& cache) override {
    inner_->write_kv(k, v, kv_heads, head_dim, cache);
  }
  void rope_write_kv(const RopeKv& args, const RopeTable& table, const KvLayer& cache) override {
    inner_->rope_write_kv(args, table, cache);
  }
  void attention(const float* q, const KvLayer& cache, std::int64_t n_q_heads,
                 std::int64_t n_kv_heads, std::int64_t head_dim, float scale, float* out) override {
    inner_->attention(q, cache, n_q_heads, n_kv_heads, head_dim, scale, out);
  }
  void swiglu(const float* gate, const float* up, float* out, std::int64_t n) override {
    inner_->swiglu(gate, up, out, n);
  }
  void add_inplace(float* x, const float* y, std::int64_t n) override {
    inner_->add_inplace(x, y, n);
  }
  void gather_rows(const float* src, std::int64_t dim, float* dst) override {
    inner_->gather_rows(src, dim, dst);
  }
  void scatter_columns(const float* values, std::int64_t rows, const std::int32_t* ids,
                       std::int64_t n_ids, std::int64_t width, float fill, float* out) override {
    inner_->scatter_columns(values, rows, ids, n_ids, width, fill, out);
  }
  void all_reduce(Communicator& comm, float* data, std::int64_t count) override {
    inner_->all_reduce(comm, data, count);
  }

 protected:
  // The inner backend runs the pass (its begin/end around these launches, which call back into
  // this backend's ops and so into its own).
  void forward_pass(const ForwardInputs& inputs, const LaunchShape& shape,
                    const std::function<void()>& launches) override {
    inner_->run_forward(inputs, shape, launches);
  }
  void begin_forward(const ForwardInputs& inputs) override { (void)inputs; }
  void end_forward() override {}

 private:
  float* scratch(std::size_t floats);
  bool dense(const BackendWeight& w) const;

  std::unique_ptr<Backend> inner_;
  std::int64_t max_rows_;
  DeviceBuffer scratch_;
  DeviceBuffer kv_scratch_;
  std::int64_t fused_norm_calls_ = 0;
  std::int64_t fused_residual_calls_ = 0;
  std::int64_t fused_rope_kv_calls_ = 0;
};

}  // namespace selfspec::testing
