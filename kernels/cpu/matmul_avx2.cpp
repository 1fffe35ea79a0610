// AVX2/FMA/F16C matmul kernels (runtime-dispatched; the rest of the build stays baseline x86-64).
//
// Every function that touches AVX2 carries SELFSPEC_AVX2 (target attribute) and has internal
// linkage; the detail:: entry points declared in matmul_avx2.hpp are baseline functions that only
// forward here, so no AVX2 instruction can leak into code run on a CPU without it.
//
// Canonical order (matmul.hpp): the 16 accumulator lanes of one output live in two ymm registers
// (lo, hi); each 16-element chunk does one fma per lane, and the fixed tree (a = acc[i] + acc[i+8],
// then +4, +2, +1) ends the output. Which logical lane sits in which physical lane is a property
// of the weight type:
//  * f32, f16: lo = lanes 0..7, hi = lanes 8..15 (plain loads; f16 via VCVTPH2PS, exact);
//  * bf16: one 256-bit load of 16 weights, widened to f32 by interleaving with zeros
//    (vpunpck{l,h}wd: an exact << 16 that runs on the shuffle port and leaves both FMA ports free),
//    so lo = lanes {0-3, 8-11} and hi = lanes {4-7, 12-15}; x is permuted the same way once per
//    call, and the tree is adjusted so that it adds exactly the same logical lanes.
// x is prepared into a padded copy (zeros beyond K, permuted for bf16; for T > 1 laid out in the
// column blocks below): once per matmul() by prepare_x_avx2, shared by all row chunks, or per call
// of matmul_rows_avx2 / dot_avx2 (f32/f16 with K % 16 == 0 use x in place there). A weight tail
// is copied into a zero-padded chunk. So every output is bit-identical to the scalar std::fmaf
// emulation in matmul.cpp.
//
// Tiling changes which outputs are computed together and when, never the order inside one output
// (an output's 16 lane accumulators may be parked in memory between column blocks and reloaded:
// that is exact):
//  * decode (T = 1): 4 rows at a time (8 independent accumulators hide the FMA latency and keep 4
//    weight streams in flight) with software prefetch 512 B ahead: memory-bandwidth bound;
//  * T > 1 (verification, prefill): groups of 6 rows. A group's weights are walked in column
//    blocks (1024 elements, fewer for large T); for each block every token tile runs over the
//    block before the next block is touched, so each weight cache line comes from DRAM once and
//    is then reused from L1 by all T tokens, and x of the block stays in L1/L2. The 16 lane
//    accumulators of every (token, row) of the group live in a small state array between blocks.
//    Token tiles: pairs of tokens over 6 rows (x of both tokens in registers, each weight vector
//    loaded and converted once per pair: 12 accumulators, 2 x loads + 6 weight loads per 12 fmas),
//    one half (8 lanes) at a time; an odd token count ends with a triple over 3 rows. The first
//    pair of a block, which takes the weights from memory, runs both halves in one loop over
//    3 rows so each line is used completely while in flight. While a group computes, the weight
//    lines of the next column block are prefetched a few at a time, spread over all its token
//    tiles, so the DRAM stream overlaps the compute instead of stalling the first tile.
#include "kernels/cpu/matmul_avx2.hpp"

#include "core/aligned_buffer.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#define SELFSPEC_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace selfspec::kernels::cpu::detail {
namespace {

constexpr std::int64_t kLanes = 16;
// How far ahead of the current chunk each weight row is prefetched.
constexpr std::int64_t kPrefetchBytes = 512;

// f32 result of the canonical tree when lo = logical lanes 0..7 and hi = lanes 8..15.
SELFSPEC_AVX2 inline float reduce_plain(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);                                               // a[0..8)
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  // b[0..4)
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));                                  // c[0..2)
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

