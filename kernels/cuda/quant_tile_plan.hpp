// The quantized GEMV's row tiles (quant_matmul.cu): which thread computes which group's terms,
// where they wait in shared memory, and the walk that takes them in column order. Shared by the
// kernel and the CPU tests (`__host__ __device__`), which run the tile's schedule sequentially
// against the scalar reference (tests/unit/backend/quant_tile_plan_test.cpp): the plan, its
// double buffering and the walk are checked without a GPU; the kernel only maps threads onto it.
//
// Why tiles: the canonical sequence (quant_rows.hpp) folds a row's groups one after another, so
// each output is a chain of dependent steps. With one warp per row only T of its 32 lanes walk
// the chain (one at T = 1), and the walk, not the memory, set the pace: Q4_K streamed 610 GB/s,
// 0.16 of an H200's copy bandwidth. Here a block of kQuantTileWarps warps holds kQuantTileRows
// rows and their T tokens, kQuantTileRows · T chains, walked by that many lanes at once.
//
// A round is 32 consecutive groups of the tile's rows. In round k every warp computes, for its
// kQuantRowsPerWarp rows, lane l the terms of group 32k + l for each token (the integer sums and
// quant_group_terms, which depend on the group alone), into buffer k mod 2; meanwhile chain c's
// lane walks round k − 1 from the other buffer: quant_group_apply over its 32 groups in column
// order, and quant_segment_end where a K-format segment ends. A barrier ends each round. So
// every output is the canonical sequence of its row and token, whatever T: the reference's bits.
//
// A tile's rows: kQuantTileRows consecutive rows of one matrix (several matrices of one launch,
// Wq|Wk|Wv, are numbered tile after tile), or kQuantTileRows / 2 pairs (quant_tile_row): in the
// SwiGLU form rows of the gate matrix then the up rows of the same indices, in the RoPE form head
// pairs of one matrix (position_step.hpp), their first rows then their second rows. A pair's
// chains sit 4 lanes apart, so that the first's lane takes the second's value by a shuffle and
// stores swiglu_value(gate, up), or the pair through the position step.
//
// Chain c is token c / kQuantTileRows of row c mod kQuantTileRows of the tile (consecutive lanes,
// consecutive rows: the outputs are written together). Its terms take term_words floats a group
// (Q4_K/Q5_K: t0-t3; the rest: t0, t1), a chain's round padded by term_words so that the walk's
// 16- or 8-byte reads of consecutive chains fall in different banks. A K format's segment ends
// follow, per group and row: d (NaN where the group ends no segment) and dmin.
#pragma once

#include "core/weight_format.hpp"
#include "kernels/cuda/position_step.hpp"
#include "kernels/cuda/quant_rows.hpp"
#include "kernels/host_device.hpp"

#include <cstdint>
#include <limits>

namespace selfspec::kernels::cuda {

inline constexpr int kQuantTileWarps = 4;
inline constexpr int kQuantTileRows = 8;
inline constexpr int kQuantRowsPerWarp = kQuantTileRows / kQuantTileWarps;
inline constexpr int kQuantRoundGroups = 32;  // a group per lane
inline constexpr int kQuantTileMaxTokens = 8;
static_assert(kQuantTileRows % kQuantTileWarps == 0);
static_assert(kQuantTileRows * kQuantTileMaxTokens <= kQuantTileWarps * 32,
              "every chain has a lane");

SELFSPEC_HOST_DEVICE constexpr bool quant_k_format(WeightFormat format) {
  return format == WeightFormat::kQ4_K || format == WeightFormat::kQ5_K ||
         format == WeightFormat::kQ6_K;
}

SELFSPEC_HOST_DEVICE constexpr int quant_term_words(WeightFormat format) {
  return format == WeightFormat::kQ4_K || format == WeightFormat::kQ5_K ? 4 : 2;
}

// Offsets in floats from the start of the tile's shared memory.
struct QuantTilePlan {
  WeightFormat format = WeightFormat::kQ4_0;
  int tokens = 1;      // T, 1 .. kQuantTileMaxTokens
  int term_words = 2;  // floats of a group's terms

