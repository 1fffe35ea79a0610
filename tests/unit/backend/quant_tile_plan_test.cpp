// The quantized GEMV's tile plan (kernels/cuda/quant_tile_plan.hpp) without a GPU:
// * the shared-memory layout: every (chain, group, word) and every (group, row) segment slot has
//   its own float inside its buffer, the two buffers are disjoint, the walk's vector reads are
//   aligned, and the walk's and the writers' accesses of one instruction fall in different banks;
// * the tile's schedule run sequentially (every warp's lanes computing round k into one buffer,
//   the walkers taking round k − 1 from the other, a barrier, the walked buffer then poisoned
//   with NaN as the next round's writers would overwrite it) gives the scalar reference's bits
//   (backend/quant_rows_builder.hpp) in every quantized format, at every tile token count, on
//   rows that do not fill the last tile, rounds cut short and K-format slices starting inside a
//   super-block; and in the SwiGLU form (gate and up rows of one index in a tile, each gate chain
//   taking its up chain's value from a lane in the same warp) the SwiGLU of the two references;
//   and in the RoPE form (head pairs: rows i and i + d/2 of one head in a tile, paired the same
//   way) the references through the CPU's position step (kernels/cuda/position_step.hpp's
//   store_head_pair against kernels/cpu/rope.hpp and the cache write) into q and the KV cache.
// The CUDA kernel maps its threads onto this plan; tests/gpu/quant_matmul_cuda_test.cpp holds it
// to the same reference on a GPU.
#include "kernels/cuda/quant_tile_plan.hpp"

