// The CUDA logit-row kernels against the decode/ semantics: row_stats against shard_stats (max and
// first argmax exact, Σ exp to 1e-12), warp_logits + softmax_rows against decode::warp_logits
// (surviving ids exactly, probabilities to 1e-6; ties at the top-k threshold and inside the top-p
// cut included; the cut may lie one token apart only where the removed mass ties 1 − top_p to
// within rounding, as logits.cu documents), softmax_rows against a double softmax, and
// speculative_accept against a sequential CPU reimplementation on fixed uniforms.
#include "backend/logit_statistics.hpp"
#include "cuda_test_util.hpp"
#include "verify/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> normal_logits(std::mt19937& rng, std::size_t n, float sigma) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Logits on a grid of 1/8: many exact ties.
std::vector<float> tied_logits(std::mt19937& rng, std::size_t n) {
  std::uniform_int_distribution<int> dist(-40, 24);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(dist(rng)) / 8.0f;
  return v;
}

TEST(CudaRowStats, MatchesShardStats) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(41);
  for (const std::int64_t vocab :
       {std::int64_t{1}, std::int64_t{1000}, std::int64_t{32003}, std::int64_t{128256}}) {
    for (const std::int64_t vocab_begin : {std::int64_t{0}, std::int64_t{5000}}) {
      for (const double inv_temperature : {1.0, 1.0 / 0.7}) {
        SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " begin " << vocab_begin
                                          << " inv_t " << inv_temperature);
        const std::int64_t rows = 5;
        std::vector<float> logits =
            normal_logits(rng, static_cast<std::size_t>(rows * vocab), 3.0f);
        const auto at = [&](std::int64_t r, std::int64_t i) -> float& {
          return logits[static_cast<std::size_t>(r * vocab + i)];
        };
        if (vocab > 10) {
          // Row 1: the maximum appears twice (the first one must win).
          at(1, 3) = 50.0f;
          at(1, vocab - 2) = 50.0f;
          // Row 2: NaN and infinities; row 3: the maximum at the very end.
          at(2, 0) = kNaN;
          at(2, 7) = -kInf;
          at(2, vocab / 2) = kNaN;
          at(3, vocab - 1) = 40.0f;
        }
        // Row 4: nothing finite.
        for (std::int64_t i = 0; i < vocab; ++i) at(4, i) = i % 2 == 0 ? -kInf : kNaN;

        DeviceBuffer<float> d_logits(logits);
        DeviceBuffer<RowStatsRecord> d_out(static_cast<std::size_t>(rows));
        d_out.poison();
        row_stats(d_logits.get(), rows, vocab, vocab_begin, inv_temperature, d_out.get(), nullptr);
        const std::vector<RowStatsRecord> out = d_out.download();
        for (std::int64_t r = 0; r < rows; ++r) {
          const ShardStats expected =
              shard_stats(std::span<const float>(logits).subspan(
                              static_cast<std::size_t>(r * vocab), static_cast<std::size_t>(vocab)),
                          vocab_begin, inv_temperature);
          const RowStatsRecord& actual = out[static_cast<std::size_t>(r)];
          EXPECT_EQ(actual.argmax, expected.argmax) << "row " << r;
          EXPECT_EQ(actual.max, expected.max) << "row " << r;
          if (expected.argmax >= 0) {
            EXPECT_NEAR(actual.sum_exp, expected.sum_exp, 1e-12 * expected.sum_exp) << "row " << r;
          } else {
            EXPECT_EQ(actual.sum_exp, 0.0) << "row " << r;
          }
        }
      }
    }
  }
}

struct WarpCase {
  double temperature;
  std::int32_t top_k;
  double top_p;
};

constexpr WarpCase kWarpCases[] = {
    {0.7, 0, 1.0}, {1.0, 50, 1.0}, {0.8, 0, 0.9},   {1.3, 40, 0.8},       {1.0, 1, 1.0},
    {0.9, 0, 0.3}, {1.0, 1, 0.5},  {1.1, 7, 0.999}, {0.6, 2000000, 0.95}, {2.0, 300, 0.05},
};