// Same tree when lo = logical lanes {0-3, 8-11} and hi = {4-7, 12-15} (the bf16 layout).
SELFSPEC_AVX2 inline float reduce_interleaved(__m256 lo, __m256 hi) {
  const __m128 a_low = _mm_add_ps(_mm256_castps256_ps128(lo), _mm256_extractf128_ps(lo, 1));
  const __m128 a_high = _mm_add_ps(_mm256_castps256_ps128(hi), _mm256_extractf128_ps(hi, 1));
  const __m128 b = _mm_add_ps(a_low, a_high);
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

struct F32Weights {
  using Elem = float;
  static constexpr bool kPlainLayout = true;
  SELFSPEC_AVX2 static __m256 load_lo(const Elem* p) { return _mm256_loadu_ps(p); }
  SELFSPEC_AVX2 static __m256 load_hi(const Elem* p) { return _mm256_loadu_ps(p + 8); }
  SELFSPEC_AVX2 static float reduce(__m256 lo, __m256 hi) { return reduce_plain(lo, hi); }
};

struct F16Weights {
  using Elem = std::uint16_t;
  static constexpr bool kPlainLayout = true;
  SELFSPEC_AVX2 static __m256 load_lo(const Elem* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  SELFSPEC_AVX2 static __m256 load_hi(const Elem* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  }
  SELFSPEC_AVX2 static float reduce(__m256 lo, __m256 hi) { return reduce_plain(lo, hi); }
};

struct Bf16Weights {
  using Elem = std::uint16_t;
  static constexpr bool kPlainLayout = false;
  // (0, w) 16-bit pairs are the f32 values w << 16: lanes {0-3, 8-11} and {4-7, 12-15}.
  SELFSPEC_AVX2 static __m256 load_lo(const Elem* p) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), raw));
  }
  SELFSPEC_AVX2 static __m256 load_hi(const Elem* p) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), raw));
  }
  SELFSPEC_AVX2 static float reduce(__m256 lo, __m256 hi) { return reduce_interleaved(lo, hi); }
};

// x in the physical lane layout of W, zero-padded to whole chunks: [n_tokens][stride].
struct PreparedX {
  const float* data = nullptr;
  std::int64_t stride = 0;
};

template <class W>
SELFSPEC_AVX2 PreparedX prepare_x(const float* x, std::int64_t n_tokens, std::int64_t cols) {
  if (W::kPlainLayout && cols % kLanes == 0) return PreparedX{x, cols};
  thread_local AlignedBuffer<float> buffer;
  const std::int64_t stride = (cols + kLanes - 1) / kLanes * kLanes;
  buffer.ensure(static_cast<std::size_t>(n_tokens * stride));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    const float* src = x + t * cols;
    float* dst = buffer.data() + t * stride;
    for (std::int64_t k = 0; k < stride; k += kLanes) {
      float chunk[kLanes] = {};
      std::memcpy(chunk, src + k,
                  static_cast<std::size_t>(std::min(kLanes, cols - k)) * sizeof(float));
      if constexpr (W::kPlainLayout) {
        std::memcpy(dst + k, chunk, sizeof chunk);
      } else {  // logical {0-3, 8-11} then {4-7, 12-15}
        std::memcpy(dst + k, chunk, 4 * sizeof(float));
        std::memcpy(dst + k + 4, chunk + 8, 4 * sizeof(float));
        std::memcpy(dst + k + 8, chunk + 4, 4 * sizeof(float));
        std::memcpy(dst + k + 12, chunk + 12, 4 * sizeof(float));
      }
    }
  }
  return PreparedX{buffer.data(), stride};
}

// One 16-element chunk of a kTok x kRows tile: x rows at x + t * x_stride (prepared layout),
// weight rows at w + r * w_stride.
template <class W, int kTok, int kRows>
SELFSPEC_AVX2 inline void tile_step(const float* x, std::int64_t x_stride,
                                    const typename W::Elem* w, std::int64_t w_stride,
                                    __m256 (&lo)[kTok][kRows], __m256 (&hi)[kTok][kRows]) {
  __m256 wv[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) wv[r] = W::load_lo(w + r * w_stride);
#pragma GCC unroll 8
  for (int t = 0; t < kTok; ++t) {
    const __m256 xv = _mm256_loadu_ps(x + t * x_stride);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) lo[t][r] = _mm256_fmadd_ps(xv, wv[r], lo[t][r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) wv[r] = W::load_hi(w + r * w_stride);
#pragma GCC unroll 8
  for (int t = 0; t < kTok; ++t) {
    const __m256 xv = _mm256_loadu_ps(x + t * x_stride + 8);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) hi[t][r] = _mm256_fmadd_ps(xv, wv[r], hi[t][r]);
  }
}