#include "backend/quant_rows_builder.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/shared_math.hpp"
#include "tests/unit/kernels/quant_test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace selfspec {
namespace {

namespace kc = kernels::cpu;
namespace kq = kernels::cuda;

constexpr int kBanks = 32;

// ---- layout ---------------------------------------------------------------------------------

class QuantTileLayoutTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(QuantTileLayoutTest, EverySlotHasItsOwnFloatInItsBuffer) {
  const WeightFormat format = GetParam();
  for (int tokens = 1; tokens <= kq::kQuantTileMaxTokens; ++tokens) {
    const kq::QuantTilePlan p = kq::quant_tile_plan(format, tokens);
    for (const std::int64_t round : {std::int64_t{0}, std::int64_t{1}}) {
      const int buffer = p.buffer(round);
      std::set<int> used;
      const auto take = [&](int offset) {
        EXPECT_GE(offset, buffer);
        EXPECT_LT(offset, buffer + p.buffer_words());
        EXPECT_TRUE(used.insert(offset).second) << "float " << offset << " taken twice";
      };
      for (int c = 0; c < p.chains(); ++c) {
        for (int j = 0; j < kq::kQuantRoundGroups; ++j) {
          const int at = p.terms(buffer, c, j);
          EXPECT_EQ(at % p.term_words, 0) << "misaligned vector read";
          for (int w = 0; w < p.term_words; ++w) take(at + w);
        }
      }
      if (kq::quant_k_format(format)) {
        for (int j = 0; j < kq::kQuantRoundGroups; ++j) {
          for (int r = 0; r < kq::kQuantTileRows; ++r) {
            take(p.segment_d(buffer, j, r));
            take(p.segment_dmin(buffer, j, r));
          }
        }
      }
    }
    EXPECT_EQ(p.shared_bytes(), 2 * p.buffer_words() * 4);
    EXPECT_LE(p.shared_bytes(), 227 * 1024) << "over an sm_90 block's shared memory";
    for (int c = 0; c < p.chains(); ++c) {
      EXPECT_EQ(p.chain_of(p.token_of(c), p.row_of(c)), c);
      EXPECT_LT(p.token_of(c), tokens);
    }
  }
}

// Shared memory serves 128 bytes a cycle: a 16-byte access is split in quarter-warps, an 8-byte
// one in half-warps, and within one the lanes' words must sit in different banks.
void expect_conflict_free(const std::vector<int>& lane_offsets, int words, const char* what) {
  const int phase_lanes = kBanks / words;
  for (std::size_t first = 0; first < lane_offsets.size(); first += phase_lanes) {
    std::set<int> banks;
    std::set<int> offsets;
    for (std::size_t lane = first; lane < first + phase_lanes && lane < lane_offsets.size();
         ++lane) {
      if (!offsets.insert(lane_offsets[lane]).second) continue;  // the same words: a broadcast
      for (int w = 0; w < words; ++w) {
        EXPECT_TRUE(banks.insert((lane_offsets[lane] + w) % kBanks).second)
            << what << ": lanes " << first << "-" << first + phase_lanes - 1 << " conflict";
      }
    }
  }
}

TEST_P(QuantTileLayoutTest, AccessesOfOneInstructionUseDistinctBanks) {
  const WeightFormat format = GetParam();
  for (int tokens = 1; tokens <= kq::kQuantTileMaxTokens; ++tokens) {
    const kq::QuantTilePlan p = kq::quant_tile_plan(format, tokens);
    const int buffer = p.buffer(1);
    for (int warp = 0; warp * 32 < p.chains(); ++warp) {  // a walk step: lane = chain
      for (int j = 0; j < kq::kQuantRoundGroups; ++j) {
        std::vector<int> terms;
        std::vector<int> segments;
        for (int c = warp * 32; c < p.chains() && c < warp * 32 + 32; ++c) {
          terms.push_back(p.terms(buffer, c, j));
          segments.push_back(p.segment_d(buffer, j, p.row_of(c)));
        }
        expect_conflict_free(terms, p.term_words, "walk's terms");
        if (kq::quant_k_format(format)) expect_conflict_free(segments, 1, "walk's segment ends");
      }
    }
    for (int c = 0; c < p.chains(); ++c) {  // a writer's store: lane = group
      std::vector<int> terms;
      std::vector<int> segments;
      for (int lane = 0; lane < kq::kQuantRoundGroups; ++lane) {
        terms.push_back(p.terms(buffer, c, lane));
        segments.push_back(p.segment_d(buffer, lane, p.row_of(c)));
      }
      expect_conflict_free(terms, p.term_words, "writers' terms");
      if (kq::quant_k_format(format)) expect_conflict_free(segments, 1, "writers' segment ends");
    }
  }
}

// The GEMV loads only the statistics quant_stats_read names: any value of the others leaves the
// terms alone.
TEST_P(QuantTileLayoutTest, TheTermsReadOnlyTheStatisticsTheKernelLoads) {
  const WeightFormat format = GetParam();
  const kq::QuantRowsLayout l = kq::quant_rows_layout(format, 1, 32);
  const kq::QuantStatsRead read = kq::quant_stats_read(format);
  std::mt19937 rng(93);
  std::uniform_int_distribution<int> word(0, 0xffff);
  std::uniform_int_distribution<int> sum(-4000, 4000);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const kq::QuantGroupParams p{static_cast<std::uint16_t>(word(rng) & 0x3bff),
                                 static_cast<std::uint16_t>(word(rng) & 0x3bff)};
    const kq::QuantGroupSums sums{sum(rng), sum(rng), sum(rng)};
    const float dx = std::fabs(normal(rng));
    const std::int32_t s32 = sum(rng);
    const std::int32_t s_a = sum(rng);
    const std::int32_t s_b = sum(rng);
    const float s = static_cast<float>(s32);
    const float dxs = dx * s;
    const kq::QuantGroupTerms all =
        kq::quant_group_terms(format, l.offset, p, sums, dx, s, dxs, s32, s_a, s_b);
    const kq::QuantGroupTerms loaded = kq::quant_group_terms(
        format, l.offset, p, sums, dx, read.s ? s : 0.0f, read.dxs ? dxs : 0.0f, read.s32 ? s32 : 0,
        read.s16 ? s_a : 0, read.s16 ? s_b : 0);
    ASSERT_EQ(std::memcmp(&all, &loaded, sizeof all), 0) << "trial " << trial;
  }
}

// ---- the schedule, run sequentially ---------------------------------------------------------

struct Matrix {
  std::vector<std::byte> bytes;
  kq::QuantRowsLayout l;
  std::int64_t lead = 0;
};

