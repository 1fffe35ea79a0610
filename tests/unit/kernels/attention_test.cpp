// Attention against a naive double reference (MHA and GQA, causal and tree masks, n_past 0 and
// > 0), and the invariance contract: a query's output is bit-identical alone or inside a batch,
// for either ISA and any thread count; a bf16 cache gives the bits of an f32 cache holding the same
// (rounded) values, on every ISA.
#include "kernels/cpu/attention.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernel_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace selfspec::kernels::cpu::test {
namespace {

struct Case {
  AttentionShape shape;
  std::vector<float> q;
  std::vector<float> k;
  std::vector<float> v;
  std::vector<std::uint8_t> mask;  // empty: causal
  std::vector<int> parent;         // tree cases: parent of each new token (-1: root)
};

// Cache slots beyond n_past + T hold NaN: reading them would poison the output.
Case make_case(std::mt19937& rng, std::int64_t n_tokens, std::int64_t n_q_heads,
               std::int64_t n_kv_heads, std::int64_t head_dim, std::int64_t n_past, bool tree) {
  Case c;
  c.shape =
      AttentionShape{n_tokens, n_q_heads, n_kv_heads, head_dim, n_past, n_past + n_tokens + 3};
  c.q = random_floats(rng, static_cast<std::size_t>(n_tokens * n_q_heads * head_dim), 1.5f);
  const std::size_t cache = static_cast<std::size_t>(n_kv_heads * c.shape.capacity * head_dim);
  c.k = random_floats(rng, cache, 1.5f);
  c.v = random_floats(rng, cache, 1.0f);
  for (std::int64_t h = 0; h < n_kv_heads; ++h) {
    for (std::int64_t s = n_past + n_tokens; s < c.shape.capacity; ++s) {
      for (std::int64_t d = 0; d < head_dim; ++d) {
        const std::size_t i = static_cast<std::size_t>((h * c.shape.capacity + s) * head_dim + d);
        c.k[i] = std::numeric_limits<float>::quiet_NaN();
        c.v[i] = std::numeric_limits<float>::quiet_NaN();
      }
    }
  }
  if (tree) {
    c.parent.assign(static_cast<std::size_t>(n_tokens), -1);
    c.mask.assign(static_cast<std::size_t>(n_tokens * n_tokens), 0);
    for (std::int64_t i = 0; i < n_tokens; ++i) {
      if (i > 0) {
        std::uniform_int_distribution<int> pick(-1, static_cast<int>(i) - 1);
        c.parent[static_cast<std::size_t>(i)] = i == 1 ? 0 : pick(rng);
      }
      for (int a = static_cast<int>(i); a >= 0; a = c.parent[static_cast<std::size_t>(a)]) {
        c.mask[static_cast<std::size_t>(i * n_tokens + a)] = 1;
      }
    }
  }
  return c;
}

std::vector<float> run(const Case& c, float scale) {
  const AttentionShape& s = c.shape;
  std::vector<float> out =
      nan_filled(static_cast<std::size_t>(s.n_tokens * s.n_q_heads * s.head_dim));
  attention(c.q.data(), c.k.data(), c.v.data(), s, c.mask.empty() ? nullptr : c.mask.data(), scale,
            out.data());
  return out;
}

std::vector<double> reference(const Case& c, float scale) {
  const AttentionShape& s = c.shape;
  std::vector<double> out(static_cast<std::size_t>(s.n_tokens * s.n_q_heads * s.head_dim));
  const std::int64_t group = s.n_q_heads / s.n_kv_heads;
  for (std::int64_t t = 0; t < s.n_tokens; ++t) {
    for (std::int64_t h = 0; h < s.n_q_heads; ++h) {
      const std::int64_t kv = h / group;
      std::vector<std::int64_t> slots;
      for (std::int64_t j = 0; j < s.n_past + s.n_tokens; ++j) {
        const std::int64_t new_index = j - s.n_past;
        bool visible = j < s.n_past;
        if (!visible) {
          visible = c.mask.empty() ? new_index <= t
                                   : c.mask[static_cast<std::size_t>(t * s.n_tokens + new_index)];
        }
        if (visible) slots.push_back(j);
      }
      const float* qv = c.q.data() + (t * s.n_q_heads + h) * s.head_dim;
      std::vector<double> scores;
      double max_score = -1e300;
      for (const std::int64_t j : slots) {
        const float* kv_row = c.k.data() + (kv * s.capacity + j) * s.head_dim;
        double dot = 0.0;
        for (std::int64_t d = 0; d < s.head_dim; ++d) dot += static_cast<double>(qv[d]) * kv_row[d];
        scores.push_back(dot * scale);
        max_score = std::max(max_score, scores.back());
      }
      double denominator = 0.0;
      for (double& sc : scores) {
        sc = std::exp(sc - max_score);
        denominator += sc;
      }
      for (std::int64_t d = 0; d < s.head_dim; ++d) {
        double acc = 0.0;
        for (std::size_t i = 0; i < slots.size(); ++i) {
          acc += scores[i] / denominator *
                 c.v[static_cast<std::size_t>((kv * s.capacity + slots[i]) * s.head_dim + d)];
        }
        out[static_cast<std::size_t>((t * s.n_q_heads + h) * s.head_dim + d)] = acc;
      }
    }
  }
  return out;
}

struct Config {
  std::int64_t n_q_heads;
  std::int64_t n_kv_heads;
  std::int64_t head_dim;
};

constexpr Config kConfigs[] = {{4, 4, 16}, {8, 2, 64}, {3, 1, 17}, {2, 2, 128}};
constexpr std::int64_t kTokenCounts[] = {1, 2, 3, 5, 17};
constexpr std::int64_t kPast[] = {0, 7, 100};

class AttentionTest : public ::testing::TestWithParam<bool> {  // param: tree mask
 protected:
  IsaGuard isa_guard_;
  ThreadGuard thread_guard_;
};

TEST_P(AttentionTest, MatchesDoubleReference) {
  const bool tree = GetParam();
  std::mt19937 rng(41);
  for (const Config& cfg : kConfigs) {
    for (const std::int64_t n_tokens : kTokenCounts) {
      for (const std::int64_t n_past : kPast) {
        const Case c =
            make_case(rng, n_tokens, cfg.n_q_heads, cfg.n_kv_heads, cfg.head_dim, n_past, tree);
        const float scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
        const std::vector<double> ref = reference(c, scale);
        for (const Isa isa : available_isas()) {
          SCOPED_TRACE(::testing::Message() << "isa " << isa_name(isa) << " heads " << cfg.n_q_heads
                                            << "/" << cfg.n_kv_heads << " head_dim " << cfg.head_dim
                                            << " T " << n_tokens << " n_past " << n_past);
          force_isa(isa);
          const std::vector<float> out = run(c, scale);
          for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 2e-5) << i;
        }
      }
    }
  }
}

