// AVX-512 forms of attention's two products (attention.hpp's canonical sequence, step 1 and 3):
// the scores of a KV head's query heads, each the canonical dot of matmul.hpp (16 lanes of fused
// multiply-adds, then the fixed pairwise tree), and the probability-weighted sum of V rows, each
// product rounded and then added in ascending slot order, 16 dimensions per vector. All query
// heads of a KV head read each K and V row once. K and V rows are f32 or bf16 (widened exactly as
// they are loaded: a shift into the high half). Runtime-dispatched (attention.cpp).
#include "kernels/cpu/attention_simd.hpp"

#include "kernels/cpu/avx512_intrinsics.hpp"

#include <algorithm>
#include <cstdint>

#define SELFSPEC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

namespace selfspec::kernels::cpu::detail {
namespace {

// matmul.hpp's reduction of the 16 accumulators: a[i] = acc[i] + acc[i + 8], b[i] = a[i] +
// a[i + 4], c[i] = b[i] + b[i + 2], c[0] + c[1].
SELFSPEC_AVX512 inline float reduce_canonical(__m512 acc) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

// reduce_canonical of 16 accumulators at once, result j in lane j: the same additions of the same
// pairs, done on vectors that hold the partial sums of several accumulators side by side.
constexpr int kKeysPerBlock = 16;

SELFSPEC_AVX512 inline __m512 reduce_canonical_16(const __m512 (&acc)[kKeysPerBlock]) {
  // a[i] = acc[i] + acc[i + 8]: 128-bit lanes 0, 1 plus lanes 2, 3, two accumulators per vector.
  __m512 a[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    a[j] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * j], acc[2 * j + 1], 0x44),
                         _mm512_shuffle_f32x4(acc[2 * j], acc[2 * j + 1], 0xEE));
  }
  // b[i] = a[i] + a[i + 4]: four accumulators per vector, one per 128-bit lane.
  __m512 b[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    b[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], 0x88),
                         _mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], 0xDD));
  }
  // c[i] = b[i] + b[i + 2]: lane k of c[j] holds accumulators 8j + k and 8j + 4 + k.
  __m512 c[2];
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j) {
    c[j] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * j], b[2 * j + 1], 0x44),
                         _mm512_shuffle_ps(b[2 * j], b[2 * j + 1], 0xEE));
  }
  // c[0] + c[1]: element 4k + m holds accumulator 4m + k; put accumulator j in element j.
  const __m512 r =
      _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xDD));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, r);
}