// Lane `lane` of a writer warp in round `round`: group 32·round + lane of row `row` of the matrix,
// for every token of the tile, into the buffer as chain (t, r).
void write_group(const Matrix& m, const kc::QuantizedActivations& a, const kq::QuantTilePlan& p,
                 std::int64_t token_begin, std::int64_t round, int lane, std::int64_t row, int r,
                 float* shared) {
  const kq::QuantRowsLayout& l = m.l;
  const std::int64_t g = round * kq::kQuantRoundGroups + lane;
  if (g >= l.groups) return;
  const std::byte* quants = m.bytes.data() + l.quants + (row * l.groups + g) * l.quant_bytes;
  kq::QuantGroupParams params;
  std::memcpy(&params, m.bytes.data() + l.params + (row * l.groups + g) * l.param_bytes,
              static_cast<std::size_t>(l.param_bytes));
  const int buffer = p.buffer(round);
  for (int t = 0; t < p.tokens; ++t) {
    const std::int64_t token = token_begin + t;
    const kq::QuantGroupSums sums =
        reference_group_sums(l, quants, a.q.data() + token * l.cols + g * kq::kQuantGroupCols);
    const auto tg = static_cast<std::size_t>(token * l.groups + g);
    kq::quant_tile_store_terms(
        p, shared, buffer, p.chain_of(t, r), lane,
        kq::quant_group_terms(l.format, l.offset, params, sums, a.dx[tg], a.s[tg], a.dxs[tg],
                              a.s32[tg], a.s16[2 * tg], a.s16[2 * tg + 1]));
  }
  if (kq::quant_k_format(l.format)) {
    std::uint16_t d = 0;
    std::uint16_t dmin = 0;
    const std::byte* seg =
        m.bytes.data() + l.segments + (row * l.max_segments + kq::quant_segment_of(g, m.lead)) * 4;
    std::memcpy(&d, seg, 2);
    std::memcpy(&dmin, seg + 2, 2);
    kq::quant_tile_store_segment(p, shared, buffer, lane, r,
                                 kq::quant_segment_ends(g, m.lead, l.groups), kq::qr_f16(d),
                                 kq::qr_f16(dmin));
  }
}

template <WeightFormat kFormat>
void walk(const kq::QuantTilePlan& p, const float* shared, std::int64_t round, int chain,
          int in_round, kq::QuantRowState& st) {
  kq::quant_tile_walk<kFormat>(p, shared, p.buffer(round), chain, in_round, st);
}

void walk_any(WeightFormat format, const kq::QuantTilePlan& p, const float* shared,
              std::int64_t round, int chain, int in_round, kq::QuantRowState& st) {
  switch (format) {
    case WeightFormat::kQ4_0:
      return walk<WeightFormat::kQ4_0>(p, shared, round, chain, in_round, st);
    case WeightFormat::kQ4_1:
      return walk<WeightFormat::kQ4_1>(p, shared, round, chain, in_round, st);
    case WeightFormat::kQ5_0:
      return walk<WeightFormat::kQ5_0>(p, shared, round, chain, in_round, st);
    case WeightFormat::kQ5_1:
      return walk<WeightFormat::kQ5_1>(p, shared, round, chain, in_round, st);
    case WeightFormat::kQ8_0:
      return walk<WeightFormat::kQ8_0>(p, shared, round, chain, in_round, st);
    case WeightFormat::kQ4_K:
      return walk<WeightFormat::kQ4_K>(p, shared, round, chain, in_round, st);
    case WeightFormat::kQ5_K:
      return walk<WeightFormat::kQ5_K>(p, shared, round, chain, in_round, st);
    case WeightFormat::kQ6_K:
      return walk<WeightFormat::kQ6_K>(p, shared, round, chain, in_round, st);
    default:
      FAIL() << "not quantized";
  }
}

// How a launch's tiles take their rows and store their results: the form, and for the RoPE form
// the head size and where its pairs go (position_step.hpp).
struct LaunchForm {
  kq::QuantTileForm form = kq::QuantTileForm::kRows;
  std::int64_t head_dim = 0;
  const kq::PositionStep* step = nullptr;
  kq::HeadOutput output = kq::HeadOutput::kRotated;
  std::int64_t n_past = 0;
};