// Every query of a batch equals the same query computed alone (T = 1) over the same visible
// slots laid out contiguously: for the causal mask that is the cache itself with n_past = its
// slot; for a tree mask the past followed by the node's ancestors (how an accepted path is
// stored after verification).
TEST_P(AttentionTest, BatchEqualsSingleQuery) {
  const bool tree = GetParam();
  std::mt19937 rng(43);
  for (const Config& cfg : kConfigs) {
    for (const std::int64_t n_tokens : {2, 3, 5, 17}) {
      for (const std::int64_t n_past : {std::int64_t{0}, std::int64_t{9}}) {
        const Case c =
            make_case(rng, n_tokens, cfg.n_q_heads, cfg.n_kv_heads, cfg.head_dim, n_past, tree);
        const float scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
        for (const Isa isa : available_isas()) {
          force_isa(isa);
          const std::vector<float> batch = run(c, scale);
          const std::int64_t row = cfg.n_q_heads * cfg.head_dim;
          for (std::int64_t t = 0; t < n_tokens; ++t) {
            SCOPED_TRACE(::testing::Message()
                         << "isa " << isa_name(isa) << " heads " << cfg.n_q_heads << "/"
                         << cfg.n_kv_heads << " T " << n_tokens << " n_past " << n_past << " token "
                         << t);
            std::vector<std::int64_t> path;  // new-token slots visible to t, ascending
            if (tree) {
              for (int a = static_cast<int>(t); a >= 0; a = c.parent[static_cast<std::size_t>(a)]) {
                path.push_back(a);
              }
              std::reverse(path.begin(), path.end());
            } else {
              for (std::int64_t j = 0; j <= t; ++j) path.push_back(j);
            }
            Case single;
            const std::int64_t depth = static_cast<std::int64_t>(path.size());
            single.shape = AttentionShape{1,
                                          cfg.n_q_heads,
                                          cfg.n_kv_heads,
                                          cfg.head_dim,
                                          n_past + depth - 1,
                                          c.shape.capacity};
            single.q.assign(c.q.begin() + t * row, c.q.begin() + (t + 1) * row);
            single.k = nan_filled(c.k.size());
            single.v = nan_filled(c.v.size());
            for (std::int64_t h = 0; h < cfg.n_kv_heads; ++h) {
              auto copy_slot = [&](std::int64_t from, std::int64_t to) {
                const std::int64_t src = (h * c.shape.capacity + from) * cfg.head_dim;
                const std::int64_t dst = (h * c.shape.capacity + to) * cfg.head_dim;
                std::copy(c.k.begin() + src, c.k.begin() + src + cfg.head_dim,
                          single.k.begin() + dst);
                std::copy(c.v.begin() + src, c.v.begin() + src + cfg.head_dim,
                          single.v.begin() + dst);
              };
              for (std::int64_t s = 0; s < n_past; ++s) copy_slot(s, s);
              for (std::int64_t i = 0; i < depth; ++i) {
                copy_slot(n_past + path[static_cast<std::size_t>(i)], n_past + i);
              }
            }
            const std::vector<float> alone = run(single, scale);
            ASSERT_TRUE(same_bits(
                alone, std::vector<float>(batch.begin() + t * row, batch.begin() + (t + 1) * row)));
          }
        }
      }
    }
  }
}