// The one difference logits.cu documents: where the mass of the removed tail ties 1 − top_p to
// within rounding, the GPU's exact fixed-point sum and the CPU's sequential double sum may cut one
// token apart (e.g. 1980 equal survivors and top_p 0.8: 396 of them hold exactly 0.2). When
// `gpu_count` survivors differ from the CPU's by one and such a tie lies between the two cuts,
// returns the CPU's distribution cut at gpu_count instead (its top_p = 1 order, renormalised).
std::optional<TokenDistribution> top_p_tie_alternative(std::span<const float> row,
                                                       const SamplingParams& sampling,
                                                       const TokenDistribution& expected,
                                                       std::size_t gpu_count) {
  if (sampling.top_p >= 1.0) return std::nullopt;
  const std::size_t cpu_count = expected.ids.size();
  if (gpu_count + 1 != cpu_count && cpu_count + 1 != gpu_count) return std::nullopt;
  SamplingParams no_nucleus = sampling;
  no_nucleus.top_p = 1.0;
  const TokenDistribution full = selfspec::warp_logits(row, no_nucleus);
  if (gpu_count == 0 || gpu_count > full.ids.size()) return std::nullopt;
  // The tail removed by the larger cut, summed exactly enough to see a tie of ~1e-16.
  long double tail = 0.0L;
  for (std::size_t i = std::min(gpu_count, cpu_count); i < full.ids.size(); ++i) {
    tail += static_cast<long double>(full.probs[i]);
  }
  if (std::fabs(static_cast<double>(tail) - (1.0 - sampling.top_p)) > 1e-12) return std::nullopt;
  TokenDistribution cut;
  cut.ids.assign(full.ids.begin(), full.ids.begin() + static_cast<std::ptrdiff_t>(gpu_count));
  cut.probs.assign(full.probs.begin(), full.probs.begin() + static_cast<std::ptrdiff_t>(gpu_count));
  double sum = 0.0;
  for (const double p : cut.probs) sum += p;
  for (double& p : cut.probs) p /= sum;
  return cut;
}

void check_warp(const std::vector<float>& logits, std::int64_t rows, std::int64_t vocab,
                const WarpCase& params) {
  DeviceBuffer<float> d_logits(logits);
  warp_logits(d_logits.get(), rows, vocab, params.temperature, params.top_k, params.top_p, nullptr);
  DeviceBuffer<float> d_probs(logits.size());
  d_probs.poison();
  softmax_rows(d_logits.get(), rows, vocab, d_probs.get(), nullptr);
  const std::vector<float> warped = d_logits.download();
  const std::vector<float> probs = d_probs.download();

  SamplingParams sampling;
  sampling.temperature = params.temperature;
  sampling.top_k = params.top_k;
  sampling.top_p = params.top_p;
  for (std::int64_t r = 0; r < rows; ++r) {
    SCOPED_TRACE(::testing::Message() << "row " << r);
    const auto offset = static_cast<std::size_t>(r * vocab);
    const std::span<const float> row =
        std::span<const float>(logits).subspan(offset, static_cast<std::size_t>(vocab));
    TokenDistribution expected = selfspec::warp_logits(row, sampling);
    std::set<std::int32_t> actual_ids;
    for (std::int64_t i = 0; i < vocab; ++i) {
      if (warped[offset + static_cast<std::size_t>(i)] != -kInf) {
        actual_ids.insert(static_cast<std::int32_t>(i));
      }
    }
    if (actual_ids != std::set<std::int32_t>(expected.ids.begin(), expected.ids.end())) {
      if (auto tie = top_p_tie_alternative(row, sampling, expected, actual_ids.size())) {
        expected = std::move(*tie);  // still checked below: the ids and every probability
      }
    }
    std::vector<double> expected_prob(static_cast<std::size_t>(vocab), 0.0);
    for (std::size_t i = 0; i < expected.ids.size(); ++i) {
      expected_prob[static_cast<std::size_t>(expected.ids[i])] = expected.probs[i];
    }
    const std::set<std::int32_t> expected_ids(expected.ids.begin(), expected.ids.end());
    int failures = 0;
    for (std::int64_t i = 0; i < vocab; ++i) {
      const float w = warped[offset + static_cast<std::size_t>(i)];
      if (w != -kInf) {
        const float scaled = static_cast<float>(
            static_cast<double>(logits[offset + static_cast<std::size_t>(i)]) / params.temperature);
        if (w != scaled && ++failures <= 5) {
          ADD_FAILURE() << "id " << i << " warped to " << w << ", expected " << scaled;
        }
      }
      // The GPU softmaxes the f32 scaled logits (half an ulp of |l / T| off the double value),
      // the CPU the double ones: 1e-6, plus a relative term for large probabilities.
      const double p = probs[offset + static_cast<std::size_t>(i)];
      const double e = expected_prob[static_cast<std::size_t>(i)];
      if (!(std::fabs(p - e) <= 1e-6 + 2e-6 * e) && ++failures <= 5) {
        ADD_FAILURE() << "id " << i << " probability " << p << ", expected "
                      << expected_prob[static_cast<std::size_t>(i)];
      }
    }
    EXPECT_EQ(failures, 0);
    EXPECT_EQ(actual_ids, expected_ids)
        << actual_ids.size() << " survivors on the GPU, " << expected_ids.size() << " on the CPU";
  }
}

