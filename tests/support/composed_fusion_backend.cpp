#include "tests/support/composed_fusion_backend.hpp"

#include "core/error.hpp"

#include <limits>
#include <utility>
#include <vector>

namespace selfspec::testing {

ComposedFusionBackend::ComposedFusionBackend(std::unique_ptr<Backend> inner, std::int64_t max_rows)
    : inner_(std::move(inner)), max_rows_(max_rows) {}

float* ComposedFusionBackend::scratch(std::size_t floats) {
  if (scratch_.bytes() < floats * sizeof(float))
    scratch_ = inner_->allocate(floats * sizeof(float));
  return scratch_.as<float>();
}

bool ComposedFusionBackend::dense(const BackendWeight& w) const {
  return !is_quantized(w.format);
}

bool ComposedFusionBackend::fuses_norm(std::int64_t rows, std::span<const BackendWeight> ws) const {
  if (rows < 1 || rows > max_rows_ || ws.empty()) return false;
  for (const BackendWeight& w : ws) {
    if (!dense(w) || w.cols != ws.front().cols) return false;
  }
  return true;
}

void ComposedFusionBackend::norm_matmul_many(const float* x, const float* norm_weight, float eps,
                                             std::int64_t rows, std::span<const BackendWeight> ws,
                                             std::span<float* const> ys) {
  SELFSPEC_CHECK(fuses_norm(rows, ws), "norm_matmul_many: not offered for {} rows", rows);
  const std::int64_t cols = ws.front().cols;
  float* h = scratch(static_cast<std::size_t>(rows * cols));
  inner_->rmsnorm(x, norm_weight, eps, rows, cols, h);
  inner_->matmul_many(h, rows, ws, ys);
  ++fused_norm_calls_;
}

void ComposedFusionBackend::norm_matmul_swiglu(const float* x, const float* norm_weight, float eps,
                                               std::int64_t rows, const BackendWeight& w_gate,
                                               const BackendWeight& w_up, float* out) {
  const BackendWeight both[] = {w_gate, w_up};
  SELFSPEC_CHECK(fuses_norm(rows, both), "norm_matmul_swiglu: not offered for {} rows", rows);
  const std::int64_t cols = w_gate.cols;
  // One scratch: the normalised x, then the up products after it.
  float* h = scratch(static_cast<std::size_t>(rows * (cols + w_up.rows)));
  inner_->rmsnorm(x, norm_weight, eps, rows, cols, h);
  inner_->matmul_swiglu(h, rows, w_gate, w_up, h + rows * cols, out);
  ++fused_norm_calls_;
}

bool ComposedFusionBackend::fuses_residual_add(std::int64_t rows, const BackendWeight& w) const {
  return rows >= 1 && rows <= max_rows_ && dense(w);
}

void ComposedFusionBackend::matmul_accumulate(const float* x, std::int64_t rows,
                                              const BackendWeight& w, float* y) {
  SELFSPEC_CHECK(fuses_residual_add(rows, w), "matmul_accumulate: not offered for {} rows", rows);
  float* product = scratch(static_cast<std::size_t>(rows * w.rows));
  inner_->matmul(x, rows, w, product);
  inner_->add_inplace(y, product, rows * w.rows);
  ++fused_residual_calls_;
}

bool ComposedFusionBackend::fuses_rope_kv(std::int64_t rows, std::span<const BackendWeight> ws,
                                          std::int64_t head_dim) const {
  return ws.size() == 3 && head_dim % 2 == 0 && fuses_norm(rows, ws);
}

void ComposedFusionBackend::matmul_rope_kv(const float* x, const float* norm_weight, float eps,
                                           std::int64_t rows, std::span<const BackendWeight> ws,
                                           const RopeKv& args, const RopeTable& table,
                                           const KvLayer& cache) {
  SELFSPEC_CHECK(fuses_rope_kv(rows, ws, args.head_dim), "matmul_rope_kv: not offered for {} rows",
                 rows);
  const std::int64_t kv_floats = rows * args.kv_heads * args.head_dim;
  const auto kv_bytes = static_cast<std::size_t>(2 * kv_floats) * sizeof(float);
  if (kv_scratch_.bytes() < kv_bytes) kv_scratch_ = inner_->allocate(kv_bytes);
  RopeKv own = args;
  own.k = kv_scratch_.as<float>();
  own.v = own.k + kv_floats;
  float* const outputs[] = {args.q, own.k, const_cast<float*>(own.v)};
  if (norm_weight != nullptr) {
    norm_matmul_many(x, norm_weight, eps, rows, ws, outputs);  // a folded norm, counted
  } else {
    inner_->matmul_many(x, rows, ws, outputs);
  }
  inner_->rope_write_kv(own, table, cache);
  const std::vector<float> poison(static_cast<std::size_t>(kv_floats),
                                  std::numeric_limits<float>::quiet_NaN());
  inner_->upload(args.k, poison.data(), poison.size() * sizeof(float));
  inner_->upload(const_cast<float*>(args.v), poison.data(), poison.size() * sizeof(float));
  ++fused_rope_kv_calls_;
}

}  // namespace selfspec::testing