TEST_P(AttentionTest, IsaAndThreadCountInvariant) {
  const bool tree = GetParam();
  std::mt19937 rng(47);
  const Case c = make_case(rng, 17, 8, 2, 64, 100, tree);
  const float scale = 0.125f;
  std::vector<std::vector<float>> results;
  for (const Isa isa : available_isas()) {
    force_isa(isa);
    for (const int threads : {1, 2, 3}) {
      set_num_threads(threads);
      results.push_back(run(c, scale));
    }
  }
  for (const auto& r : results) EXPECT_TRUE(same_bits(results[0], r));
}

// The vectorised forms of the scores and the value sums against the scalar sequence, bit for bit,
// on shapes that exercise their blocking: groups of 3 and 6 query heads per KV head (SmolLM2,
// Qwen2.5), more heads than one pass holds (32), head sizes with a partial vector (17, 40) and
// more dimensions than one pass holds (200); at 1 to 3 threads (a decode step splits a KV head's
// query heads between threads).
TEST_P(AttentionTest, EveryIsaGivesTheScalarBits) {
  const bool tree = GetParam();
  std::mt19937 rng(53);
  const Config configs[] = {{9, 3, 64},  {12, 2, 128}, {32, 1, 24}, {6, 1, 40},
                            {4, 2, 200}, {3, 1, 17},   {8, 2, 64}};
  for (const Config& cfg : configs) {
    for (const std::int64_t n_tokens : {1, 4, 17}) {
      for (const std::int64_t n_past : {std::int64_t{0}, std::int64_t{37}}) {
        const Case c =
            make_case(rng, n_tokens, cfg.n_q_heads, cfg.n_kv_heads, cfg.head_dim, n_past, tree);
        const float scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
        force_isa(Isa::kScalar);
        const std::vector<float> scalar = run(c, scale);
        for (const Isa isa : available_isas()) {
          SCOPED_TRACE(::testing::Message() << "isa " << isa_name(isa) << " heads " << cfg.n_q_heads
                                            << "/" << cfg.n_kv_heads << " head_dim " << cfg.head_dim
                                            << " T " << n_tokens << " n_past " << n_past);
          force_isa(isa);
          for (const int threads : {1, 2, 3}) {
            set_num_threads(threads);
            ASSERT_TRUE(same_bits(scalar, run(c, scale))) << threads << " threads";
          }
        }
      }
    }
  }
}