// Chain c's result out, as the kernel's store_chains: y, or the pair forms' first chain with its
// partner's value (which must sit kQuantPartnerLaneOffset lanes on, in the same warp, for the
// same token: the shuffle), into swiglu_value or the position step.
void store_chain(const LaunchForm& f, const kq::QuantTilePlan& p, std::int64_t rows,
                 std::int64_t tile, std::int64_t token_begin, int c,
                 std::span<const kq::QuantRowState> states, float* y) {
  const kq::QuantTileRow row = kq::quant_tile_row(f.form, tile, p.row_of(c), f.head_dim);
  if (row.row >= rows || row.part != 0) return;
  const std::int64_t token = token_begin + p.token_of(c);
  float value = states[static_cast<std::size_t>(c)].y;
  if (f.form != kq::QuantTileForm::kRows) {
    const int partner = c + kq::kQuantPartnerLaneOffset;
    const kq::QuantTileRow second = kq::quant_tile_row(f.form, tile, p.row_of(partner), f.head_dim);
    ASSERT_EQ(partner / 32, c / 32) << "chain " << c << ": its partner is in another warp";
    ASSERT_EQ(p.token_of(partner), p.token_of(c));
    ASSERT_EQ(second.part, 1);
    const float other = states[static_cast<std::size_t>(partner)].y;
    if (f.form == kq::QuantTileForm::kHeadPairs) {
      ASSERT_EQ(second.row, row.row + f.head_dim / 2) << "not a head pair";
      const std::int64_t pair = tile * kq::quant_tile_part_rows(f.form) + p.row_of(c);
      ASSERT_EQ(kq::head_pair_row(pair, f.head_dim), row.row);
      kq::store_head_pair(*f.step, f.output, f.n_past, token, pair, value, other);
      return;
    }
    ASSERT_EQ(second.row, row.row);
    value = kernels::swiglu_value(value, other);
  }
  y[token * rows + row.row] = value;
}

// One block: tile `tile` of the rows of `parts` (one matrix, or the SwiGLU form's gate and up),
// tokens [token_begin, token_begin + p.tokens).
void run_tile(std::span<const Matrix* const> parts, const kc::QuantizedActivations& a,
              const kq::QuantTilePlan& p, std::int64_t token_begin, std::int64_t tile,
              const LaunchForm& f, float* y) {
  const kq::QuantRowsLayout& l = parts[0]->l;
  constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> shared(static_cast<std::size_t>(2 * p.buffer_words()), kPoison);
  std::vector<kq::QuantRowState> states(static_cast<std::size_t>(p.chains()));
  const auto live = [&](int r) {
    return kq::quant_tile_row(f.form, tile, r, f.head_dim).row < l.rows;
  };
  const std::int64_t rounds = (l.groups + kq::kQuantRoundGroups - 1) / kq::kQuantRoundGroups;
  for (std::int64_t round = 0; round <= rounds; ++round) {
    if (round < rounds) {  // every warp's rows, every lane's group
      for (int warp = 0; warp < kq::kQuantTileWarps; ++warp) {
        for (int i = 0; i < kq::kQuantRowsPerWarp; ++i) {
          const int r = warp * kq::kQuantRowsPerWarp + i;
          if (!live(r)) continue;
          const kq::QuantTileRow row = kq::quant_tile_row(f.form, tile, r, f.head_dim);
          for (int lane = 0; lane < kq::kQuantRoundGroups; ++lane) {
            // The SwiGLU form's second part is the up matrix; a head pair's is its own matrix.
            const std::size_t part = f.form == kq::QuantTileForm::kSwiglu ? row.part : 0;
            write_group(*parts[part], a, p, token_begin, round, lane, row.row, r, shared.data());
          }
        }
      }
    }
    if (round >= 1) {  // the walkers, on the round before
      for (int c = 0; c < p.chains(); ++c) {
        if (!live(p.row_of(c))) continue;
        walk_any(l.format, p, shared.data(), round - 1, c,
                 kq::quant_round_groups(round - 1, l.groups), states[static_cast<std::size_t>(c)]);
      }
      // The barrier; the next round's writers take the walked buffer.
      std::fill_n(shared.begin() + p.buffer(round - 1), p.buffer_words(), kPoison);
    }
  }
  for (int c = 0; c < p.chains(); ++c) store_chain(f, p, l.rows, tile, token_begin, c, states, y);
}