// y[t * y_stride + r] = dot(token t of x, row r of w) for t < kTok, r < kRows.
template <class W, int kTok, int kRows, bool kPrefetch>
SELFSPEC_AVX2 void tile(PreparedX x, const typename W::Elem* w, std::int64_t cols, float* y,
                        std::int64_t y_stride) {
  using Elem = typename W::Elem;
  __m256 lo[kTok][kRows];
  __m256 hi[kTok][kRows];
#pragma GCC unroll 8
  for (int t = 0; t < kTok; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      lo[t][r] = _mm256_setzero_ps();
      hi[t][r] = _mm256_setzero_ps();
    }
  }
  const std::int64_t k_full = cols / kLanes * kLanes;
  for (std::int64_t k = 0; k < k_full; k += kLanes) {
    if constexpr (kPrefetch) {
      constexpr std::int64_t kAhead = kPrefetchBytes / static_cast<std::int64_t>(sizeof(Elem));
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        // Address arithmetic only: prefetching past the end of a row or buffer cannot fault.
        const auto address = reinterpret_cast<std::uintptr_t>(w + r * cols + k) +
                             static_cast<std::uintptr_t>(kAhead * sizeof(Elem));
        _mm_prefetch(reinterpret_cast<const char*>(address), _MM_HINT_T0);
      }
    }
    tile_step<W, kTok, kRows>(x.data + k, x.stride, w + k, cols, lo, hi);
  }
  if (k_full < cols) {
    alignas(32) Elem w_tail[kRows][kLanes] = {};
    for (int r = 0; r < kRows; ++r) {
      std::memcpy(w_tail[r], w + r * cols + k_full,
                  static_cast<std::size_t>(cols - k_full) * sizeof(Elem));
    }
    tile_step<W, kTok, kRows>(x.data + k_full, x.stride, &w_tail[0][0], kLanes, lo, hi);
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTok; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) y[t * y_stride + r] = W::reduce(lo[t][r], hi[t][r]);
  }
}

// Decode: one token, 4 rows per tile, the remaining rows one by one.
template <class W>
SELFSPEC_AVX2 void rows_one_token(PreparedX x, const typename W::Elem* w, std::int64_t cols,
                                  std::int64_t row_begin, std::int64_t row_end, float* y) {
  std::int64_t n = row_begin;
  for (; n + 4 <= row_end; n += 4) tile<W, 1, 4, true>(x, w + n * cols, cols, y + n, 1);
  for (; n < row_end; ++n) tile<W, 1, 1, true>(x, w + n * cols, cols, y + n, 1);
}

// ---- Several tokens ----------------------------------------------------------------------------

// Rows per group: all token tiles run over a group's column block before the next block.
constexpr int kGroupRows = 6;
// Column block (elements): 1024, halved (down to 256) while the x of a block of all tokens
// (T * block * 4 bytes) would exceed 128 KiB.
constexpr std::int64_t kColBlock = 1024;
constexpr std::int64_t kMinColBlock = 256;
constexpr std::int64_t kXBlockBytes = std::int64_t{128} << 10;

constexpr std::int64_t column_block(std::int64_t n_tokens) {
  std::int64_t block = kColBlock;
  while (block > kMinColBlock &&
         n_tokens * block * static_cast<std::int64_t>(sizeof(float)) > kXBlockBytes) {
    block /= 2;
  }
  return block;
}

template <class S, int kHalf>
SELFSPEC_AVX2 inline __m256 load_half(const typename S::Elem* p) {
  if constexpr (kHalf == 0) {
    return S::load_lo(p);
  } else {
    return S::load_hi(p);
  }
}

// Pins a value to a register, so the compiler does not fold its load into every fma that uses it
// (which would load it once per use).
#define SELFSPEC_IN_REGISTER(v) __asm__("" : "+x"(v))