// A bf16 cache: K and V rounded to bf16 (core/dtype.hpp), then attention over the bf16 elements on
// every ISA and thread count equals, bit for bit, the scalar attention over an f32 cache holding
// the rounded values (the widening is exact, so nothing else may change). Shapes as above,
// including partial vectors (17, 24, 40) where the bf16 loads are masked or copied.
TEST_P(AttentionTest, BfloatCacheGivesTheBitsOfItsValuesInF32) {
  const bool tree = GetParam();
  std::mt19937 rng(59);
  const Config configs[] = {{9, 3, 64}, {12, 2, 128}, {32, 1, 24},
                            {6, 1, 40}, {4, 2, 200},  {3, 1, 17}};
  for (const Config& cfg : configs) {
    for (const std::int64_t n_tokens : {1, 4, 17}) {
      for (const std::int64_t n_past : {std::int64_t{0}, std::int64_t{37}}) {
        Case rounded =
            make_case(rng, n_tokens, cfg.n_q_heads, cfg.n_kv_heads, cfg.head_dim, n_past, tree);
        std::vector<std::uint16_t> k_bf16(rounded.k.size());
        std::vector<std::uint16_t> v_bf16(rounded.v.size());
        for (std::size_t i = 0; i < rounded.k.size(); ++i) {
          k_bf16[i] = f32_to_bf16(rounded.k[i]);
          v_bf16[i] = f32_to_bf16(rounded.v[i]);
          rounded.k[i] = bf16_to_f32(k_bf16[i]);
          rounded.v[i] = bf16_to_f32(v_bf16[i]);
        }
        const float scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
        force_isa(Isa::kScalar);
        const std::vector<float> expected = run(rounded, scale);
        AttentionShape shape = rounded.shape;
        shape.kv_dtype = DType::kBF16;
        for (const Isa isa : available_isas()) {
          SCOPED_TRACE(::testing::Message() << "isa " << isa_name(isa) << " heads " << cfg.n_q_heads
                                            << "/" << cfg.n_kv_heads << " head_dim " << cfg.head_dim
                                            << " T " << n_tokens << " n_past " << n_past);
          force_isa(isa);
          for (const int threads : {1, 2}) {
            set_num_threads(threads);
            std::vector<float> out = nan_filled(expected.size());
            attention(rounded.q.data(), k_bf16.data(), v_bf16.data(), shape,
                      rounded.mask.empty() ? nullptr : rounded.mask.data(), scale, out.data());
            ASSERT_TRUE(same_bits(expected, out)) << threads << " threads";
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Masks, AttentionTest, ::testing::Bool(), [](const auto& param_info) {
  return param_info.param ? "tree" : "causal";
});

TEST(AttentionEdgeCases, BadShapesThrow) {
  std::vector<float> buf(1024, 0.5f);
  std::vector<float> out(1024);
  EXPECT_THROW(attention(buf.data(), buf.data(), buf.data(), AttentionShape{1, 3, 2, 8, 0, 4},
                         nullptr, 1.0f, out.data()),
               selfspec::Error);
  EXPECT_THROW(attention(buf.data(), buf.data(), buf.data(), AttentionShape{3, 2, 2, 8, 2, 4},
                         nullptr, 1.0f, out.data()),
               selfspec::Error);
  EXPECT_NO_THROW(attention(buf.data(), buf.data(), buf.data(), AttentionShape{2, 2, 2, 8, 2, 4},
                            nullptr, 1.0f, out.data()));
  // A cache of f16 is not one the kernels read.
  EXPECT_THROW(attention(buf.data(), buf.data(), buf.data(),
                         AttentionShape{2, 2, 2, 8, 2, 4, DType::kF16}, nullptr, 1.0f, out.data()),
               selfspec::Error);
}

}  // namespace
}  // namespace selfspec::kernels::cpu::test
