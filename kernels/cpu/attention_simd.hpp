// Internal entry points of the vectorised attention steps (attention_avx2.cpp,
// attention_avx512.cpp), dispatched by attention.cpp. Each computes exactly what attention.hpp's
// canonical sequence says, so every ISA gives the same bits. Baseline declarations: call only on a
// CPU with the ISA.
#pragma once

#include <cstdint>

namespace selfspec::kernels::cpu::detail {

// The slots a query sees, ascending: slot(i) = i for i < n_contiguous, else
// new_slots[i - n_contiguous] (a tree mask's visible new slots).
struct VisibleSlots {
  std::int64_t count = 0;
  std::int64_t n_contiguous = 0;
  const std::int32_t* new_slots = nullptr;
};

// K and V rows are f32, or bf16 given as their bits (std::uint16_t), widened exactly to f32 as
// they are loaded; one overload per element type.
//
// scores[h * n_keys + i] = the canonical dot (matmul.hpp) of q[h * head_dim ...] and
// k[i * head_dim ...], for the n_heads query heads of one KV head.
void attention_scores_avx512(const float* q, std::int64_t n_heads, std::int64_t head_dim,
                             const float* k, std::int64_t n_keys, float* scores);
void attention_scores_avx512(const float* q, std::int64_t n_heads, std::int64_t head_dim,
                             const std::uint16_t* k, std::int64_t n_keys, float* scores);

// out[h * out_stride + d] = Σ over i ascending of probs[h * probs_stride + i] * v[slot(i)][d],
// from 0, each product rounded, then added (no fused multiply-add), for h < n_heads.
void attention_values_avx2(const float* v, std::int64_t head_dim, const VisibleSlots& slots,
                           const float* probs, std::int64_t probs_stride, std::int64_t n_heads,
                           float* out, std::int64_t out_stride);
void attention_values_avx2(const std::uint16_t* v, std::int64_t head_dim, const VisibleSlots& slots,
                           const float* probs, std::int64_t probs_stride, std::int64_t n_heads,
                           float* out, std::int64_t out_stride);
void attention_values_avx512(const float* v, std::int64_t head_dim, const VisibleSlots& slots,
                             const float* probs, std::int64_t probs_stride, std::int64_t n_heads,
                             float* out, std::int64_t out_stride);
void attention_values_avx512(const std::uint16_t* v, std::int64_t head_dim,
                             const VisibleSlots& slots, const float* probs,
                             std::int64_t probs_stride, std::int64_t n_heads, float* out,
                             std::int64_t out_stride);

}  // namespace selfspec::kernels::cpu::detail