// The weight lines of the next column block of a group, prefetched kGroupRows lines (one per row)
// every `interval` chunk iterations, spread over all token tiles of the current block.
struct Prefetch {
  std::uintptr_t base = 0;      // first line of the target in row 0
  std::int64_t row_stride = 0;  // bytes
  std::int64_t lines = 0;       // lines per row
  std::int64_t next = 0;        // next line to prefetch
  std::int64_t interval = 1;    // chunk iterations between prefetches
  std::int64_t countdown = 1;
};

SELFSPEC_AVX2 inline void prefetch_line(const Prefetch& pf, std::int64_t line) {
  // Address arithmetic only: prefetching past the end of a row or buffer cannot fault.
  const std::uintptr_t address = pf.base + static_cast<std::uintptr_t>(line * 64);
#pragma GCC unroll 8
  for (int r = 0; r < kGroupRows; ++r) {
    _mm_prefetch(
        reinterpret_cast<const char*>(address + static_cast<std::uintptr_t>(r * pf.row_stride)),
        _MM_HINT_T0);
  }
}

SELFSPEC_AVX2 inline void prefetch_step(Prefetch& pf, std::int64_t& countdown, std::int64_t& next) {
  if (--countdown == 0) {
    countdown = pf.interval;
    if (next < pf.lines) prefetch_line(pf, next++);
  }
}

struct TileArgs {
  const float* x;             // token 0 of the tile at its first chunk (prepared layout)
  std::int64_t x_stride;      // between tokens
  std::int64_t w_stride;      // between weight rows (elements)
  std::int64_t n_chunks;      // 16-element chunks to run
  float* state;               // accumulators: token t, row r at state[t * state_stride + r * 16]
  std::int64_t state_stride;  // between tokens
  Prefetch* pf;               // null: no prefetching
};

// One half (kHalf: physical lanes 0..7 or 8..15) of a kTok x kRows tile: per chunk, the x of the
// kTok tokens is loaded into registers, then each weight row is loaded and converted once and
// used for all kTok tokens.
template <class S, int kTok, int kRows, int kHalf, bool kPrefetch>
SELFSPEC_AVX2 void tile_half(const TileArgs& a, const typename S::Elem* w) {
  __m256 acc[kTok][kRows];
#pragma GCC unroll 8
  for (int t = 0; t < kTok; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      acc[t][r] = _mm256_loadu_ps(a.state + t * a.state_stride + r * kLanes + 8 * kHalf);
    }
  }
  const float* x = a.x + 8 * kHalf;
  const std::int64_t x_stride = a.x_stride;
  const std::int64_t w_stride = a.w_stride;
  std::int64_t countdown = kPrefetch ? a.pf->countdown : 0;
  std::int64_t next = kPrefetch ? a.pf->next : 0;
  for (std::int64_t c = 0; c < a.n_chunks; ++c) {
    if constexpr (kPrefetch) prefetch_step(*a.pf, countdown, next);
    __m256 xv[kTok];
#pragma GCC unroll 8
    for (int t = 0; t < kTok; ++t) {
      xv[t] = _mm256_loadu_ps(x + t * x_stride + c * kLanes);
      SELFSPEC_IN_REGISTER(xv[t]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      __m256 wv = load_half<S, kHalf>(w + r * w_stride + c * kLanes);
      SELFSPEC_IN_REGISTER(wv);
#pragma GCC unroll 8
      for (int t = 0; t < kTok; ++t) acc[t][r] = _mm256_fmadd_ps(xv[t], wv, acc[t][r]);
    }
  }
  if constexpr (kPrefetch) {
    a.pf->countdown = countdown;
    a.pf->next = next;
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTok; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      _mm256_storeu_ps(a.state + t * a.state_stride + r * kLanes + 8 * kHalf, acc[t][r]);
    }
  }
}

