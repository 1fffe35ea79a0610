// Logit rows of a pruned draft vocabulary (model/draft_vocabulary.hpp): every id outside the kept
// set has logit -inf. Everything that reads such rows must treat those ids as probability 0 and
// never produce NaN — even a vocabulary shard holding no kept id at all (max -inf): the shard
// statistics, their combination, the dense and residual sampling walks, top-k / top-p warping
// and the draft confidence, in both logits modes of a one-rank picker.
#include "backend/logit_statistics.hpp"
#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "draft/draft.hpp"
#include "verify/sampler.hpp"
#include "verify/sharded_logits.hpp"
#include "verify/token_picker.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace selfspec {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Ids [0, 12): kept 2, 5, 6, 9 (logits below); ids 0..3 form shard 0, 4..7 shard 1 and 8..11
// shard 2 where the split matters; the test shard [0, 2) holds no kept id.
std::vector<float> pruned_row() {
  std::vector<float> row(12, kMinusInf);
  row[2] = 1.0f;
  row[5] = 2.5f;
  row[6] = 0.5f;
  row[9] = 2.0f;
  return row;
}

TEST(PrunedLogits, ShardWithoutKeptIdsIsEmptyNotNaN) {
  const std::vector<float> row = pruned_row();
  const ShardStats empty = shard_stats(std::span(row).first(2), 0, 1.3);
  EXPECT_EQ(empty.argmax, -1);
  EXPECT_EQ(empty.max, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(empty.sum_exp, 0.0);

  const std::vector<ShardStats> shards = {empty, shard_stats(std::span(row).subspan(2, 6), 2, 1.3),
                                          shard_stats(std::span(row).subspan(8), 8, 1.3)};
  const RowStats stats = combine_shards(shards);
  EXPECT_EQ(stats.argmax, 5);
  EXPECT_EQ(stats.shard_mass[0], 0.0);
  double z = 0.0;
  for (int id : {2, 5, 6, 9}) z += std::exp(row[static_cast<std::size_t>(id)] * 1.3 - 2.5 * 1.3);
  EXPECT_NEAR(stats.sum_exp, z, 1e-12);
  EXPECT_TRUE(std::isfinite(stats.top_probability()));
  EXPECT_EQ(stats.probability(kMinusInf * 1.3), 0.0);

  // A walk never lands in the empty shard or on a -inf id, whatever the target.
  for (double u : {0.0, 0.3, 0.7, 0.999999, 1.0}) {
    const ShardPick pick = pick_shard(stats.shard_mass, u * stats.sum_exp);
    EXPECT_NE(pick.shard, 0) << u;
    const std::int64_t begin = pick.shard == 1 ? 2 : 8;
    const std::int64_t size = pick.shard == 1 ? 6 : 4;
    const std::int32_t id = walk_softmax(
        std::span(row).subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(size)),
        begin, 1.3, stats.shard_max[static_cast<std::size_t>(pick.shard)],
        pick.remainder *
            std::exp(stats.max - stats.shard_max[static_cast<std::size_t>(pick.shard)]));
    EXPECT_TRUE(id == 2 || id == 5 || id == 6 || id == 9) << u << " gave " << id;
  }
}

TEST(PrunedLogits, ResidualGivesPrunedIdsTheirWholeTargetMass) {
  // p: a full row; q: the pruned row. Outside the kept ids the residual weight is p itself.
  std::vector<float> p(12);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.2f * static_cast<float>(i % 5);
  const std::vector<float> q = pruned_row();
  const RowStats ps = combine_shards(std::vector<ShardStats>{shard_stats(p, 0, 1.0)});
  const RowStats qs = combine_shards(std::vector<ShardStats>{shard_stats(q, 0, 1.0)});
  const DensePair pair{ps.max, ps.sum_exp, qs.max, qs.sum_exp, 1.0};
  double expected = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double pi = ps.probability(p[i]);
    const double qi = q[i] == kMinusInf ? 0.0 : qs.probability(q[i]);
    expected += std::max(0.0, pi - qi);
  }
  const double mass = residual_mass(p, q, pair);
  EXPECT_TRUE(std::isfinite(mass));
  EXPECT_NEAR(mass, expected, 1e-12);
  // The residual over the shard without kept ids [0, 2) is p's mass there.
  EXPECT_NEAR(residual_mass(std::span(p).first(2), std::span(q).first(2), pair),
              ps.probability(p[0]) + ps.probability(p[1]), 1e-12);
  const std::int32_t id = walk_residual(std::span(p).first(2), std::span(q).first(2), 0, pair,
                                        ps.probability(p[0]) * 0.5);
  EXPECT_EQ(id, 0);
}

