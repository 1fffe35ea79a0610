// Rotary position embedding in HuggingFace's rotate-half convention (LlamaRotaryEmbedding +
// apply_rotary_pos_emb): for a head vector x of size d and i < d/2, with angle = pos * inv_freq[i],
//   out[i]       = x[i] * cos - x[i + d/2] * sin
//   out[i + d/2] = x[i + d/2] * cos + x[i] * sin.
// inv_freq already includes any rope_scaling (computed by model/rope_frequencies.cpp).
// cos and sin are evaluated in double from the double angle and rounded to f32.
#pragma once

#include <cstdint>
#include <span>

namespace selfspec::kernels::cpu {

// Rotates, in place, n_heads consecutive head vectors of size head_dim in every token row of x
// (row t starts at x + t * row_stride). positions has n_tokens entries; inv_freq has head_dim / 2.
void apply_rope(float* x, std::int64_t n_tokens, std::int64_t row_stride, std::int64_t n_heads,
                std::int64_t head_dim, const std::int32_t* positions,
                std::span<const float> inv_freq);

}  // namespace selfspec::kernels::cpu