// Both halves in one loop (2 kTok kRows accumulators), for the tile that takes the weights from
// memory: every weight line is used completely as soon as it arrives.
template <class S, int kTok, int kRows, bool kPrefetch>
SELFSPEC_AVX2 void tile_both_halves(const TileArgs& a, const typename S::Elem* w) {
  __m256 acc[2][kTok][kRows];
#pragma GCC unroll 8
  for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 8
    for (int t = 0; t < kTok; ++t) {
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        acc[h][t][r] = _mm256_loadu_ps(a.state + t * a.state_stride + r * kLanes + 8 * h);
      }
    }
  }
  const float* x = a.x;
  const std::int64_t x_stride = a.x_stride;
  const std::int64_t w_stride = a.w_stride;
  std::int64_t countdown = kPrefetch ? a.pf->countdown : 0;
  std::int64_t next = kPrefetch ? a.pf->next : 0;
  for (std::int64_t c = 0; c < a.n_chunks; ++c) {
    if constexpr (kPrefetch) prefetch_step(*a.pf, countdown, next);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 xv[kTok];
#pragma GCC unroll 8
      for (int t = 0; t < kTok; ++t) {
        xv[t] = _mm256_loadu_ps(x + t * x_stride + c * kLanes + 8 * h);
        SELFSPEC_IN_REGISTER(xv[t]);
      }
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        __m256 wv = h == 0 ? S::load_lo(w + r * w_stride + c * kLanes)
                           : S::load_hi(w + r * w_stride + c * kLanes);
        SELFSPEC_IN_REGISTER(wv);
#pragma GCC unroll 8
        for (int t = 0; t < kTok; ++t) acc[h][t][r] = _mm256_fmadd_ps(xv[t], wv, acc[h][t][r]);
      }
    }
  }
  if constexpr (kPrefetch) {
    a.pf->countdown = countdown;
    a.pf->next = next;
  }
#pragma GCC unroll 8
  for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 8
    for (int t = 0; t < kTok; ++t) {
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        _mm256_storeu_ps(a.state + t * a.state_stride + r * kLanes + 8 * h, acc[h][t][r]);
      }
    }
  }
}

// A kTok x `rows` tile, 1 <= rows <= kRows (kBothHalves: tile_both_halves, else two tile_half).
template <class S, int kTok, int kRows, bool kBothHalves>
SELFSPEC_AVX2 void tile_rows(const TileArgs& a, const typename S::Elem* w, int rows) {
  if constexpr (kRows > 1) {
    if (rows < kRows) {
      tile_rows<S, kTok, kRows - 1, kBothHalves>(a, w, rows);
      return;
    }
  }
  if constexpr (kBothHalves) {
    if (a.pf) {
      tile_both_halves<S, kTok, kRows, true>(a, w);
    } else {
      tile_both_halves<S, kTok, kRows, false>(a, w);
    }
  } else if (a.pf) {
    tile_half<S, kTok, kRows, 0, true>(a, w);
    tile_half<S, kTok, kRows, 1, true>(a, w);
  } else {
    tile_half<S, kTok, kRows, 0, false>(a, w);
    tile_half<S, kTok, kRows, 1, false>(a, w);
  }
}

// Tile shapes (tokens x rows; accumulators must fit 16 ymm registers with the x, weight and zero
// registers).
constexpr int kFirstPairRows = 3;  // both halves: 12 accumulators
constexpr int kPairRows = 6;       // one half at a time: 12 accumulators
constexpr int kTripleRows = 3;     // one half at a time: 9 accumulators

