// Scaled dot-product attention over the KV cache (see attention.hpp), parallel over (KV head,
// token) pairs: the query heads that share a KV head also share their visible slots, so they are
// computed together and each K and V row is read once for all of them.
//
// For query t of head h (KV head h / group) the visible slots are [0, n_past) plus the new slots
// the mask allows (causal: n_past + j for j <= t; tree: mask row t). The output is computed from
// those slots alone, always the same way:
//  1. raw scores for the slots [0, last visible] with the canonical dot of matmul.hpp (K rows as
//     an f32 weight matrix), then multiplied by scale;
//  2. m = max over visible scores; e_s = exp(score_s - m) in f32 (vector_exp.hpp's exp, the same
//     bits on every ISA); denominator = sum of e_s in double, ascending slot order;
//     p_s = f32(e_s / denominator);
//  3. out[d] = sum over visible slots, ascending, from 0, of p_s * v_s[d] in f32 (each product
//     rounded, then added).
// Masked slots are skipped, never summed as zeros, so a query gives bit-identical output whether it
// is alone (T = 1, n_past = its slot) or inside a batch, whatever the thread count and the ISA
// (the AVX2 and AVX-512 forms of steps 1 and 3: attention_simd.hpp). Scores live in a per-thread
// scratch buffer. A query that sees no slot at all gets zeros. A bf16 cache's K and V elements are
// widened exactly (bf16_to_f32) where steps 1 and 3 read them, and nothing else changes.
#include "kernels/cpu/attention.hpp"

#include "kernels/cpu/attention_simd.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/elementwise_simd.hpp"
#include "kernels/cpu/matmul_avx2.hpp"
#include "kernels/cpu/vector_exp.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace selfspec::kernels::cpu {
namespace {

struct Scratch {
  std::vector<float> scores;        // [query heads of the KV head][keys]
  std::vector<std::int32_t> slots;  // visible new slots of a tree-masked query, ascending
};

Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

// out[d] = Σ over visible slots i, ascending, from 0, of probs[i] * v[slot(i)][d]: the scalar form
// of step 3 (attention_simd.hpp's kernels vectorise it over d).
float widen(float x) {
  return x;
}
float widen(std::uint16_t x) {
  return bf16_to_f32(x);
}

template <class Elem>
void values_scalar(const Elem* v_head, std::int64_t head_dim, const detail::VisibleSlots& slots,
                   const float* probs, float* __restrict out) {
  std::fill(out, out + head_dim, 0.0f);
  auto add_row = [&](std::int64_t i, std::int64_t slot) {
    const Elem* __restrict v = v_head + slot * head_dim;
    const float p = probs[i];
    for (std::int64_t d = 0; d < head_dim; ++d) out[d] += p * widen(v[d]);
  };
  for (std::int64_t i = 0; i < slots.n_contiguous; ++i) add_row(i, i);
  for (std::int64_t i = slots.n_contiguous; i < slots.count; ++i) {
    add_row(i, slots.new_slots[i - slots.n_contiguous]);
  }
}

// Step 2 for one head: scale and compact the raw scores to the visible slots (slot(i) >= i: in
// place, ascending), then turn them into probabilities.
void softmax_visible(Isa isa, float* scores, const detail::VisibleSlots& slots, float scale) {
  const std::int64_t n = slots.count;
  float max_score = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t slot = i < slots.n_contiguous ? i : slots.new_slots[i - slots.n_contiguous];
    const float s = scores[slot] * scale;
    scores[i] = s;
    max_score = std::max(max_score, s);
  }
  if (isa == Isa::kAvx512) {
    detail::exp_shifted_avx512(scores, max_score, n);
  } else if (isa == Isa::kAvx2) {
    detail::exp_shifted_avx2(scores, max_score, n);
  } else {
    for (std::int64_t i = 0; i < n; ++i) scores[i] = exp_canonical(scores[i] - max_score);
  }
  double denominator = 0.0;
  for (std::int64_t i = 0; i < n; ++i) denominator += static_cast<double>(scores[i]);
  for (std::int64_t i = 0; i < n; ++i) {
    scores[i] = static_cast<float>(static_cast<double>(scores[i]) / denominator);
  }
}

// The cache's element type (std::uint16_t: bf16 bits) as matmul's weight dtype.
template <class Elem>
constexpr DType kElementDtype = std::is_same_v<Elem, float> ? DType::kF32 : DType::kBF16;

// Step 1 for the query heads of one KV head: scores[h * n_keys + i] for keys [0, n_keys).
// (matmul's rows kernels widen bf16 weights exactly, so they serve a bf16 cache as they are.)
template <class Elem>
void raw_scores(Isa isa, const float* q_heads, std::int64_t n_heads, std::int64_t head_dim,
                const Elem* k_head, std::int64_t n_keys, float* scores) {
  if (isa == Isa::kAvx512) {
    detail::attention_scores_avx512(q_heads, n_heads, head_dim, k_head, n_keys, scores);
  } else {
    const WeightView keys{kElementDtype<Elem>, k_head, n_keys, head_dim};
    detail::matmul_rows(isa, q_heads, n_heads, keys, 0, n_keys, scores);
  }
}