Matrix make_matrix(std::mt19937& rng, WeightFormat format, std::int64_t rows, std::int64_t blocks,
                   std::int64_t skip, std::int64_t cols) {
  const kc::test::GgufMatrix g = kc::test::random_gguf_matrix(rng, format, rows, blocks);
  Matrix m;
  m.bytes = build_quant_rows({format, rows, cols, g.data.data(), g.row_bytes, skip});
  m.l = kq::quant_rows_layout(format, rows, cols);
  kq::QuantRowsHeader header;
  std::memcpy(&header, m.bytes.data(), sizeof header);
  m.lead = header.lead_groups;
  return m;
}

// The launch's tiles over `parts` for `tokens` tokens (tiles of up to 8 tokens), sequentially:
// one matrix (kRows, kHeadPairs), or the SwiGLU form's gate and up.
std::vector<float> run_launch(std::span<const Matrix* const> parts,
                              const kc::QuantizedActivations& a, std::int64_t tokens,
                              LaunchForm f = {}) {
  const kq::QuantRowsLayout& l = parts[0]->l;
  if (parts.size() == 2) f.form = kq::QuantTileForm::kSwiglu;
  std::vector<float> y(static_cast<std::size_t>(tokens * l.rows), -1.0f);
  for (std::int64_t begin = 0; begin < tokens; begin += kq::kQuantTileMaxTokens) {
    const auto tile_tokens =
        static_cast<int>(std::min<std::int64_t>(kq::kQuantTileMaxTokens, tokens - begin));
    const kq::QuantTilePlan p = kq::quant_tile_plan(l.format, tile_tokens);
    for (std::int64_t tile = 0; tile < kq::quant_tiles(f.form, l.rows); ++tile) {
      run_tile(parts, a, p, begin, tile, f, y.data());
    }
  }
  return y;
}

struct Shape {
  std::int64_t rows;
  std::int64_t blocks;
  std::int64_t skip;
  std::int64_t cols;
};

// Rounds cut short (groups not a multiple of 32), tiles not full, slices inside super-blocks.
std::vector<Shape> shapes(WeightFormat format) {
  if (kq::quant_k_format(format)) return {{19, 5, 0, 1280}, {13, 6, 96, 1184}, {8, 1, 224, 32}};
  return {{19, 40, 0, 1280}, {13, 37, 0, 1184}, {3, 1, 0, 32}};
}

std::vector<float> activations(std::mt19937& rng, std::int64_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

class QuantTileScheduleTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(QuantTileScheduleTest, RunInOrderItGivesTheReferenceBits) {
  const WeightFormat format = GetParam();
  std::mt19937 rng(91);
  for (const Shape& s : shapes(format)) {
    SCOPED_TRACE(::testing::Message()
                 << s.rows << " rows, skip " << s.skip << ", " << s.cols << " columns");
    const Matrix m = make_matrix(rng, format, s.rows, s.blocks, s.skip, s.cols);
    const Matrix* const parts[] = {&m};
    for (const int tokens : {1, 2, 3, 5, 8, 11}) {
      const std::vector<float> x = activations(rng, tokens * s.cols);
      kc::QuantizedActivations a;
      kc::quantize_activations(x.data(), tokens, s.cols, a);
      std::vector<float> reference(static_cast<std::size_t>(tokens * s.rows));
      reference_quant_matmul(m.bytes, x.data(), tokens, reference.data());
      const std::vector<float> got = run_launch(parts, a, tokens);
      EXPECT_EQ(std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)), 0)
          << tokens << " tokens";
    }
  }
}