// All n_tokens >= 2 tokens over one column block of a group of `rows` <= kGroupRows rows at w:
// token pairs, the first one with both halves per loop; an odd count ends with a triple.
template <class S>
SELFSPEC_AVX2 void group_block(const TileArgs& a, const typename S::Elem* w, std::int64_t n_tokens,
                               int rows) {
  const std::int64_t n_triples = n_tokens % 2;
  const std::int64_t n_pairs = (n_tokens - 3 * n_triples) / 2;
  if (a.pf) {  // spread the prefetches evenly over the chunk iterations of all tiles
    const std::int64_t first_pair_tiles = (rows + kFirstPairRows - 1) / kFirstPairRows;
    const std::int64_t pair_tiles = 2 * ((rows + kPairRows - 1) / kPairRows);
    const std::int64_t triple_tiles = 2 * ((rows + kTripleRows - 1) / kTripleRows);
    const std::int64_t passes =
        n_pairs > 0 ? first_pair_tiles + (n_pairs - 1) * pair_tiles + n_triples * triple_tiles
                    : triple_tiles;
    a.pf->interval =
        std::max<std::int64_t>(1, passes * a.n_chunks / std::max<std::int64_t>(1, a.pf->lines));
    a.pf->countdown = 1;
    a.pf->next = 0;
  }
  for (std::int64_t t = 0; t < n_tokens;) {
    const bool triple = n_tokens - t == 3;
    const bool first = t == 0;
    const int tile_rows_max = triple ? kTripleRows : (first ? kFirstPairRows : kPairRows);
    for (int r = 0; r < rows; r += tile_rows_max) {
      TileArgs ta = a;
      ta.x = a.x + t * a.x_stride;
      ta.state = a.state + t * a.state_stride + r * kLanes;
      const typename S::Elem* wr = w + r * a.w_stride;
      const int n = std::min(tile_rows_max, rows - r);
      if (triple) {
        tile_rows<S, 3, kTripleRows, false>(ta, wr, n);
      } else if (first) {
        tile_rows<S, 2, kFirstPairRows, true>(ta, wr, n);
      } else {
        tile_rows<S, 2, kPairRows, false>(ta, wr, n);
      }
    }
    t += triple ? 3 : 2;
  }
}

// x for the multi-token path: column blocks of col_block elements (the last one shorter), each
// [n_tokens][len] contiguous (len a multiple of 16), in the physical lane layout of W, zero-padded.
template <class W>
SELFSPEC_AVX2 void prepare_x_blocked(const float* x, std::int64_t n_tokens, std::int64_t cols,
                                     std::int64_t stride, std::int64_t col_block, float* out) {
  const std::int64_t full = cols / kLanes * kLanes;
  for (std::int64_t c0 = 0; c0 < stride; c0 += col_block) {
    const std::int64_t len = std::min(col_block, stride - c0);
    float* block = out + c0 * n_tokens;
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      const float* src = x + t * cols;
      float* dst = block + t * len;
      for (std::int64_t k = 0; k < len; k += kLanes) {
        const std::int64_t kk = c0 + k;
        __m256 lo;
        __m256 hi;
        if (kk < full) {
          lo = _mm256_loadu_ps(src + kk);
          hi = _mm256_loadu_ps(src + kk + 8);
        } else {
          alignas(32) float chunk[kLanes] = {};
          if (kk < cols) {
            std::memcpy(chunk, src + kk, static_cast<std::size_t>(cols - kk) * sizeof(float));
          }
          lo = _mm256_load_ps(chunk);
          hi = _mm256_load_ps(chunk + 8);
        }
        if constexpr (!W::kPlainLayout) {  // logical {0-3, 8-11} then {4-7, 12-15}
          const __m256 a = _mm256_permute2f128_ps(lo, hi, 0x20);
          hi = _mm256_permute2f128_ps(lo, hi, 0x31);
          lo = a;
        }
        _mm256_storeu_ps(dst + k, lo);
        _mm256_storeu_ps(dst + k + 8, hi);
      }
    }
  }
}