// Step 3 for the query heads of one KV head: out[h * head_dim + d].
template <class Elem>
void weighted_values(Isa isa, const Elem* v_head, std::int64_t head_dim,
                     const detail::VisibleSlots& slots, const float* probs,
                     std::int64_t probs_stride, std::int64_t n_heads, float* out) {
  if (isa == Isa::kAvx512) {
    detail::attention_values_avx512(v_head, head_dim, slots, probs, probs_stride, n_heads, out,
                                    head_dim);
  } else if (isa == Isa::kAvx2) {
    detail::attention_values_avx2(v_head, head_dim, slots, probs, probs_stride, n_heads, out,
                                  head_dim);
  } else {
    for (std::int64_t h = 0; h < n_heads; ++h) {
      values_scalar(v_head, head_dim, slots, probs + h * probs_stride, out + h * head_dim);
    }
  }
}

// attention() over a checked shape with T > 0, for a cache of Elem (f32, or bf16 bits).
template <class Elem>
void attend(const float* q, const Elem* k_cache, const Elem* v_cache, const AttentionShape& shape,
            const std::uint8_t* tree_mask, float scale, float* out) {
  const std::int64_t n_tokens = shape.n_tokens;
  const std::int64_t n_kv_heads = shape.n_kv_heads;
  const std::int64_t head_dim = shape.head_dim;
  const std::int64_t n_past = shape.n_past;
  const Isa isa = active_isa();
  const std::int64_t group = shape.n_q_heads / n_kv_heads;
  const std::int64_t q_row = shape.n_q_heads * head_dim;
  const std::int64_t head_stride = shape.capacity * head_dim;

  // Work units are (KV head, token, part of the KV head's query heads), numbered KV-head-major, so
  // a thread's range covers whole KV heads (the head stays in cache across its tokens) and causal
  // work (growing with t) is spread evenly over threads. A KV head's query heads are split into
  // parts only when there would be too few units to keep the threads busy (decode: one token);
  // which heads share a unit changes no result.
  const std::int64_t threads = num_threads();
  std::int64_t parts = 1;
  while (parts < group && n_tokens * n_kv_heads * parts < 2 * threads) ++parts;
  const std::int64_t part_heads = (group + parts - 1) / parts;
  parts = (group + part_heads - 1) / part_heads;
  // Enough units per chunk to outweigh waking a thread (~64k multiply-adds).
  const std::int64_t unit_work =
      std::max<std::int64_t>(1, (n_past + n_tokens) * head_dim * 2 * part_heads);
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / unit_work);
  parallel_for(n_kv_heads * n_tokens * parts, grain, [&](std::int64_t begin, std::int64_t end) {
    Scratch& scratch = thread_scratch();
    for (std::int64_t unit = begin; unit < end; ++unit) {
      const std::int64_t kv_head = unit / (n_tokens * parts);
      const std::int64_t t = unit / parts % n_tokens;
      const std::int64_t first_head = kv_head * group + unit % parts * part_heads;
      const std::int64_t n_heads = std::min(part_heads, (kv_head + 1) * group - first_head);
      const float* q_heads = q + t * q_row + first_head * head_dim;
      const Elem* k_head = k_cache + kv_head * head_stride;
      const Elem* v_head = v_cache + kv_head * head_stride;
      float* o = out + t * q_row + first_head * head_dim;
      const std::uint8_t* mask_row = tree_mask != nullptr ? tree_mask + t * n_tokens : nullptr;

      // Visible slots, ascending: [0, n_past) then the allowed new slots. For the causal mask
      // they are contiguous; for a tree mask the new ones are listed in scratch.slots.
      detail::VisibleSlots slots;
      if (mask_row == nullptr) {
        slots.count = n_past + t + 1;
        slots.n_contiguous = slots.count;
      } else {
        scratch.slots.clear();
        for (std::int64_t j = 0; j < n_tokens; ++j) {
          if (mask_row[j] != 0) scratch.slots.push_back(static_cast<std::int32_t>(n_past + j));
        }
        slots.count = n_past + static_cast<std::int64_t>(scratch.slots.size());
        slots.n_contiguous = n_past;
        slots.new_slots = scratch.slots.data();
      }
      if (slots.count == 0) {
        std::fill(o, o + n_heads * head_dim, 0.0f);
        continue;
      }
      const std::int64_t last_slot = slots.count > slots.n_contiguous
                                         ? slots.new_slots[slots.count - slots.n_contiguous - 1]
                                         : slots.count - 1;
      const std::int64_t n_keys = last_slot + 1;
      scratch.scores.resize(static_cast<std::size_t>(n_heads * n_keys));
      float* scores = scratch.scores.data();
      raw_scores(isa, q_heads, n_heads, head_dim, k_head, n_keys, scores);
      for (std::int64_t h = 0; h < n_heads; ++h) {
        softmax_visible(isa, scores + h * n_keys, slots, scale);
      }
      weighted_values(isa, v_head, head_dim, slots, scores, n_keys, n_heads, o);
    }
  });
}

}  // namespace

void attention(const float* q, const void* k_cache, const void* v_cache,
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
  const DType kv_dtype = shape.kv_dtype;
  SELFSPEC_CHECK(kv_dtype == DType::kF32 || kv_dtype == DType::kBF16,
                 "attention: a KV cache of {} (f32 and bf16 caches are supported)",
                 dtype_name(kv_dtype));
  if (n_tokens == 0) return;
  if (kv_dtype == DType::kBF16) {
    attend(q, static_cast<const std::uint16_t*>(k_cache),
           static_cast<const std::uint16_t*>(v_cache), shape, tree_mask, scale, out);
  } else {
    attend(q, static_cast<const float*>(k_cache), static_cast<const float*>(v_cache), shape,
           tree_mask, scale, out);
  }
}

}  // namespace selfspec::kernels::cpu
