// Rotary position embedding, HF rotate-half convention (see rope.hpp).
//
// Per token, the head_dim / 2 (cos, sin) pairs are computed once, in double from the double angle
// double(pos) * double(inv_freq[i]), rounded to f32, into a per-thread table, then applied to
// every head of the row: out[i] = x[i] * c - x[i + d/2] * s, out[i + d/2] = x[i + d/2] * c +
// x[i] * s in f32 (two rounded products and a rounded sum, no FMA contraction). A token's result
// therefore depends only on its own row and position, not on T or the thread count. Parallel over
// tokens.
#include "kernels/cpu/rope.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/shared_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace selfspec::kernels::cpu {

void apply_rope(float* x, std::int64_t n_tokens, std::int64_t row_stride, std::int64_t n_heads,
                std::int64_t head_dim, const std::int32_t* positions,
                std::span<const float> inv_freq) {
  SELFSPEC_CHECK(head_dim > 0 && head_dim % 2 == 0, "apply_rope: head_dim {} must be even",
                 head_dim);
  SELFSPEC_CHECK(static_cast<std::int64_t>(inv_freq.size()) == head_dim / 2,
                 "apply_rope: {} inverse frequencies for head_dim {}", inv_freq.size(), head_dim);
  SELFSPEC_CHECK(n_tokens >= 0 && n_heads >= 0 && row_stride >= n_heads * head_dim,
                 "apply_rope: bad shape (tokens {}, heads {}, head_dim {}, row stride {})",
                 n_tokens, n_heads, head_dim, row_stride);
  if (n_tokens == 0 || n_heads == 0) return;
  const std::int64_t half = head_dim / 2;
  const std::int64_t grain = std::max<std::int64_t>(1, 4096 / (n_heads * head_dim));
  parallel_for(n_tokens, grain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> cos_sin(static_cast<std::size_t>(2 * half));
    float* cos_table = cos_sin.data();
    float* sin_table = cos_sin.data() + half;
    for (std::int64_t t = begin; t < end; ++t) {
      const double pos = static_cast<double>(positions[t]);
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = pos * static_cast<double>(inv_freq[static_cast<std::size_t>(i)]);
        cos_table[i] = static_cast<float>(std::cos(angle));
        sin_table[i] = static_cast<float>(std::sin(angle));
      }
      float* row = x + t * row_stride;
      for (std::int64_t h = 0; h < n_heads; ++h) {
        float* first = row + h * head_dim;
        float* second = first + half;
        for (std::int64_t i = 0; i < half; ++i) {
          const RopePair rotated = rope_rotate(first[i], second[i], cos_table[i], sin_table[i]);
          first[i] = rotated.first;
          second[i] = rotated.second;
        }
      }
    }
  });
}

}  // namespace selfspec::kernels::cpu