// Several tokens (n_tokens >= 2), rows [row_begin, row_end), x prepared by prepare_x_blocked:
// groups of kGroupRows rows, each walked in column blocks (see the top of the file).
template <class W>
SELFSPEC_AVX2 void rows_many_tokens(const float* x_prepared, std::int64_t n_tokens,
                                    const WeightView& wv, std::int64_t row_begin,
                                    std::int64_t row_end, float* y) {
  using Elem = typename W::Elem;
  const auto* w = static_cast<const Elem*>(wv.data);
  const std::int64_t cols = wv.cols;
  const std::int64_t stride = (cols + kLanes - 1) / kLanes * kLanes;
  const std::int64_t col_block = std::min(column_block(n_tokens), stride);
  const std::int64_t n_col_blocks = (stride + col_block - 1) / col_block;
  const std::int64_t full_chunks = cols / kLanes;  // chunks read straight from w
  const std::int64_t tail_elems = cols - full_chunks * kLanes;
  const auto row_bytes = static_cast<std::int64_t>(cols * sizeof(Elem));

  thread_local AlignedBuffer<float> state_buffer;
  thread_local AlignedBuffer<Elem> tail_buffer;
  state_buffer.ensure(static_cast<std::size_t>(n_tokens * kGroupRows * kLanes));
  tail_buffer.ensure(static_cast<std::size_t>(kGroupRows * kLanes));
  float* state = state_buffer.data();
  Elem* tail = tail_buffer.data();
  constexpr std::int64_t kStateStride = kGroupRows * kLanes;

  for (std::int64_t g0 = row_begin; g0 < row_end; g0 += kGroupRows) {
    const int rows = static_cast<int>(std::min<std::int64_t>(kGroupRows, row_end - g0));
    std::memset(state, 0, static_cast<std::size_t>(n_tokens * kStateStride) * sizeof(float));
    if (tail_elems > 0) {  // the zero-padded last chunk of each row
      std::memset(tail, 0, static_cast<std::size_t>(kGroupRows * kLanes) * sizeof(Elem));
      for (int r = 0; r < rows; ++r) {
        std::memcpy(tail + r * kLanes, w + (g0 + r) * cols + full_chunks * kLanes,
                    static_cast<std::size_t>(tail_elems) * sizeof(Elem));
      }
    }
    for (std::int64_t kb = 0; kb < n_col_blocks; ++kb) {
      const std::int64_t c0 = kb * col_block;
      const std::int64_t len = std::min(col_block, stride - c0);
      const std::int64_t n_direct = std::max<std::int64_t>(
          0, std::min(len / kLanes, full_chunks - c0 / kLanes));  // chunks read from w
      // Prefetch target: the next column block of this group, else the first of the next group.
      const std::int64_t pf_row = kb + 1 < n_col_blocks ? g0 : g0 + kGroupRows;
      const std::int64_t pf_col = kb + 1 < n_col_blocks ? c0 + col_block : 0;
      Prefetch pf;
      if (pf_row < row_end && pf_col < cols) {
        const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(w + pf_row * cols + pf_col);
        const std::uintptr_t end =
            start + static_cast<std::uintptr_t>(std::min(col_block, cols - pf_col)) * sizeof(Elem);
        pf.base = start & ~std::uintptr_t{63};
        pf.row_stride = row_bytes;
        pf.lines = static_cast<std::int64_t>((end - pf.base + 63) / 64);
      }
      const float* xb = x_prepared + c0 * n_tokens;
      TileArgs a{xb, len, cols, n_direct, state, kStateStride, pf.lines > 0 ? &pf : nullptr};
      if (n_direct > 0) group_block<W>(a, w + g0 * cols + c0, n_tokens, rows);
      if (n_direct * kLanes < len) {  // this block holds the padded tail chunk
        a.x = xb + n_direct * kLanes;
        a.w_stride = kLanes;
        a.n_chunks = 1;
        a.pf = nullptr;
        group_block<W>(a, tail, n_tokens, rows);
      }
    }
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      for (int r = 0; r < rows; ++r) {
        const float* s = state + t * kStateStride + r * kLanes;
        y[t * wv.rows + g0 + r] = W::reduce(_mm256_loadu_ps(s), _mm256_loadu_ps(s + 8));
      }
    }
  }
}

// x in the layout of prepare_x_blocked for this matmul (for one token: [stride] contiguous, the
// layout rows_one_token reads).
template <class W>
SELFSPEC_AVX2 void prepare_x_for(const float* x, std::int64_t n_tokens, std::int64_t cols,
                                 float* out) {
  const std::int64_t stride = (cols + kLanes - 1) / kLanes * kLanes;
  prepare_x_blocked<W>(x, n_tokens, cols, stride, std::min(column_block(n_tokens), stride), out);
}

