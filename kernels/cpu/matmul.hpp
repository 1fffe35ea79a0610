// Matrix products against stored weights: y = x · Wᵀ with x [T × K] f32 activations and W
// [N × K] row-major weights in f32, bf16 or f16 (converted exactly to f32 in registers).
//
// Canonical reduction order (the token-count invariance contract): every output y[t][n] is
//   acc[j] = 0 for j < 16;  for k in [0, round_up(K, 16)): acc[k % 16] = fma(x[k], w[k], acc[k %
//   16]) with x[k] = w[k] = 0 for k >= K; a[i] = acc[i] + acc[i + 8] (i < 8); b[i] = a[i] + a[i +
//   4] (i < 4); c[i] = b[i] + b[i + 2] (i < 2); result = c[0] + c[1].
// This order does not depend on T, on how rows and tokens are tiled, on the thread count, or on
// the instruction set: the scalar fallback and the AVX2 path give bit-identical results. Hence a
// token's logits are the same whether it is computed alone (decode) or among T tokens (prefill,
// verification).
#pragma once

#include "core/dtype.hpp"

#include <cstdint>

namespace selfspec::kernels::cpu {

// A row-major weight matrix [rows × cols] in its storage dtype. Non-owning.
struct WeightView {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// The canonical dot product of n f32 values with n weights of the given dtype (order above).
float dot(const float* x, const void* w, DType w_dtype, std::int64_t n);

// y[t * w.rows + n] = dot(x + t * w.cols, row n of w) for t < n_tokens, n < w.rows.
// x is [n_tokens × w.cols] contiguous, y is [n_tokens × w.rows] contiguous. Multithreaded over
// rows.
void matmul(const float* x, std::int64_t n_tokens, const WeightView& w, float* y);

}  // namespace selfspec::kernels::cpu