TEST(PrunedLogits, WarpingLeavesPrunedIdsOut) {
  const std::vector<float> row = pruned_row();
  for (const SamplingParams params :
       {SamplingParams{1.0, 0, 1.0, 0}, SamplingParams{0.7, 2, 1.0, 0},
        SamplingParams{1.0, 8, 1.0, 0}, SamplingParams{1.5, 0, 0.9, 0},
        SamplingParams{1.5, 10, 0.99, 0}}) {
    SCOPED_TRACE(::testing::Message() << "T " << params.temperature << " top-k " << params.top_k
                                      << " top-p " << params.top_p);
    const TokenDistribution dist = warp_logits(row, params);
    ASSERT_FALSE(dist.ids.empty());
    double total = 0.0;
    for (std::size_t i = 0; i < dist.ids.size(); ++i) {
      EXPECT_TRUE(row[static_cast<std::size_t>(dist.ids[i])] != kMinusInf) << dist.ids[i];
      EXPECT_GT(dist.probs[i], 0.0);
      total += dist.probs[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-12);
    EXPECT_EQ(dist.ids.front(), 5);
    // A draw at u within rounding of 1 still gives a kept id.
    EXPECT_NE(row[static_cast<std::size_t>(draw_from(dist, std::nextafter(1.0, 0.0)))], kMinusInf);
  }
  // top-k with fewer kept ids than k: exactly the kept ids, renormalised.
  EXPECT_EQ(warp_logits(row, SamplingParams{1.0, 8, 1.0, 0}).ids.size(), 4u);
  // A shard's top-k candidates never include -inf ids; a shard without kept ids has none.
  EXPECT_TRUE(top_k_candidates(std::span(row).first(2), 0, 3).empty());
  EXPECT_EQ(top_k_candidates(std::span(row).subspan(4, 4), 4, 3),
            (std::vector<std::int32_t>{5, 6}));
  EXPECT_THROW(warp_logits(std::vector<float>(4, kMinusInf), SamplingParams{1.0, 0, 1.0, 0}),
               Error);
}

// A one-rank TokenPicker on a pruned draft row: greedy, dense and sparse drafting give a kept id
// and a finite confidence, and the verification of that draft against a full target row is well
// defined (an accepted count, a next token inside the vocabulary).
TEST(PrunedLogits, PickerDraftsKeptIdsWithFiniteConfidence) {
  LocalComm comm;
  ShardPlan shard;
  shard.vocab = {0, 12};
  shard.vocab_counts = {12};
  const std::vector<float> q = pruned_row();
  std::vector<float> p(2 * 12);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.3f * static_cast<float>((i * 7) % 11);
  for (const LogitsMode mode : {LogitsMode::kGather, LogitsMode::kLocal}) {
    for (const SamplingParams params :
         {SamplingParams{0.0, 0, 1.0, 1}, SamplingParams{1.0, 0, 1.0, 2},
          SamplingParams{1.2, 3, 1.0, 3}, SamplingParams{1.2, 0, 0.8, 4}}) {
      SCOPED_TRACE(::testing::Message() << logits_mode_name(mode) << " T " << params.temperature
                                        << " top-k " << params.top_k << " top-p " << params.top_p);
      TokenPicker picker({.mode = mode, .sampling = params}, comm, shard);
      for (int round = 0; round < 20; ++round) {
        picker.begin_round();
        const DraftChoice choice = picker.draft(q);
        ASSERT_GE(choice.token, 0);
        EXPECT_NE(q[static_cast<std::size_t>(choice.token)], kMinusInf) << choice.token;
        EXPECT_TRUE(std::isfinite(choice.confidence));
        EXPECT_GT(choice.confidence, 0.0);
        EXPECT_LE(choice.confidence, 1.0);
        Draft draft;
        draft.add(choice.token, Draft::kRoot, choice.confidence);
        const Verdict verdict = picker.verify(p, draft);
        EXPECT_LE(verdict.accepted.size(), 1u);
        EXPECT_GE(verdict.next_token, 0);
        EXPECT_LT(verdict.next_token, 12);
      }
    }
  }
}

}  // namespace
}  // namespace selfspec