template <class W>
SELFSPEC_AVX2 void rows_prepared(const float* x_prepared, std::int64_t n_tokens,
                                 const WeightView& w, std::int64_t row_begin, std::int64_t row_end,
                                 float* y) {
  if (n_tokens == 1) {
    const std::int64_t stride = (w.cols + kLanes - 1) / kLanes * kLanes;
    rows_one_token<W>(PreparedX{x_prepared, stride}, static_cast<const typename W::Elem*>(w.data),
                      w.cols, row_begin, row_end, y);
  } else {
    rows_many_tokens<W>(x_prepared, n_tokens, w, row_begin, row_end, y);
  }
}

template <class W>
SELFSPEC_AVX2 void rows_avx2(const float* x, std::int64_t n_tokens, const WeightView& w,
                             std::int64_t row_begin, std::int64_t row_end, float* y) {
  if (n_tokens == 1) {
    rows_one_token<W>(prepare_x<W>(x, 1, w.cols), static_cast<const typename W::Elem*>(w.data),
                      w.cols, row_begin, row_end, y);
    return;
  }
  thread_local AlignedBuffer<float> buffer;
  buffer.ensure(static_cast<std::size_t>(prepared_x_floats(n_tokens, w.cols)));
  prepare_x_for<W>(x, n_tokens, w.cols, buffer.data());
  rows_many_tokens<W>(buffer.data(), n_tokens, w, row_begin, row_end, y);
}

template <class W>
SELFSPEC_AVX2 float dot_one(const float* x, const void* w, std::int64_t n) {
  float out = 0.0f;
  tile<W, 1, 1, false>(prepare_x<W>(x, 1, n), static_cast<const typename W::Elem*>(w), n, &out, 1);
  return out;
}

}  // namespace

std::int64_t prepared_x_floats(std::int64_t n_tokens, std::int64_t cols) {
  return n_tokens * ((cols + kLanes - 1) / kLanes * kLanes);
}

void prepare_x_avx2(const float* x, std::int64_t n_tokens, const WeightView& w, float* out) {
  switch (w.dtype) {
    case DType::kF32:
      prepare_x_for<F32Weights>(x, n_tokens, w.cols, out);
      return;
    case DType::kBF16:
      prepare_x_for<Bf16Weights>(x, n_tokens, w.cols, out);
      return;
    case DType::kF16:
      prepare_x_for<F16Weights>(x, n_tokens, w.cols, out);
      return;
  }
}

void matmul_rows_prepared_avx2(const float* x_prepared, std::int64_t n_tokens, const WeightView& w,
                               std::int64_t row_begin, std::int64_t row_end, float* y) {
  switch (w.dtype) {
    case DType::kF32:
      rows_prepared<F32Weights>(x_prepared, n_tokens, w, row_begin, row_end, y);
      return;
    case DType::kBF16:
      rows_prepared<Bf16Weights>(x_prepared, n_tokens, w, row_begin, row_end, y);
      return;
    case DType::kF16:
      rows_prepared<F16Weights>(x_prepared, n_tokens, w, row_begin, row_end, y);
      return;
  }
}

void matmul_rows_avx2(const float* x, std::int64_t n_tokens, const WeightView& w,
                      std::int64_t row_begin, std::int64_t row_end, float* y) {
  switch (w.dtype) {
    case DType::kF32:
      rows_avx2<F32Weights>(x, n_tokens, w, row_begin, row_end, y);
      return;
    case DType::kBF16:
      rows_avx2<Bf16Weights>(x, n_tokens, w, row_begin, row_end, y);
      return;
    case DType::kF16:
      rows_avx2<F16Weights>(x, n_tokens, w, row_begin, row_end, y);
      return;
  }
}

float dot_avx2(const float* x, const void* w, DType w_dtype, std::int64_t n) {
  switch (w_dtype) {
    case DType::kF32:
      return dot_one<F32Weights>(x, w, n);
    case DType::kBF16:
      return dot_one<Bf16Weights>(x, w, n);
    case DType::kF16:
      return dot_one<F16Weights>(x, w, n);
  }
  return 0.0f;
}

}  // namespace selfspec::kernels::cpu::detail