SELFSPEC_AVX512 inline __mmask16 tail_mask(std::int64_t n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

// The 16 elements at p as f32, lanes off in `lanes` zero (and not read).
SELFSPEC_AVX512 inline __m512 load16(const float* p, __mmask16 lanes) {
  return _mm512_maskz_loadu_ps(lanes, p);
}
SELFSPEC_AVX512 inline __m512 load16(const std::uint16_t* p, __mmask16 lanes) {
  const __m256i bits = _mm256_maskz_loadu_epi16(lanes, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
SELFSPEC_AVX512 inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
SELFSPEC_AVX512 inline __m512 load16(const std::uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// Registers for the sums of one pass of the value product: heads × 16-float blocks.
constexpr int kAccumulators = 24;
constexpr int kMaxBlocks = 8;

// One pass: dimensions [d0, d0 + 16 * kBlocks) (the last block masked by last) of heads
// [h0, h0 + hn), hn <= kAccumulators / kBlocks.
template <class Elem, int kBlocks>
SELFSPEC_AVX512 void values_pass(const Elem* v, std::int64_t head_dim, std::int64_t d0,
                                 __mmask16 last, const VisibleSlots& slots, const float* probs,
                                 std::int64_t probs_stride, std::int64_t h0, std::int64_t hn,
                                 float* out, std::int64_t out_stride) {
  constexpr int kHeads = std::max(1, kAccumulators / kBlocks);
  __m512 acc[kHeads][kBlocks];
#pragma GCC unroll 24
  for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 8
    for (int b = 0; b < kBlocks; ++b) acc[h][b] = _mm512_setzero_ps();
  }
  const float* p = probs + h0 * probs_stride;
  auto add_row = [&](std::int64_t i, std::int64_t slot) SELFSPEC_AVX512 {
    const Elem* row = v + slot * head_dim + d0;
    __m512 x[kBlocks];
#pragma GCC unroll 8
    for (int b = 0; b < kBlocks; ++b) {
      x[b] = b + 1 < kBlocks ? load16(row + 16 * b) : load16(row + 16 * b, last);
    }
#pragma GCC unroll 24
    for (int h = 0; h < kHeads; ++h) {
      if (h < hn) {
        const __m512 ph = _mm512_set1_ps(p[h * probs_stride + i]);
#pragma GCC unroll 8
        for (int b = 0; b < kBlocks; ++b) {
          acc[h][b] = _mm512_add_ps(acc[h][b], _mm512_mul_ps(ph, x[b]));
        }
      }
    }
  };
  for (std::int64_t i = 0; i < slots.n_contiguous; ++i) add_row(i, i);
  for (std::int64_t i = slots.n_contiguous; i < slots.count; ++i) {
    add_row(i, slots.new_slots[i - slots.n_contiguous]);
  }
#pragma GCC unroll 24
  for (int h = 0; h < kHeads; ++h) {
    if (h < hn) {
      float* o = out + (h0 + h) * out_stride + d0;
#pragma GCC unroll 8
      for (int b = 0; b < kBlocks; ++b) {
        if (b + 1 < kBlocks) {
          _mm512_storeu_ps(o + 16 * b, acc[h][b]);
        } else {
          _mm512_mask_storeu_ps(o + 16 * b, last, acc[h][b]);
        }
      }
    }
  }
}

template <class Elem, int kBlocks>
SELFSPEC_AVX512 void values_blocks(const Elem* v, std::int64_t head_dim, std::int64_t d0,
                                   __mmask16 last, const VisibleSlots& slots, const float* probs,
                                   std::int64_t probs_stride, std::int64_t n_heads, float* out,
                                   std::int64_t out_stride) {
  constexpr int kHeads = std::max(1, kAccumulators / kBlocks);
  for (std::int64_t h0 = 0; h0 < n_heads; h0 += kHeads) {
    values_pass<Elem, kBlocks>(v, head_dim, d0, last, slots, probs, probs_stride, h0,
                               std::min<std::int64_t>(kHeads, n_heads - h0), out, out_stride);
  }
}

template <class Elem>
using ValuesBlocks = void (*)(const Elem*, std::int64_t, std::int64_t, __mmask16,
                              const VisibleSlots&, const float*, std::int64_t, std::int64_t, float*,
                              std::int64_t);
template <class Elem>
constexpr ValuesBlocks<Elem> kValuesBlocks[kMaxBlocks] = {
    values_blocks<Elem, 1>, values_blocks<Elem, 2>, values_blocks<Elem, 3>, values_blocks<Elem, 4>,
    values_blocks<Elem, 5>, values_blocks<Elem, 6>, values_blocks<Elem, 7>, values_blocks<Elem, 8>};

template <class Elem>
SELFSPEC_AVX512 void key_scores(const float* q, std::int64_t n_heads, std::int64_t head_dim,
                                const Elem* k, std::int64_t n_keys, float* scores) {
  const std::int64_t full = head_dim / 16 * 16;
  const __mmask16 tail = tail_mask(head_dim - full);
  for (std::int64_t h = 0; h < n_heads; ++h) {
    const float* query = q + h * head_dim;
    float* out = scores + h * n_keys;
    std::int64_t i = 0;
    for (; i + kKeysPerBlock <= n_keys; i += kKeysPerBlock) {
      __m512 acc[kKeysPerBlock];
#pragma GCC unroll 16
      for (int j = 0; j < kKeysPerBlock; ++j) acc[j] = _mm512_setzero_ps();
      const Elem* keys = k + i * head_dim;
      for (std::int64_t d = 0; d < head_dim; d += 16) {
        const __mmask16 lanes = d < full ? static_cast<__mmask16>(0xFFFF) : tail;
        const __m512 x = _mm512_maskz_loadu_ps(lanes, query + d);
#pragma GCC unroll 16
        for (int j = 0; j < kKeysPerBlock; ++j) {
          acc[j] = _mm512_fmadd_ps(x, load16(keys + j * head_dim + d, lanes), acc[j]);
        }
      }
      _mm512_storeu_ps(out + i, reduce_canonical_16(acc));
    }
    for (; i < n_keys; ++i) {
      const Elem* key = k + i * head_dim;
      __m512 acc = _mm512_setzero_ps();
      for (std::int64_t d = 0; d < full; d += 16) {
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(query + d), load16(key + d), acc);
      }
      if (full < head_dim) {
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, query + full), load16(key + full, tail),
                              acc);
      }
      out[i] = reduce_canonical(acc);
    }
  }
}

template <class Elem>
SELFSPEC_AVX512 void values(const Elem* v, std::int64_t head_dim, const VisibleSlots& slots,
                            const float* probs, std::int64_t probs_stride, std::int64_t n_heads,
                            float* out, std::int64_t out_stride) {
  const std::int64_t blocks = (head_dim + 15) / 16;
  for (std::int64_t first = 0; first < blocks; first += kMaxBlocks) {
    const std::int64_t n = std::min<std::int64_t>(kMaxBlocks, blocks - first);
    const std::int64_t d0 = first * 16;
    const std::int64_t last_width = std::min<std::int64_t>(16, head_dim - (d0 + 16 * (n - 1)));
    const __mmask16 last = tail_mask(last_width);
    kValuesBlocks<Elem>[n - 1](v, head_dim, d0, last, slots, probs, probs_stride, n_heads, out,
                               out_stride);
  }
}

}  // namespace

SELFSPEC_AVX512 void attention_scores_avx512(const float* q, std::int64_t n_heads,
                                             std::int64_t head_dim, const float* k,
                                             std::int64_t n_keys, float* scores) {
  key_scores(q, n_heads, head_dim, k, n_keys, scores);
}
SELFSPEC_AVX512 void attention_scores_avx512(const float* q, std::int64_t n_heads,
                                             std::int64_t head_dim, const std::uint16_t* k,
                                             std::int64_t n_keys, float* scores) {
  key_scores(q, n_heads, head_dim, k, n_keys, scores);
}

SELFSPEC_AVX512 void attention_values_avx512(const float* v, std::int64_t head_dim,
                                             const VisibleSlots& slots, const float* probs,
                                             std::int64_t probs_stride, std::int64_t n_heads,
                                             float* out, std::int64_t out_stride) {
  values(v, head_dim, slots, probs, probs_stride, n_heads, out, out_stride);
}
SELFSPEC_AVX512 void attention_values_avx512(const std::uint16_t* v, std::int64_t head_dim,
                                             const VisibleSlots& slots, const float* probs,
                                             std::int64_t probs_stride, std::int64_t n_heads,
                                             float* out, std::int64_t out_stride) {
  values(v, head_dim, slots, probs, probs_stride, n_heads, out, out_stride);
}

}  // namespace selfspec::kernels::cpu::detail
