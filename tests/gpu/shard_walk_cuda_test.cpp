// The vocab-shard walks of device-side verification (kernels/cuda/shard_walk.cu) against their
// plain reference, backend/logit_statistics.hpp, at several shard shapes: logits_at exactly
// (NaN outside the shard), walk_softmax's and walk_residual's ids equal the sequential CPU
// walks' on random targets (they could differ only within rounding of a boundary), the drawn
// logit exactly, residual_mass to 1e-12 relative; shards without mass give id -1.
#include "backend/logit_statistics.hpp"
#include "cuda_test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

constexpr std::int64_t kShapes[] = {1, 7, 511, 512, 513, 1000, 32003, 151936};

std::vector<float> normal_logits(std::mt19937& rng, std::size_t n, float sigma) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(CudaShardWalk, LogitsAtReadsTheShardsIdsAndNaNElsewhere) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(3);
  for (const std::int64_t vocab : {std::int64_t{7}, std::int64_t{1000}}) {
    const std::int64_t begin = 100;
    const std::int64_t rows = 5;
    const auto logits = normal_logits(rng, static_cast<std::size_t>(rows * vocab), 2.0f);
    const std::vector<std::int32_t> ids = {100, static_cast<std::int32_t>(begin + vocab - 1), 99,
                                           static_cast<std::int32_t>(begin + vocab), 101};
    DeviceBuffer<float> d_logits(logits);
    DeviceBuffer<float> d_out(ids.size());
    logits_at(d_logits.get(), vocab, begin, ids, d_out.get(), nullptr);
    const auto out = d_out.download();
    for (std::size_t r = 0; r < ids.size(); ++r) {
      const std::int64_t local = ids[r] - begin;
      if (local >= 0 && local < vocab) {
        EXPECT_EQ(out[r],
                  logits[static_cast<std::size_t>(static_cast<std::int64_t>(r) * vocab + local)]);
      } else {
        EXPECT_TRUE(std::isnan(out[r])) << r;
      }
    }
  }
}

TEST(CudaShardWalk, SoftmaxWalkLandsOnTheSequentialWalksToken) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (const std::int64_t vocab : kShapes) {
    for (const double inv_temperature : {1.0, 1.0 / 0.6}) {
      SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " inv_t " << inv_temperature);
      const std::int64_t begin = 1234;
      auto logits = normal_logits(rng, static_cast<std::size_t>(vocab), 3.0f);
      if (vocab > 10) logits[3] = std::numeric_limits<float>::quiet_NaN();
      const ShardStats stats = shard_stats(logits, begin, inv_temperature);
      DeviceBuffer<float> d_logits(logits);
      DeviceBuffer<RowStatsRecord> d_stats(1);
      DeviceBuffer<DrawRecord> d_draw(1);
      row_stats(d_logits.get(), 1, vocab, begin, inv_temperature, d_stats.get(), nullptr);
      for (int draw = 0; draw < 25; ++draw) {
        // Targets everywhere, the ends included.
        const double u = draw == 0 ? 0.0 : draw == 1 ? 1.0 - 1e-12 : uniform(rng);
        const double target = u * stats.sum_exp;
        walk_softmax(d_logits.get(), vocab, begin, inv_temperature, d_stats.get(), target,
                     d_draw.get(), nullptr);
        const DrawRecord got = d_draw.download()[0];
        const std::int32_t want =
            ::selfspec::walk_softmax(logits, begin, inv_temperature, stats.max, target);
        ASSERT_EQ(got.id, want) << "u " << u;
        EXPECT_EQ(got.logit, logits[static_cast<std::size_t>(want - begin)]);
      }
    }
  }
}

TEST(CudaShardWalk, AShardWithoutMassDrawsNothing) {
  SELFSPEC_REQUIRE_GPU();
  const std::vector<float> logits(600, -std::numeric_limits<float>::infinity());
  DeviceBuffer<float> d_logits(logits);
  DeviceBuffer<RowStatsRecord> d_stats(1);
  DeviceBuffer<DrawRecord> d_draw(1);
  row_stats(d_logits.get(), 1, 600, 0, 1.0, d_stats.get(), nullptr);
  walk_softmax(d_logits.get(), 600, 0, 1.0, d_stats.get(), 0.5, d_draw.get(), nullptr);
  EXPECT_EQ(d_draw.download()[0].id, -1);
}

TEST(CudaShardWalk, ResidualMassAndWalkMatchTheSequentialOnes) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  for (const std::int64_t vocab : kShapes) {
    SCOPED_TRACE(::testing::Message() << "vocab " << vocab);
    const std::int64_t begin = 77;
    const auto p = normal_logits(rng, static_cast<std::size_t>(vocab), 2.0f);
    std::vector<float> q = p;
    for (float& v : q) v += noise(rng);
    const double inv_t = 1.0 / 0.8;
    const ShardStats ps = shard_stats(p, begin, inv_t);
    const ShardStats qs = shard_stats(q, begin, inv_t);
    const DensePair pair{ps.max, ps.sum_exp, qs.max, qs.sum_exp, inv_t};
    const ResidualPair device_pair{ps.max, ps.sum_exp, qs.max, qs.sum_exp, inv_t};
    DeviceBuffer<float> d_p(p);
    DeviceBuffer<float> d_q(q);
    DeviceBuffer<double> d_mass(1);
    DeviceBuffer<DrawRecord> d_draw(1);
    residual_mass(d_p.get(), d_q.get(), vocab, device_pair, d_mass.get(), nullptr);
    const double mass = ::selfspec::residual_mass(p, q, pair);
    const double got = d_mass.download()[0];
    if (mass == 0.0) {
      EXPECT_EQ(got, 0.0);
      continue;  // vocab 1: p == q
    }
    EXPECT_NEAR(got, mass, 1e-12 * mass);
    for (int draw = 0; draw < 25; ++draw) {
      const double target = uniform(rng) * mass;
      walk_residual(d_p.get(), d_q.get(), vocab, begin, device_pair, target, d_draw.get(), nullptr);
      ASSERT_EQ(d_draw.download()[0].id, ::selfspec::walk_residual(p, q, begin, pair, target))
          << "target " << target;
    }
  }
}

}  // namespace
}  // namespace selfspec::kernels::cuda::test
