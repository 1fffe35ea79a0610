// Scaled dot-product attention of T new query tokens over a contiguous per-head KV cache,
// with a causal or tree mask, for multi-head and grouped-query attention.
//
// Cache layout (per layer, per rank): K and V are [n_kv_heads][capacity][head_dim] elements of
// kv_dtype, f32 or bf16 (a bf16 element is widened exactly to f32 where it is read, so attention
// over a bf16 cache equals attention over an f32 cache holding the same values); the T new
// tokens have already been written at slots [n_past, n_past + T). Query t (cache slot n_past + t)
// attends to every slot < n_past and to slot n_past + j when the mask allows (t, j): causal allows
// j <= t; a tree mask is a row-major T × T matrix of 0/1 (ancestor or self).
// Query head h reads KV head h / (n_q_heads / n_kv_heads).
//
// Each (t, h) output depends only on its own query and the slots it may see, computed in a fixed
// order (scores with the canonical dot of matmul.hpp, max, exp, ascending-slot sums), so it does
// not depend on T: a token attends identically alone or inside a verification batch.
#pragma once

#include "core/dtype.hpp"

#include <cstdint>

namespace selfspec::kernels::cpu {

struct AttentionShape {
  std::int64_t n_tokens = 0;    // T new query tokens
  std::int64_t n_q_heads = 0;   // local query heads
  std::int64_t n_kv_heads = 0;  // local KV heads (n_q_heads % n_kv_heads == 0)
  std::int64_t head_dim = 0;
  std::int64_t n_past = 0;       // cache slots before the new tokens
  std::int64_t capacity = 0;     // cache slots per head (stride between heads = capacity*head_dim)
  DType kv_dtype = DType::kF32;  // f32 or bf16
};

// q and out are [T][n_q_heads * head_dim]. tree_mask is nullptr for causal, else T × T.
// scale is usually 1 / sqrt(head_dim).
// k_cache and v_cache point at slot 0 of KV head 0 (elements of shape.kv_dtype).
void attention(const float* q, const void* k_cache, const void* v_cache,
               const AttentionShape& shape, const std::uint8_t* tree_mask, float scale, float* out);

}  // namespace selfspec::kernels::cpu
