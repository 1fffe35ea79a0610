// Rotary position embedding in HuggingFace's rotate-half convention (LlamaRotaryEmbedding +
// apply_rotary_pos_emb): for a head vector x of size d and i < d/2, with angle = pos * inv_freq[i],
//   out[i]       = x[i] * cos - x[i + d/2] * sin
//   out[i + d/2] = x[i + d/2] * cos + x[i] * sin.
// inv_freq already includes any rope_scaling (computed by model/rope_frequencies.cpp).
// cos and sin are evaluated in double from the double angle and rounded to f32.
//
// A RoPE table holds those f32 values for positions [0, n): row p is head_dim / 2 cosines, then
// head_dim / 2 sines. Built once at load (fill_rope_table, on the host for every backend), it
// turns RoPE into loads: apply_rope_table gives the bits of apply_rope, since the table holds
// exactly the values apply_rope computes.
#pragma once

#include <cstdint>
#include <span>

namespace selfspec::kernels::cpu {

// Rotates, in place, n_heads consecutive head vectors of size head_dim in every token row of x
// (row t starts at x + t * row_stride). positions has n_tokens entries; inv_freq has head_dim / 2.
void apply_rope(float* x, std::int64_t n_tokens, std::int64_t row_stride, std::int64_t n_heads,
                std::int64_t head_dim, const std::int32_t* positions,
                std::span<const float> inv_freq);

// Rows [first, first + count) of the RoPE table of inv_freq (head_dim = 2 * inv_freq.size()):
// out[(p - first) * head_dim + i] = f32(cos(double(p) * double(inv_freq[i]))), the sine at
// + head_dim / 2. out holds count * head_dim floats.
void fill_rope_table(std::span<const float> inv_freq, std::int64_t first, std::int64_t count,
                     float* out);

// apply_rope with cos and sin read from a RoPE table of `table_positions` rows (every position
// must be below it; throws otherwise).
void apply_rope_table(float* x, std::int64_t n_tokens, std::int64_t row_stride,
                      std::int64_t n_heads, std::int64_t head_dim, const std::int32_t* positions,
                      const float* table, std::int64_t table_positions);

}  // namespace selfspec::kernels::cpu
