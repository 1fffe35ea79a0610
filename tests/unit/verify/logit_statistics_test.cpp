// The canonical sharded softmax arithmetic: any split of a row into shards gives the same
// argmax, probabilities within rounding of a direct double softmax, and sampling walks that land
// on the token whose cumulative mass covers the target.
#include "backend/logit_statistics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

namespace selfspec {
namespace {

std::vector<float> random_row(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(n);
  for (float& v : row) v = normal(rng);
  return row;
}

RowStats split_stats(const std::vector<float>& row, const std::vector<std::size_t>& cuts,
                     double inv_t) {
  std::vector<ShardStats> shards;
  std::size_t begin = 0;
  for (std::size_t end : cuts) {
    shards.push_back(shard_stats(std::span(row).subspan(begin, end - begin),
                                 static_cast<std::int64_t>(begin), inv_t));
    begin = end;
  }
  return combine_shards(shards);
}

TEST(LogitStatistics, AnySplitGivesTheSameSoftmax) {
  const std::vector<float> row = random_row(1000, 3);
  double max = -INFINITY;
  for (float v : row) max = std::max(max, static_cast<double>(v) * 0.7);
  double z = 0.0;
  for (float v : row) z += std::exp(static_cast<double>(v) * 0.7 - max);
  const auto argmax =
      static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
  for (const auto& cuts : std::vector<std::vector<std::size_t>>{
           {1000}, {500, 1000}, {1, 999, 1000}, {250, 500, 750, 1000}, {333, 334, 1000}}) {
    const RowStats stats = split_stats(row, cuts, 0.7);
    EXPECT_EQ(stats.argmax, argmax);
    EXPECT_NEAR(stats.sum_exp, z, 1e-12 * z);
    double total = 0.0;
    for (float v : row) total += stats.probability(static_cast<double>(v) * 0.7);
    EXPECT_NEAR(total, 1.0, 1e-12);
    EXPECT_NEAR(stats.top_probability(), 1.0 / z, 1e-15);
  }
}

// kArgmax gives kSoftmax's max and argmax and no mass; -inf logits (a pruned draft vocabulary's
// columns) are skipped without changing a bit of the sum.
TEST(LogitStatistics, ArgmaxOnlyStatsAndMinusInfinityColumns) {
  std::vector<float> row = random_row(999, 5);
  for (std::size_t i = 0; i < row.size(); i += 3) row[i] = -INFINITY;
  const ShardStats full = shard_stats(row, 10, 0.9);
  const ShardStats argmax = shard_stats(row, 10, 0.9, RowNeeds::kArgmax);
  EXPECT_EQ(argmax.argmax, full.argmax);
  EXPECT_EQ(argmax.max, full.max);
  EXPECT_EQ(argmax.sum_exp, 0.0);
  double naive = 0.0;  // every column's exponential, -inf ones (exactly 0) included
  for (float v : row) naive += std::exp(static_cast<double>(v) * 0.9 - full.max);
  EXPECT_EQ(full.sum_exp, naive);
}

TEST(LogitStatistics, TiesResolveToTheFirstIdAcrossShards) {
  const std::vector<float> row = {1.0f, 5.0f, 2.0f, 5.0f, 5.0f, 0.0f};
  EXPECT_EQ(split_stats(row, {6}, 1.0).argmax, 1);
  EXPECT_EQ(split_stats(row, {2, 6}, 1.0).argmax, 1);
  EXPECT_EQ(split_stats(row, {1, 3, 6}, 1.0).argmax, 1);
}

TEST(LogitStatistics, WalksLandOnTheCoveringToken) {
  const std::vector<float> row = random_row(64, 5);
  const std::vector<std::size_t> cuts = {20, 41, 64};
  const RowStats stats = split_stats(row, cuts, 1.0);
  // Cumulative probabilities in id order: the draw at u is the first id whose cumulative mass
  // exceeds u.
  std::vector<double> cumulative;
  double running = 0.0;
  for (float v : row) cumulative.push_back(running += stats.probability(v));
  for (double u : {0.0, 0.1, 0.33, 0.5, 0.77, 0.999}) {
    const ShardPick pick = pick_shard(stats.shard_mass, u * stats.sum_exp);
    const std::size_t begin = pick.shard == 0 ? 0 : cuts[static_cast<std::size_t>(pick.shard) - 1];
    const std::size_t end = cuts[static_cast<std::size_t>(pick.shard)];
    const double local_target =
        pick.remainder *
        std::exp(stats.max - stats.shard_max[static_cast<std::size_t>(pick.shard)]);
    const std::int32_t id =
        walk_softmax(std::span(row).subspan(begin, end - begin), static_cast<std::int64_t>(begin),
                     1.0, stats.shard_max[static_cast<std::size_t>(pick.shard)], local_target);
    const auto expected = static_cast<std::int32_t>(
        std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin());
    EXPECT_EQ(id, expected) << "u = " << u;
  }
}

TEST(LogitStatistics, ResidualMassIsTheTotalVariationDistance) {
  const std::vector<float> p_row = random_row(50, 7);
  const std::vector<float> q_row = random_row(50, 8);
  const RowStats p = split_stats(p_row, {50}, 1.0);
  const RowStats q = split_stats(q_row, {50}, 1.0);
  const DensePair pair{p.max, p.sum_exp, q.max, q.sum_exp, 1.0};
  double tv = 0.0;
  for (std::size_t i = 0; i < 50; ++i)
    tv += std::abs(p.probability(p_row[i]) - q.probability(q_row[i]));
  EXPECT_NEAR(residual_mass(p_row, q_row, pair), 0.5 * tv, 1e-12);
  EXPECT_EQ(residual_mass(p_row, p_row, {p.max, p.sum_exp, p.max, p.sum_exp, 1.0}), 0.0);
}

}  // namespace
}  // namespace selfspec
