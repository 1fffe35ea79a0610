// AVX2 form of attention's value product (attention.hpp's canonical sequence, step 3): the
// probability-weighted sum of V rows for all query heads of a KV head, each product rounded and
// then added in ascending slot order, 8 dimensions per vector, each V row read once for all the
// heads. (The scores use matmul's AVX2 rows kernel with the heads as tokens.) Runtime-dispatched
// (attention.cpp).
#include "kernels/cpu/attention_simd.hpp"

#include <immintrin.h>

#include <algorithm>

#define SELFSPEC_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace selfspec::kernels::cpu::detail {
namespace {

// Registers for the sums of one pass: heads × 8-float blocks (16 ymm registers in all).
constexpr int kAccumulators = 8;
constexpr int kMaxBlocks = 4;

SELFSPEC_AVX2 inline __m256i lanes_below(std::int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// One pass: dimensions [d0, d0 + 8 * kBlocks) (the last block's lanes limited by last) of heads
// [h0, h0 + hn), hn <= kAccumulators / kBlocks.
template <int kBlocks>
SELFSPEC_AVX2 void values_pass(const float* v, std::int64_t head_dim, std::int64_t d0, __m256i last,
                               const VisibleSlots& slots, const float* probs,
                               std::int64_t probs_stride, std::int64_t h0, std::int64_t hn,
                               float* out, std::int64_t out_stride) {
  constexpr int kHeads = std::max(1, kAccumulators / kBlocks);
  __m256 acc[kHeads][kBlocks];
#pragma GCC unroll 8
  for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 4
    for (int b = 0; b < kBlocks; ++b) acc[h][b] = _mm256_setzero_ps();
  }
  const float* p = probs + h0 * probs_stride;
  auto add_row = [&](std::int64_t i, std::int64_t slot) SELFSPEC_AVX2 {
    const float* row = v + slot * head_dim + d0;
    __m256 x[kBlocks];
#pragma GCC unroll 4
    for (int b = 0; b < kBlocks; ++b) {
      x[b] = b + 1 < kBlocks ? _mm256_loadu_ps(row + 8 * b) : _mm256_maskload_ps(row + 8 * b, last);
    }
#pragma GCC unroll 8
    for (int h = 0; h < kHeads; ++h) {
      if (h < hn) {
        const __m256 ph = _mm256_set1_ps(p[h * probs_stride + i]);
#pragma GCC unroll 4
        for (int b = 0; b < kBlocks; ++b) {
          acc[h][b] = _mm256_add_ps(acc[h][b], _mm256_mul_ps(ph, x[b]));
        }
      }
    }
  };
  for (std::int64_t i = 0; i < slots.n_contiguous; ++i) add_row(i, i);
  for (std::int64_t i = slots.n_contiguous; i < slots.count; ++i) {
    add_row(i, slots.new_slots[i - slots.n_contiguous]);
  }
#pragma GCC unroll 8
  for (int h = 0; h < kHeads; ++h) {
    if (h < hn) {
      float* o = out + (h0 + h) * out_stride + d0;
#pragma GCC unroll 4
      for (int b = 0; b < kBlocks; ++b) {
        if (b + 1 < kBlocks) {
          _mm256_storeu_ps(o + 8 * b, acc[h][b]);
        } else {
          _mm256_maskstore_ps(o + 8 * b, last, acc[h][b]);
        }
      }
    }
  }
}

template <int kBlocks>
SELFSPEC_AVX2 void values_blocks(const float* v, std::int64_t head_dim, std::int64_t d0,
                                 __m256i last, const VisibleSlots& slots, const float* probs,
                                 std::int64_t probs_stride, std::int64_t n_heads, float* out,
                                 std::int64_t out_stride) {
  constexpr int kHeads = std::max(1, kAccumulators / kBlocks);
  for (std::int64_t h0 = 0; h0 < n_heads; h0 += kHeads) {
    values_pass<kBlocks>(v, head_dim, d0, last, slots, probs, probs_stride, h0,
                         std::min<std::int64_t>(kHeads, n_heads - h0), out, out_stride);
  }
}

using ValuesBlocks = void (*)(const float*, std::int64_t, std::int64_t, __m256i,
                              const VisibleSlots&, const float*, std::int64_t, std::int64_t, float*,
                              std::int64_t);
constexpr ValuesBlocks kValuesBlocks[kMaxBlocks] = {values_blocks<1>, values_blocks<2>,
                                                    values_blocks<3>, values_blocks<4>};

}  // namespace

SELFSPEC_AVX2 void attention_values_avx2(const float* v, std::int64_t head_dim,
                                         const VisibleSlots& slots, const float* probs,
                                         std::int64_t probs_stride, std::int64_t n_heads,
                                         float* out, std::int64_t out_stride) {
  const std::int64_t blocks = (head_dim + 7) / 8;
  for (std::int64_t first = 0; first < blocks; first += kMaxBlocks) {
    const std::int64_t n = std::min<std::int64_t>(kMaxBlocks, blocks - first);
    const std::int64_t d0 = first * 8;
    const __m256i last = lanes_below(head_dim - (d0 + 8 * (n - 1)));
    kValuesBlocks[n - 1](v, head_dim, d0, last, slots, probs, probs_stride, n_heads, out,
                         out_stride);
  }
}

}  // namespace selfspec::kernels::cpu::detail
