// Row-wise and elementwise kernels of the LLaMA block: RMSNorm, SwiGLU, residual add, embedding
// lookup. Each output row depends only on its own input row, in a fixed order, so results do not
// depend on how many tokens are processed together.
#pragma once

#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_weights.hpp"

#include <cstdint>

namespace selfspec::kernels::cpu {

// y[t][i] = weight[i] * (x[t][i] * r_t), r_t = 1 / sqrt(mean_i(x[t][i]^2) + eps); the mean of
// squares is accumulated in double in ascending i. HF LlamaRMSNorm semantics. y may alias x.
void rmsnorm(const float* x, const float* weight, float eps, std::int64_t n_tokens,
             std::int64_t dim, float* y);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)) with vector_exp.hpp's exp (the same
// bits on every ISA). out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, std::int64_t n);

// x[i] += y[i].
void add_inplace(float* x, const float* y, std::int64_t n);

// x[t][i] += bias[i] for t < n_tokens, i < dim.
void add_bias(float* x, const float* bias, std::int64_t n_tokens, std::int64_t dim);

// Elements [first, first + n) of dst, a buffer of `dtype`, set to src[0, n): f32 copied, bf16 and
// f16 rounded to nearest even (core/dtype.hpp's store_from_f32): a KV-cache row written in the
// cache's dtype. Single-threaded (a row is small).
void store_as(const float* src, std::int64_t n, DType dtype, void* dst, std::int64_t first);

// Vocab-parallel embedding lookup. `table` holds rows [vocab_begin, vocab_begin + table.rows) of
// the embedding matrix; out[t] = row tokens[t] as f32 when this shard owns it, zeros otherwise
// (the all-reduce over ranks then yields the full embedding exactly).
void embedding_lookup(const WeightView& table, std::int64_t vocab_begin, const std::int32_t* tokens,
                      std::int64_t n_tokens, float* out);
// The same for a packed table (bf16 or quantized): each row as dequantize_packed_row gives it,
// i.e. the file's values (ggml's dequantization, bit for bit).
void embedding_lookup(const PackedView& table, std::int64_t vocab_begin, const std::int32_t* tokens,
                      std::int64_t n_tokens, float* out);

}  // namespace selfspec::kernels::cpu
