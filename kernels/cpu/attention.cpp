// Scaled dot-product attention over the KV cache (see attention.hpp), parallel over (head, token)
// pairs.
//
// For query t of head h (KV head h / group) the visible slots are [0, n_past) plus the new slots
// the mask allows (causal: n_past + j for j <= t; tree: mask row t). The output is computed from
// those slots alone, always the same way:
//  1. raw scores for the slots [0, last visible] with the canonical dot (the single-threaded row
//     kernel of matmul, K rows as an f32 weight matrix), then multiplied by scale;
//  2. m = max over visible scores; e_s = exp(score_s - m) in f32 (vector_exp.hpp's exp, the same
//     bits on every ISA); denominator = sum of e_s in double, ascending slot order;
//     p_s = f32(e_s / denominator);
//  3. out[d] = sum over visible slots, ascending, of p_s * v_s[d] in f32 (mul then add, 4 slots
//     per pass over d so the accumulator stays in registers; the per-element order is unchanged).
// Masked slots are skipped, never summed as zeros, so a query gives bit-identical output whether it
// is alone (T = 1, n_past = its slot) or inside a batch, and whatever the thread count. Scores live
// in a per-thread scratch buffer. A query that sees no slot at all gets zeros.
#include "kernels/cpu/attention.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/elementwise_simd.hpp"
#include "kernels/cpu/matmul_avx2.hpp"
#include "kernels/cpu/vector_exp.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace selfspec::kernels::cpu {
namespace {

struct Scratch {
  std::vector<float> scores;
  std::vector<float> acc;
  std::vector<std::int32_t> slots;  // visible new slots of a tree-masked query, ascending
};

Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

// acc[d] += probs[i] * v[slot(i)][d] for i < n in order; 4 slots per sweep over d (the order of
// the additions into each acc[d] is unchanged).
template <class SlotOf>
void accumulate_values(const float* v_head, std::int64_t head_dim, SlotOf slot_of,
                       const float* probs, std::int64_t n, float* __restrict acc) {
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float* __restrict v0 = v_head + slot_of(i) * head_dim;
    const float* __restrict v1 = v_head + slot_of(i + 1) * head_dim;
    const float* __restrict v2 = v_head + slot_of(i + 2) * head_dim;
    const float* __restrict v3 = v_head + slot_of(i + 3) * head_dim;
    const float p0 = probs[i];
    const float p1 = probs[i + 1];
    const float p2 = probs[i + 2];
    const float p3 = probs[i + 3];
    for (std::int64_t d = 0; d < head_dim; ++d) {
      float a = acc[d];
      a += p0 * v0[d];
      a += p1 * v1[d];
      a += p2 * v2[d];
      a += p3 * v3[d];
      acc[d] = a;
    }
  }
  for (; i < n; ++i) {
    const float* __restrict v = v_head + slot_of(i) * head_dim;
    const float p = probs[i];
    for (std::int64_t d = 0; d < head_dim; ++d) acc[d] += p * v[d];
  }
}

}  // namespace