TEST(CudaWarpLogits, MatchesDecodeWarpLogits) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(42);
  for (const std::int64_t vocab : {std::int64_t{50}, std::int64_t{1000}, std::int64_t{128256}}) {
    for (const WarpCase& params : kWarpCases) {
      SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " T " << params.temperature
                                        << " top_k " << params.top_k << " top_p " << params.top_p);
      const std::int64_t rows = 3;
      {
        SCOPED_TRACE("continuous logits");
        check_warp(normal_logits(rng, static_cast<std::size_t>(rows * vocab), 2.0f), rows, vocab,
                   params);
      }
      {
        SCOPED_TRACE("tied logits");
        check_warp(tied_logits(rng, static_cast<std::size_t>(rows * vocab)), rows, vocab, params);
      }
    }
  }
}

TEST(CudaSoftmaxRows, MatchesDoubleSoftmax) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(43);
  for (const std::int64_t vocab : {std::int64_t{1}, std::int64_t{777}, std::int64_t{128256}}) {
    SCOPED_TRACE(::testing::Message() << "vocab " << vocab);
    const std::int64_t rows = 3;
    std::vector<float> logits = normal_logits(rng, static_cast<std::size_t>(rows * vocab), 4.0f);
    logits[0] = -kInf;
    DeviceBuffer<float> d_logits(logits);
    DeviceBuffer<float> d_probs(logits.size());
    d_probs.poison();
    softmax_rows(d_logits.get(), rows, vocab, d_probs.get(), nullptr);
    const std::vector<float> probs = d_probs.download();
    std::vector<float> expected(logits.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto offset = static_cast<std::size_t>(r * vocab);
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t i = 0; i < vocab; ++i) m = std::max<double>(m, logits[offset + i]);
      double sum = 0.0;
      for (std::int64_t i = 0; i < vocab; ++i) sum += std::exp(logits[offset + i] - m);
      for (std::int64_t i = 0; i < vocab; ++i) {
        expected[offset + static_cast<std::size_t>(i)] =
            std::isfinite(m) ? static_cast<float>(std::exp(logits[offset + i] - m) / sum) : 0.0f;
      }
    }
    expect_close(probs, expected, 0.0, 1e-6, "softmax");
  }
}

// ------------------------------------------------------------------------------------------------
// speculative_accept

