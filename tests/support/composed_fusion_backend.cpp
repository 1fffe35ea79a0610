#include "tests/support/composed_fusion_backend.hpp"

#include "core/error.hpp"

#include <utility>

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

}  // namespace selfspec::testing