  SELFSPEC_HOST_DEVICE constexpr int chains() const { return kQuantTileRows * tokens; }
  SELFSPEC_HOST_DEVICE constexpr int chain_words() const {
    return kQuantRoundGroups * term_words + term_words;
  }
  SELFSPEC_HOST_DEVICE constexpr int segment_stride() const { return kQuantTileRows + 1; }
  SELFSPEC_HOST_DEVICE constexpr int segment_words() const {
    return quant_k_format(format) ? 2 * kQuantRoundGroups * segment_stride() : 0;
  }
  SELFSPEC_HOST_DEVICE constexpr int buffer_words() const {
    return chains() * chain_words() + segment_words();
  }
  SELFSPEC_HOST_DEVICE constexpr int shared_bytes() const {
    return 2 * buffer_words() * static_cast<int>(sizeof(float));
  }
  SELFSPEC_HOST_DEVICE constexpr int buffer(std::int64_t round) const {
    return static_cast<int>(round % 2) * buffer_words();
  }
  // Group j's terms of chain c in the buffer at `buffer`.
  SELFSPEC_HOST_DEVICE constexpr int terms(int buffer, int chain, int j) const {
    return buffer + chain * chain_words() + j * term_words;
  }
  // Group j's segment end for row r of the tile: d, then dmin.
  SELFSPEC_HOST_DEVICE constexpr int segment_d(int buffer, int j, int r) const {
    return buffer + chains() * chain_words() + j * segment_stride() + r;
  }
  SELFSPEC_HOST_DEVICE constexpr int segment_dmin(int buffer, int j, int r) const {
    return segment_d(buffer, j, r) + kQuantRoundGroups * segment_stride();
  }
  SELFSPEC_HOST_DEVICE constexpr int chain_of(int token, int row) const {
    return token * kQuantTileRows + row;
  }
  SELFSPEC_HOST_DEVICE constexpr int row_of(int chain) const { return chain % kQuantTileRows; }
  SELFSPEC_HOST_DEVICE constexpr int token_of(int chain) const { return chain / kQuantTileRows; }
};

SELFSPEC_HOST_DEVICE constexpr QuantTilePlan quant_tile_plan(WeightFormat format, int tokens) {
  QuantTilePlan p;
  p.format = format;
  p.tokens = tokens;
  p.term_words = quant_term_words(format);
  return p;
}

// The rows a tile holds: consecutive rows of one matrix (kRows), or pairs (kSwiglu: gate row i
// and up row i; kHeadPairs: head pair p of one matrix, rows head_pair_row(p) and that plus
// head_dim / 2).
enum class QuantTileForm { kRows, kSwiglu, kHeadPairs };

// Where row r of tile `tile` comes from: part 0 (the matrix; a pair's first row) or part 1 (a
// pair's second row: the SwiGLU form's up, the RoPE form's row head_dim / 2 further), and the
// row's index in its matrix.
struct QuantTileRow {
  int part = 0;
  std::int64_t row = 0;
};
SELFSPEC_HOST_DEVICE constexpr int quant_tile_part_rows(QuantTileForm form) {
  return form == QuantTileForm::kRows ? kQuantTileRows : kQuantTileRows / 2;
}
// head_dim: the RoPE form's (a multiple of kQuantTileRows, so that a tile's kQuantTileRows / 2
// pairs lie in one head); unused otherwise.
SELFSPEC_HOST_DEVICE constexpr QuantTileRow quant_tile_row(QuantTileForm form, std::int64_t tile,
                                                           int r, std::int64_t head_dim = 0) {
  const int per_part = quant_tile_part_rows(form);
  const int part = r / per_part;
  const std::int64_t index = tile * per_part + r % per_part;
  if (form == QuantTileForm::kHeadPairs) {
    return {part, head_pair_row(index, head_dim) + part * (head_dim / 2)};
  }
  return {part, index};
}
// Tiles over a matrix of `rows` rows (the SwiGLU form: over the gate's rows; the RoPE form: over
// the rows / 2 head pairs of whole heads).
SELFSPEC_HOST_DEVICE constexpr std::int64_t quant_tiles(QuantTileForm form, std::int64_t rows) {
  const int per_part = quant_tile_part_rows(form);
  const std::int64_t units = form == QuantTileForm::kHeadPairs ? rows / 2 : rows;
  return (units + per_part - 1) / per_part;
}
// Lanes between a pair's first chain and its second chain of the same token.
inline constexpr int kQuantPartnerLaneOffset = kQuantTileRows / 2;

// The groups of round `round` of a row of `groups` groups.
SELFSPEC_HOST_DEVICE constexpr int quant_round_groups(std::int64_t round, std::int64_t groups) {
  const std::int64_t left = groups - round * kQuantRoundGroups;
  return static_cast<int>(left < kQuantRoundGroups ? left : kQuantRoundGroups);
}

// Group j's terms of a chain into the buffer.
SELFSPEC_HOST_DEVICE inline void quant_tile_store_terms(const QuantTilePlan& p, float* shared,
                                                        int buffer, int chain, int j,
                                                        const QuantGroupTerms& t) {
  float* out = shared + p.terms(buffer, chain, j);
  out[0] = t.t0;
  out[1] = t.t1;
  if (p.term_words == 4) {
    out[2] = t.t2;
    out[3] = t.t3;
  }
}

// Group j's segment end for row r (a K format): the segment's d and dmin where the group ends
// one, else NaN in d.
SELFSPEC_HOST_DEVICE inline void quant_tile_store_segment(const QuantTilePlan& p, float* shared,
                                                          int buffer, int j, int r, bool ends,
                                                          float d, float dmin) {
  shared[p.segment_d(buffer, j, r)] = ends ? d : std::numeric_limits<float>::quiet_NaN();
  shared[p.segment_dmin(buffer, j, r)] = ends ? dmin : 0.0f;
}

// Chain `chain` takes the first `in_round` groups of the buffer's round into its state, in
// column order.
template <WeightFormat kFormat>
SELFSPEC_HOST_DEVICE inline void quant_tile_walk(const QuantTilePlan& p, const float* shared,
                                                 int buffer, int chain, int in_round,
                                                 QuantRowState& st) {
  constexpr int kWords = quant_term_words(kFormat);
  const float* terms = shared + p.terms(buffer, chain, 0);
  const int r = p.row_of(chain);
#if defined(__CUDA_ARCH__)
#pragma unroll 8
#endif
  for (int j = 0; j < in_round; ++j) {
    QuantGroupTerms t;
#if defined(__CUDA_ARCH__)
    if constexpr (kWords == 4) {
      const float4 v = *reinterpret_cast<const float4*>(terms + j * kWords);
      t.t0 = v.x;
      t.t1 = v.y;
      t.t2 = v.z;
      t.t3 = v.w;
    } else {
      const float2 v = *reinterpret_cast<const float2*>(terms + j * kWords);
      t.t0 = v.x;
      t.t1 = v.y;
    }
#else
    t.t0 = terms[j * kWords];
    t.t1 = terms[j * kWords + 1];
    if constexpr (kWords == 4) {
      t.t2 = terms[j * kWords + 2];
      t.t3 = terms[j * kWords + 3];
    }
#endif
    quant_group_apply(kFormat, t, st);
    if constexpr (quant_k_format(kFormat)) {
      const float d = shared[p.segment_d(buffer, j, r)];
      if (d == d) quant_segment_end(kFormat, d, shared[p.segment_dmin(buffer, j, r)], st);
    }
  }
}

}  // namespace selfspec::kernels::cuda