// The SwiGLU form: the gate's and the up's rows of one index in one tile, their chains paired
// within a warp, the stored value swiglu_value of the two references.
TEST_P(QuantTileScheduleTest, TheSwigluFormGivesTheSwigluOfTheReferences) {
  const WeightFormat format = GetParam();
  std::mt19937 rng(92);
  for (const Shape& s : shapes(format)) {
    SCOPED_TRACE(::testing::Message()
                 << s.rows << " rows, skip " << s.skip << ", " << s.cols << " columns");
    const Matrix gate = make_matrix(rng, format, s.rows, s.blocks, s.skip, s.cols);
    const Matrix up = make_matrix(rng, format, s.rows, s.blocks, s.skip, s.cols);
    const Matrix* const parts[] = {&gate, &up};
    for (const int tokens : {1, 4, 8, 9}) {
      const std::vector<float> x = activations(rng, tokens * s.cols);
      kc::QuantizedActivations a;
      kc::quantize_activations(x.data(), tokens, s.cols, a);
      std::vector<float> g(static_cast<std::size_t>(tokens * s.rows));
      std::vector<float> u(g.size());
      reference_quant_matmul(gate.bytes, x.data(), tokens, g.data());
      reference_quant_matmul(up.bytes, x.data(), tokens, u.data());
      std::vector<float> reference(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) reference[i] = kernels::swiglu_value(g[i], u[i]);
      const std::vector<float> got = run_launch(parts, a, tokens);
      EXPECT_EQ(std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)), 0)
          << tokens << " tokens";
    }
  }
}

// The RoPE form's reference (the position step of rope_write_kv, from the CPU's kernels): q's and
// k's rows of the tokens whose position is in the table rotated (kernels/cpu/rope.hpp), then k's
// and v's rows into the cache at slot n_past + t where that is inside it, rounded to bf16 by
// core/dtype.hpp for a bf16 cache.
struct PositionCase {
  std::int64_t head_dim = 16;
  std::int64_t q_heads = 3;
  std::int64_t kv_heads = 2;
  std::int64_t n_past = 30;
  std::int64_t capacity = 0;
  DType kv_dtype = DType::kF32;
  std::vector<std::int32_t> positions;
  std::vector<float> table;
  std::int64_t table_positions = 40;
};

void rotate_in_table(const PositionCase& pc, std::vector<float>& rows, std::int64_t heads) {
  const std::int64_t width = heads * pc.head_dim;
  for (std::size_t t = 0; t < pc.positions.size(); ++t) {
    if (pc.positions[t] >= pc.table_positions) continue;  // neither rotated nor written
    kc::apply_rope_table(rows.data() + static_cast<std::int64_t>(t) * width, 1, width, heads,
                         pc.head_dim, &pc.positions[t], pc.table.data(), pc.table_positions);
  }
}

void write_reference_cache(const PositionCase& pc, const std::vector<float>& rows,
                           std::vector<std::uint32_t>& cache) {
  const std::int64_t width = pc.kv_heads * pc.head_dim;
  for (std::size_t t = 0; t < pc.positions.size(); ++t) {
    const std::int64_t slot = pc.n_past + static_cast<std::int64_t>(t);
    if (pc.positions[t] >= pc.table_positions || slot >= pc.capacity) continue;
    for (std::int64_t e = 0; e < width; ++e) {
      const std::int64_t head = e / pc.head_dim;
      const std::int64_t index = (head * pc.capacity + slot) * pc.head_dim + e % pc.head_dim;
      const float value = rows[static_cast<std::size_t>(static_cast<std::int64_t>(t) * width + e)];
      if (pc.kv_dtype == DType::kBF16) {
        reinterpret_cast<std::uint16_t*>(cache.data())[index] = f32_to_bf16(value);
      } else {
        std::memcpy(cache.data() + index, &value, sizeof value);
      }
    }
  }
}

