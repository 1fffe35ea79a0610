// Rotary position embedding, HF rotate-half convention (see rope.hpp).
//
// Per token, the head_dim / 2 (cos, sin) pairs are computed once, in double from the double angle
// double(pos) * double(inv_freq[i]), rounded to f32, into a per-thread table, then applied to
// every head of the row: out[i] = x[i] * c - x[i + d/2] * s, out[i + d/2] = x[i + d/2] * c +
// x[i] * s in f32 (two rounded products and a rounded sum, no FMA contraction). A token's result
// therefore depends only on its own row and position, not on T or the thread count. Parallel over
// tokens. The table forms read the same (cos, sin) values from a table filled by the same
// expressions (rope_pair_values), so they give the same bits.
#include "kernels/cpu/rope.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/shared_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace selfspec::kernels::cpu {
namespace {

// cos and sin of pair i at `pos`, as f32: the one expression every form uses.
void rope_pair_values(std::int32_t pos, float inv_freq, float& c, float& s) {
  const double angle = static_cast<double>(pos) * static_cast<double>(inv_freq);
  c = static_cast<float>(std::cos(angle));
  s = static_cast<float>(std::sin(angle));
}

void rotate_row(float* row, std::int64_t n_heads, std::int64_t head_dim, const float* cos_table,
                const float* sin_table) {
  const std::int64_t half = head_dim / 2;
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

void check_shape(const char* what, std::int64_t n_tokens, std::int64_t row_stride,
                 std::int64_t n_heads, std::int64_t head_dim) {
  SELFSPEC_CHECK(head_dim > 0 && head_dim % 2 == 0, "{}: head_dim {} must be even", what, head_dim);
  SELFSPEC_CHECK(n_tokens >= 0 && n_heads >= 0 && row_stride >= n_heads * head_dim,
                 "{}: bad shape (tokens {}, heads {}, head_dim {}, row stride {})", what, n_tokens,
                 n_heads, head_dim, row_stride);
}

}  // namespace

void apply_rope(float* x, std::int64_t n_tokens, std::int64_t row_stride, std::int64_t n_heads,
                std::int64_t head_dim, const std::int32_t* positions,
                std::span<const float> inv_freq) {
  check_shape("apply_rope", n_tokens, row_stride, n_heads, head_dim);
  SELFSPEC_CHECK(static_cast<std::int64_t>(inv_freq.size()) == head_dim / 2,
                 "apply_rope: {} inverse frequencies for head_dim {}", inv_freq.size(), head_dim);
  if (n_tokens == 0 || n_heads == 0) return;
  const std::int64_t half = head_dim / 2;
  const std::int64_t grain = std::max<std::int64_t>(1, 4096 / (n_heads * head_dim));
  parallel_for(n_tokens, grain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> cos_sin(static_cast<std::size_t>(2 * half));
    float* cos_table = cos_sin.data();
    float* sin_table = cos_sin.data() + half;
    for (std::int64_t t = begin; t < end; ++t) {
      for (std::int64_t i = 0; i < half; ++i) {
        rope_pair_values(positions[t], inv_freq[static_cast<std::size_t>(i)], cos_table[i],
                         sin_table[i]);
      }
      rotate_row(x + t * row_stride, n_heads, head_dim, cos_table, sin_table);
    }
  });
}

void fill_rope_table(std::span<const float> inv_freq, std::int64_t first, std::int64_t count,
                     float* out) {
  SELFSPEC_CHECK(first >= 0 && count >= 0 && first + count <= std::int64_t{1} << 31,
                 "fill_rope_table: positions [{}, {}) outside [0, 2^31)", first, first + count);
  const auto half = static_cast<std::int64_t>(inv_freq.size());
  for (std::int64_t p = 0; p < count; ++p) {
    float* row = out + p * 2 * half;
    for (std::int64_t i = 0; i < half; ++i) {
      rope_pair_values(static_cast<std::int32_t>(first + p), inv_freq[static_cast<std::size_t>(i)],
                       row[i], row[half + i]);
    }
  }
}

void apply_rope_table(float* x, std::int64_t n_tokens, std::int64_t row_stride,
                      std::int64_t n_heads, std::int64_t head_dim, const std::int32_t* positions,
                      const float* table, std::int64_t table_positions) {
  check_shape("apply_rope_table", n_tokens, row_stride, n_heads, head_dim);
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    SELFSPEC_CHECK(positions[t] >= 0 && positions[t] < table_positions,
                   "RoPE: position {} of token {} is outside the table's {} positions",
                   positions[t], t, table_positions);
  }
  if (n_tokens == 0 || n_heads == 0) return;
  const std::int64_t half = head_dim / 2;
  const std::int64_t grain = std::max<std::int64_t>(1, 4096 / (n_heads * head_dim));
  parallel_for(n_tokens, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      const float* row = table + static_cast<std::int64_t>(positions[t]) * head_dim;
      rotate_row(x + t * row_stride, n_heads, head_dim, row, row + half);
    }
  });
}

}  // namespace selfspec::kernels::cpu