struct Verdict {
  std::int32_t accepted = 0;
  std::int32_t next = -1;
};

// The documented semantics, sequentially: acceptance tests in order, then an inverse-CDF walk
// over ascending ids at uniforms[k] over max(0, p − q) (p when that has no mass) or p.
Verdict cpu_accept(const std::vector<float>& p, const std::vector<float>& q, std::int64_t k,
                   std::int64_t vocab, const std::vector<std::int32_t>& drafted,
                   const std::vector<double>& uniforms) {
  Verdict verdict;
  for (; verdict.accepted < k; ++verdict.accepted) {
    const std::int64_t j = verdict.accepted;
    const std::int32_t d = drafted[static_cast<std::size_t>(j)];
    if (d < 0 || d >= vocab) break;
    const double p_d = p[static_cast<std::size_t>(j * vocab + d)];
    const double q_d = q[static_cast<std::size_t>(j * vocab + d)];
    if (!(uniforms[static_cast<std::size_t>(j)] * q_d < p_d)) break;
  }
  const std::int64_t j = verdict.accepted;
  const auto walk = [&](bool residual) -> std::int32_t {
    const auto weight = [&](std::int64_t x) {
      const double pv = p[static_cast<std::size_t>(j * vocab + x)];
      if (!residual) return pv > 0.0 ? pv : 0.0;
      const double qv = q[static_cast<std::size_t>(j * vocab + x)];
      return pv > qv ? pv - qv : 0.0;
    };
    double mass = 0.0;
    for (std::int64_t x = 0; x < vocab; ++x) mass += weight(x);
    if (!(mass > 0.0)) return -2;
    const double target = uniforms[static_cast<std::size_t>(k)] * mass;
    double cumulative = 0.0;
    std::int32_t last = -1;
    for (std::int64_t x = 0; x < vocab; ++x) {
      const double w = weight(x);
      if (w <= 0.0) continue;
      last = static_cast<std::int32_t>(x);
      cumulative += w;
      if (target < cumulative) return static_cast<std::int32_t>(x);
    }
    return last;
  };
  std::int32_t next = -2;
  if (j < k) next = walk(true);
  if (next == -2) next = walk(false);
  verdict.next = next == -2 ? -1 : next;
  return verdict;
}

std::vector<float> softmax_rows_host(const std::vector<float>& logits, std::int64_t vocab) {
  std::vector<float> probs(logits.size());
  const auto rows = static_cast<std::int64_t>(logits.size()) / vocab;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto offset = static_cast<std::size_t>(r * vocab);
    double m = -std::numeric_limits<double>::infinity();
    for (std::int64_t i = 0; i < vocab; ++i) m = std::max<double>(m, logits[offset + i]);
    double sum = 0.0;
    for (std::int64_t i = 0; i < vocab; ++i) sum += std::exp(logits[offset + i] - m);
    for (std::int64_t i = 0; i < vocab; ++i) {
      probs[offset + static_cast<std::size_t>(i)] =
          static_cast<float>(std::exp(logits[offset + i] - m) / sum);
    }
  }
  return probs;
}

Verdict gpu_accept(const std::vector<float>& p, const std::vector<float>& q, std::int64_t k,
                   std::int64_t vocab, const std::vector<std::int32_t>& drafted,
                   const std::vector<double>& uniforms) {
  DeviceBuffer<float> d_p(p);
  DeviceBuffer<float> d_q(q.empty() ? std::vector<float>{0.0f} : q);
  DeviceBuffer<std::int32_t> d_drafted(drafted.empty() ? std::vector<std::int32_t>{0} : drafted);
  DeviceBuffer<double> d_uniforms(uniforms);
  DeviceBuffer<std::int32_t> d_out(2);
  d_out.poison();
  speculative_accept(d_p.get(), d_q.get(), k, vocab, d_drafted.get(), d_uniforms.get(), d_out.get(),
                     d_out.get() + 1, nullptr);
  const std::vector<std::int32_t> out = d_out.download();
  return Verdict{out[0], out[1]};
}