// The RoPE form: a tile's four head pairs (rows i and i + d/2 of one head) paired within a warp,
// stored through store_head_pair: q, the key cache and the value cache get the references
// through the CPU's position step, bit for bit, at f32 and bf16 caches, with a token outside the
// RoPE table (left unrotated in q, not written) and a slot outside the cache (not written).
TEST_P(QuantTileScheduleTest, TheRopeFormGivesTheReferencesThroughThePositionStep) {
  const WeightFormat format = GetParam();
  std::mt19937 rng(93);
  PositionCase pc;
  const Shape s = shapes(format)[1];
  const Matrix wq = make_matrix(rng, format, pc.q_heads * pc.head_dim, s.blocks, s.skip, s.cols);
  const Matrix wk = make_matrix(rng, format, pc.kv_heads * pc.head_dim, s.blocks, s.skip, s.cols);
  const Matrix wv = make_matrix(rng, format, pc.kv_heads * pc.head_dim, s.blocks, s.skip, s.cols);
  std::vector<float> inv_freq(static_cast<std::size_t>(pc.head_dim / 2));
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] =
        std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(pc.head_dim));
  }
  pc.table.resize(static_cast<std::size_t>(pc.table_positions * pc.head_dim));
  kc::fill_rope_table(inv_freq, 0, pc.table_positions, pc.table.data());
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const int tokens : {1, 5, 11}) {
      SCOPED_TRACE(::testing::Message() << tokens << " tokens, " << dtype_name(dtype) << " cache");
      pc.kv_dtype = dtype;
      pc.capacity = pc.n_past + tokens - 1;  // the last token's slot is outside the cache
      pc.positions.resize(static_cast<std::size_t>(tokens));
      for (int t = 0; t < tokens; ++t) pc.positions[static_cast<std::size_t>(t)] = 30 + t;
      if (tokens > 2) pc.positions[1] = 100;  // outside the table
      const std::vector<float> x = activations(rng, tokens * s.cols);
      kc::QuantizedActivations a;
      kc::quantize_activations(x.data(), tokens, s.cols, a);

      std::vector<float> q_ref(static_cast<std::size_t>(tokens * wq.l.rows));
      std::vector<float> k_ref(static_cast<std::size_t>(tokens * wk.l.rows));
      std::vector<float> v_ref(k_ref.size());
      reference_quant_matmul(wq.bytes, x.data(), tokens, q_ref.data());
      reference_quant_matmul(wk.bytes, x.data(), tokens, k_ref.data());
      reference_quant_matmul(wv.bytes, x.data(), tokens, v_ref.data());
      rotate_in_table(pc, q_ref, pc.q_heads);
      rotate_in_table(pc, k_ref, pc.kv_heads);
      const auto cache_words = static_cast<std::size_t>(pc.kv_heads * pc.capacity * pc.head_dim);
      std::vector<std::uint32_t> k_cache_ref(cache_words, 0x7f7f7f7fu);
      std::vector<std::uint32_t> v_cache_ref(cache_words, 0x7f7f7f7fu);
      write_reference_cache(pc, k_ref, k_cache_ref);
      write_reference_cache(pc, v_ref, v_cache_ref);

      std::vector<float> q(q_ref.size(), -1.0f);
      std::vector<std::uint32_t> k_cache(cache_words, 0x7f7f7f7fu);
      std::vector<std::uint32_t> v_cache(cache_words, 0x7f7f7f7fu);
      const kq::PositionStep step{.q = q.data(),
                                  .q_rows = wq.l.rows,
                                  .k_cache = k_cache.data(),
                                  .v_cache = v_cache.data(),
                                  .capacity = pc.capacity,
                                  .kv_dtype = dtype,
                                  .head_dim = pc.head_dim,
                                  .positions = pc.positions.data(),
                                  .table = pc.table.data(),
                                  .table_positions = pc.table_positions};
      const std::pair<const Matrix*, kq::HeadOutput> outputs[] = {
          {&wq, kq::HeadOutput::kRotated},
          {&wk, kq::HeadOutput::kRotatedIntoCache},
          {&wv, kq::HeadOutput::kIntoCache}};
      for (const auto& [m, output] : outputs) {
        const Matrix* const parts[] = {m};
        run_launch(parts, a, tokens,
                   {kq::QuantTileForm::kHeadPairs, pc.head_dim, &step, output, pc.n_past});
      }
      EXPECT_EQ(std::memcmp(q.data(), q_ref.data(), q.size() * sizeof(float)), 0);
      EXPECT_EQ(k_cache, k_cache_ref);
      EXPECT_EQ(v_cache, v_cache_ref);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantTileLayoutTest, ::testing::ValuesIn(kQuantizedFormats),
                         [](const auto& param_info) {
                           return std::string(weight_format_name(param_info.param));
                         });
INSTANTIATE_TEST_SUITE_P(Formats, QuantTileScheduleTest, ::testing::ValuesIn(kQuantizedFormats),
                         [](const auto& param_info) {
                           return std::string(weight_format_name(param_info.param));
                         });

}  // namespace
}  // namespace selfspec
