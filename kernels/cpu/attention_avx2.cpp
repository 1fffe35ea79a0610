// AVX2 form of attention's value product (attention.hpp's canonical sequence, step 3): the
// probability-weighted sum of V rows for all query heads of a KV head, each product rounded and
// then added in ascending slot order, 8 dimensions per vector, each V row read once for all the
// heads. V rows are f32 or bf16 (widened exactly as they are loaded: a shift into the high half).
// (The scores use matmul's AVX2 rows kernel with the heads as tokens.) Runtime-dispatched
// (attention.cpp).
#include "kernels/cpu/attention_simd.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

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

// The 8 elements at p as f32, lanes at or past `width` zero (a full block when width is 8).
SELFSPEC_AVX2 inline __m256 load_block(const float* p, __m256i last, int width) {
  return width == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, last);
}
SELFSPEC_AVX2 inline __m256 load_block(const std::uint16_t* p, __m256i /*last*/, int width) {
  __m128i bits;
  if (width == 8) {
    bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else {
    alignas(16) std::uint16_t tail[8] = {};
    std::memcpy(tail, p, static_cast<std::size_t>(width) * sizeof(std::uint16_t));
    bits = _mm_load_si128(reinterpret_cast<const __m128i*>(tail));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

// One pass: dimensions [d0, d0 + 8 * kBlocks) (the last block's lanes limited by last, of which
// last_width are on) of heads [h0, h0 + hn), hn <= kAccumulators / kBlocks.
template <class Elem, int kBlocks>
SELFSPEC_AVX2 void values_pass(const Elem* v, std::int64_t head_dim, std::int64_t d0, __m256i last,
                               int last_width, const VisibleSlots& slots, const float* probs,
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
    const Elem* row = v + slot * head_dim + d0;
    __m256 x[kBlocks];
#pragma GCC unroll 4
    for (int b = 0; b < kBlocks; ++b) {
      x[b] = load_block(row + 8 * b, last, b + 1 < kBlocks ? 8 : last_width);
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

template <class Elem, int kBlocks>
SELFSPEC_AVX2 void values_blocks(const Elem* v, std::int64_t head_dim, std::int64_t d0,
                                 __m256i last, int last_width, const VisibleSlots& slots,
                                 const float* probs, std::int64_t probs_stride,
                                 std::int64_t n_heads, float* out, std::int64_t out_stride) {
  constexpr int kHeads = std::max(1, kAccumulators / kBlocks);
  for (std::int64_t h0 = 0; h0 < n_heads; h0 += kHeads) {
    values_pass<Elem, kBlocks>(v, head_dim, d0, last, last_width, slots, probs, probs_stride, h0,
                               std::min<std::int64_t>(kHeads, n_heads - h0), out, out_stride);
  }
}

template <class Elem>
using ValuesBlocks = void (*)(const Elem*, std::int64_t, std::int64_t, __m256i, int,
                              const VisibleSlots&, const float*, std::int64_t, std::int64_t, float*,
                              std::int64_t);
template <class Elem>
constexpr ValuesBlocks<Elem> kValuesBlocks[kMaxBlocks] = {
    values_blocks<Elem, 1>, values_blocks<Elem, 2>, values_blocks<Elem, 3>, values_blocks<Elem, 4>};

template <class Elem>
SELFSPEC_AVX2 void values(const Elem* v, std::int64_t head_dim, const VisibleSlots& slots,
                          const float* probs, std::int64_t probs_stride, std::int64_t n_heads,
                          float* out, std::int64_t out_stride) {
  const std::int64_t blocks = (head_dim + 7) / 8;
  for (std::int64_t first = 0; first < blocks; first += kMaxBlocks) {
    const std::int64_t n = std::min<std::int64_t>(kMaxBlocks, blocks - first);
    const std::int64_t d0 = first * 8;
    const std::int64_t last_width = std::min<std::int64_t>(8, head_dim - (d0 + 8 * (n - 1)));
    kValuesBlocks<Elem>[n - 1](v, head_dim, d0, lanes_below(last_width),
                               static_cast<int>(last_width), slots, probs, probs_stride, n_heads,
                               out, out_stride);
  }
}

}  // namespace

SELFSPEC_AVX2 void attention_values_avx2(const float* v, std::int64_t head_dim,
                                         const VisibleSlots& slots, const float* probs,
                                         std::int64_t probs_stride, std::int64_t n_heads,
                                         float* out, std::int64_t out_stride) {
  values(v, head_dim, slots, probs, probs_stride, n_heads, out, out_stride);
}
SELFSPEC_AVX2 void attention_values_avx2(const std::uint16_t* v, std::int64_t head_dim,
                                         const VisibleSlots& slots, const float* probs,
                                         std::int64_t probs_stride, std::int64_t n_heads,
                                         float* out, std::int64_t out_stride) {
  values(v, head_dim, slots, probs, probs_stride, n_heads, out, out_stride);
}

}  // namespace selfspec::kernels::cpu::detail