TEST(CudaSpeculativeAccept, MatchesSequentialReference) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(44);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (const std::int64_t vocab : {std::int64_t{10}, std::int64_t{1000}, std::int64_t{128256}}) {
    for (const std::int64_t k :
         {std::int64_t{0}, std::int64_t{1}, std::int64_t{4}, std::int64_t{8}}) {
      for (int trial = 0; trial < 12; ++trial) {
        SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " k " << k << " trial " << trial);
        // p and q related (q = p's logits plus noise) so that acceptance happens often.
        const std::vector<float> p_logits =
            normal_logits(rng, static_cast<std::size_t>((k + 1) * vocab), 2.0f);
        std::vector<float> q_logits(static_cast<std::size_t>(k * vocab));
        std::normal_distribution<float> noise(0.0f, trial % 3 == 0 ? 0.1f : 1.5f);
        for (std::size_t i = 0; i < q_logits.size(); ++i) q_logits[i] = p_logits[i] + noise(rng);
        const std::vector<float> p = softmax_rows_host(p_logits, vocab);
        const std::vector<float> q =
            k > 0 ? softmax_rows_host(q_logits, vocab) : std::vector<float>{};
        std::vector<std::int32_t> drafted(static_cast<std::size_t>(k));
        for (std::int64_t j = 0; j < k; ++j) {
          // Draft q's argmax (usually accepted) or a random id (often rejected).
          const auto begin = q.begin() + static_cast<std::ptrdiff_t>(j * vocab);
          drafted[static_cast<std::size_t>(j)] =
              trial % 2 == 0
                  ? static_cast<std::int32_t>(std::max_element(begin, begin + vocab) - begin)
                  : static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(vocab));
        }
        std::vector<double> uniforms(static_cast<std::size_t>(k + 1));
        for (double& u : uniforms) u = uniform(rng);
        if (trial == 5) std::fill(uniforms.begin(), uniforms.end() - 1, 0.0);       // all accepted
        if (trial == 7) std::fill(uniforms.begin(), uniforms.end() - 1, 0.999999);  // rejections
        if (trial == 9 && k > 0) drafted[0] = static_cast<std::int32_t>(vocab);     // impossible id
        const Verdict expected = cpu_accept(p, q, k, vocab, drafted, uniforms);
        const Verdict actual = gpu_accept(p, q, k, vocab, drafted, uniforms);
        EXPECT_EQ(actual.accepted, expected.accepted);
        EXPECT_EQ(actual.next, expected.next);
      }
    }
  }
}

TEST(CudaSpeculativeAccept, EmptyResidualFallsBackToTheTarget) {
  SELFSPEC_REQUIRE_GPU();
  // p == q with zero probability at the drafted id: rejected (0 < 0 fails), no residual mass,
  // so the token is drawn from p at uniforms[k].
  const std::int64_t vocab = 6;
  const std::vector<float> row = {0.1f, 0.0f, 0.2f, 0.3f, 0.15f, 0.25f};
  std::vector<float> p = row;
  p.insert(p.end(), row.begin(), row.end());
  const std::vector<float> q = row;
  const std::vector<std::int32_t> drafted = {1};
  for (const double u : {0.0, 0.05, 0.35, 0.61, 0.99}) {
    SCOPED_TRACE(::testing::Message() << "u " << u);
    const std::vector<double> uniforms = {0.5, u};
    const Verdict expected = cpu_accept(p, q, 1, vocab, drafted, uniforms);
    const Verdict actual = gpu_accept(p, q, 1, vocab, drafted, uniforms);
    EXPECT_EQ(expected.accepted, 0);
    EXPECT_EQ(actual.accepted, expected.accepted);
    EXPECT_EQ(actual.next, expected.next);
  }
}

}  // namespace
}  // namespace selfspec::kernels::cuda::test