void attention(const float* q, const float* k_cache, const float* v_cache,
               const AttentionShape& shape, const std::uint8_t* tree_mask, float scale,
               float* out) {
  const std::int64_t n_tokens = shape.n_tokens;
  const std::int64_t n_q_heads = shape.n_q_heads;
  const std::int64_t n_kv_heads = shape.n_kv_heads;
  const std::int64_t head_dim = shape.head_dim;
  const std::int64_t n_past = shape.n_past;
  const std::int64_t capacity = shape.capacity;
  SELFSPEC_CHECK(n_tokens >= 0 && n_q_heads > 0 && n_kv_heads > 0 && head_dim > 0 && n_past >= 0,
                 "attention: bad shape (tokens {}, q heads {}, kv heads {}, head_dim {}, "
                 "n_past {})",
                 n_tokens, n_q_heads, n_kv_heads, head_dim, n_past);
  SELFSPEC_CHECK(n_q_heads % n_kv_heads == 0,
                 "attention: {} query heads are not a multiple of {} kv heads", n_q_heads,
                 n_kv_heads);
  SELFSPEC_CHECK(n_past + n_tokens <= capacity,
                 "attention: {} past + {} new tokens exceed the cache capacity {}", n_past,
                 n_tokens, capacity);
  SELFSPEC_CHECK(capacity <= std::numeric_limits<std::int32_t>::max(),
                 "attention: cache capacity {} too large", capacity);
  if (n_tokens == 0) return;

  const Isa isa = active_isa();
  const std::int64_t group = n_q_heads / n_kv_heads;
  const std::int64_t q_row = n_q_heads * head_dim;
  const std::int64_t head_stride = capacity * head_dim;

  // Pairs are numbered head-major, so a thread's range covers whole heads (the KV head stays in
  // cache across its tokens) and causal work (growing with t) is spread evenly over threads.
  // Enough (token, head) pairs per chunk to outweigh waking a thread (~64k multiply-adds).
  const std::int64_t pair_work = std::max<std::int64_t>(1, (n_past + n_tokens) * head_dim * 2);
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / pair_work);
  parallel_for(n_tokens * n_q_heads, grain, [&](std::int64_t begin, std::int64_t end) {
    Scratch& scratch = thread_scratch();
    for (std::int64_t pair = begin; pair < end; ++pair) {
      const std::int64_t h = pair / n_tokens;
      const std::int64_t t = pair % n_tokens;
      const std::int64_t kv_head = h / group;
      const float* q_vec = q + t * q_row + h * head_dim;
      const float* k_head = k_cache + kv_head * head_stride;
      const float* v_head = v_cache + kv_head * head_stride;
      float* o = out + t * q_row + h * head_dim;
      const std::uint8_t* mask_row = tree_mask != nullptr ? tree_mask + t * n_tokens : nullptr;

      // Visible slots, ascending: [0, n_past) then the allowed new slots. For the causal mask
      // they are contiguous; for a tree mask the new ones are listed in scratch.slots.
      std::int64_t n_new = 0;
      if (mask_row == nullptr) {
        n_new = t + 1;
      } else {
        scratch.slots.clear();
        for (std::int64_t j = 0; j < n_tokens; ++j) {
          if (mask_row[j] != 0) scratch.slots.push_back(static_cast<std::int32_t>(n_past + j));
        }
        n_new = static_cast<std::int64_t>(scratch.slots.size());
      }
      const std::int64_t n_visible = n_past + n_new;
      if (n_visible == 0) {
        std::fill(o, o + head_dim, 0.0f);
        continue;
      }
      const std::int32_t* new_slots = scratch.slots.data();
      const bool contiguous = mask_row == nullptr;
      auto slot_of = [&](std::int64_t i) -> std::int64_t {
        return contiguous || i < n_past ? i : new_slots[i - n_past];
      };

      // 1. scores for the slots [0, last visible]
      const std::int64_t score_end = slot_of(n_visible - 1) + 1;
      scratch.scores.resize(static_cast<std::size_t>(score_end));
      float* scores = scratch.scores.data();
      const WeightView keys{DType::kF32, k_head, score_end, head_dim};
      detail::matmul_rows(isa, q_vec, 1, keys, 0, score_end, scores);
      // Scale and compact to the visible slots (slot_of(i) >= i: in place, ascending).
      float max_score = -std::numeric_limits<float>::infinity();
      for (std::int64_t i = 0; i < n_visible; ++i) {
        const float s = scores[slot_of(i)] * scale;
        scores[i] = s;
        max_score = std::max(max_score, s);
      }

      // 2. softmax
      if (isa == Isa::kAvx512) {
        detail::exp_shifted_avx512(scores, max_score, n_visible);
      } else if (isa == Isa::kAvx2) {
        detail::exp_shifted_avx2(scores, max_score, n_visible);
      } else {
        for (std::int64_t i = 0; i < n_visible; ++i)
          scores[i] = exp_canonical(scores[i] - max_score);
      }
      double denominator = 0.0;
      for (std::int64_t i = 0; i < n_visible; ++i) denominator += static_cast<double>(scores[i]);
      for (std::int64_t i = 0; i < n_visible; ++i) {
        scores[i] = static_cast<float>(static_cast<double>(scores[i]) / denominator);
      }

      // 3. weighted sum of V
      scratch.acc.assign(static_cast<std::size_t>(head_dim), 0.0f);
      accumulate_values(v_head, head_dim, slot_of, scores, n_visible, scratch.acc.data());
      std::copy(scratch.acc.begin(), scratch.acc.end(), o);
    }
  });
}

}  // namespace selfspec::kernels::cpu
