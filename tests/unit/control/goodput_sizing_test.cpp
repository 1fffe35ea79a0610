// Goodput sizing (control/goodput_sizing.hpp): the cost table's interpolation and extrapolation,
// E(α, k), and the sizer's choices on hand-built costs: full drafts while verification is free,
// none once every row costs its share (compute-bound), drafts for likely sequences only in
// between, its controller's K as the ceiling, and the exploration steps.
#include "control/goodput_sizing.hpp"

#include "core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace selfspec::testing {
namespace {

TEST(ForwardCostTable, InterpolatesBetweenAndExtrapolatesBeyondTheCountsSeen) {
  ForwardCostTable table;
  EXPECT_FALSE(table.known());
  EXPECT_THROW((void)table.seconds(4), Error);
  table.record(4, 2.0);
  EXPECT_TRUE(table.known());
  EXPECT_DOUBLE_EQ(table.seconds(4), 2.0);
  EXPECT_DOUBLE_EQ(table.seconds(2), 2.0) << "below the one count seen: as much";
  EXPECT_DOUBLE_EQ(table.seconds(8), 4.0) << "above it: in proportion";
  table.record(8, 3.0);
  EXPECT_DOUBLE_EQ(table.seconds(6), 2.5);
  EXPECT_DOUBLE_EQ(table.seconds(12), 4.0) << "along the last two";
  EXPECT_DOUBLE_EQ(table.seconds(1), 2.0) << "never below the cheapest pass";
  EXPECT_DOUBLE_EQ(table.seconds(0), 0.0);
  table.record(8, 7.0);  // a moving average: a quarter of the way to the newest
  EXPECT_DOUBLE_EQ(table.seconds(8), 4.0);
  table.record(3, -1.0);  // ignored
  EXPECT_DOUBLE_EQ(table.seconds(3), 2.0);
}

TEST(GoodputSizing, ExpectedRoundTokens) {
  EXPECT_DOUBLE_EQ(expected_round_tokens(0.7, 0), 1.0);
  EXPECT_DOUBLE_EQ(expected_round_tokens(1.0, 5), 6.0);
  EXPECT_DOUBLE_EQ(expected_round_tokens(0.0, 5), 1.0);
  EXPECT_NEAR(expected_round_tokens(0.5, 3), 1.0 + 0.5 + 0.25 + 0.125, 1e-12);
  DraftOutlook outlook{8, 1, 4};
  EXPECT_DOUBLE_EQ(outlook.acceptance(), 9.0 / 11.0);
}

std::vector<DraftOutlook> outlooks(std::vector<double> acceptance, int k) {
  std::vector<DraftOutlook> all;
  for (double a : acceptance) {
    const auto accepted = static_cast<std::int64_t>(a * 100);
    all.push_back({accepted, 100 - accepted, k});
  }
  return all;
}

// Costs of a bandwidth-bound forward: flat up to `knee` rows, then `per_row` more per row; a
// draft forward costs `draft_fraction` of a full one.
struct Costs {
  ForwardCostTable draft, full;
};
Costs costs(double knee, double per_row, double draft_fraction) {
  Costs c;
  for (std::int64_t rows = 1; rows <= 160; ++rows) {
    const double full = 1.0 + per_row * std::max(0.0, static_cast<double>(rows) - knee);
    c.full.record(rows, full);
    c.draft.record(rows, draft_fraction * full);
  }
  return c;
}
GoodputSizer sizer_with(double knee, double per_row, double draft_fraction) {
  GoodputSizer sizer;
  for (std::int64_t rows = 1; rows <= 160; ++rows) {
    const double full = 1.0 + per_row * std::max(0.0, static_cast<double>(rows) - knee);
    sizer.record_pass(false, rows, full);
    sizer.record_pass(true, rows, draft_fraction * full);
  }
  (void)sizer.size(outlooks({0.5}, 1), 0);  // one sized step
  return sizer;
}

TEST(GoodputSizing, UnknownCostsLeaveEveryControllerItsK) {
  GoodputSizer sizer;
  EXPECT_EQ(sizer.size(outlooks({0.2, 0.9}, 5), 0), (std::vector<int>{5, 5}));
}

// The plain step's pass is timed first, whatever the other passes suggest; the next step explores
// (one sequence drafts its K: a pass a few rows longer); then the optimum reads the table.
TEST(GoodputSizing, ThePlainStepIsTimedFirstThenOneSequenceExplores) {
  GoodputSizer sizer;
  sizer.record_pass(false, 500, 2.0);  // a prefill pass: says nothing about 8 or 16 rows
  const auto eight = outlooks({0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6}, 1);
  EXPECT_EQ(sizer.size(eight, 0), std::vector<int>(8, 0)) << "8 rows unmeasured: plain";
  sizer.record_pass(false, 8, 0.063);
  sizer.record_pass(true, 1, 0.02);
  // Full drafts: 16 rows (0.095 s interpolated towards the prefill pass) and a draft pass of 8
  // rows (0.16 s, in proportion to the one seen) for 8 × 1.6 tokens: plain is better, but this
  // step explores.
  const std::vector<int> second = sizer.size(eight, 0);
  EXPECT_EQ(std::accumulate(second.begin(), second.end(), 0), 1) << "one sequence explores";
  sizer.record_pass(false, 9, 0.071);  // its pass: 8 ms for one more row, compute-bound
  EXPECT_EQ(sizer.size(eight, 0), std::vector<int>(8, 0));
}

TEST(GoodputSizing, OnceThePlainStepIsTimedAFreeVerificationDraftsAtOnce) {
  GoodputSizer sizer;
  sizer.record_pass(false, 40, 0.016);  // a prefill pass: flat up to 40 rows (memory-bound)
  const auto two = outlooks({0.7, 0.7}, 3);
  EXPECT_EQ(sizer.size(two, 0), std::vector<int>(2, 0)) << "2 rows unmeasured: plain";
  sizer.record_pass(false, 2, 0.015);
  EXPECT_EQ(sizer.size(two, 0), std::vector<int>(2, 3)) << "8 rows cost as little as 2";
}

TEST(GoodputSizing, WithoutDraftForwardsOnlyVerificationRowsCount) {
  // Lookup drafts: no draft forward ever runs. Flat verification up to 8 rows, then steep.
  GoodputSizer sizer;
  for (std::int64_t rows = 1; rows <= 32; ++rows) {
    sizer.record_pass(false, rows, 1.0 + 0.5 * std::max(0.0, static_cast<double>(rows) - 8.0));
  }
  EXPECT_EQ(sizer.size(outlooks({0.6, 0.6}, 2), 0), (std::vector<int>{2, 2}))
      << "6 rows: still free";
  const std::vector<int> crowded = sizer.size(outlooks({0.6, 0.6, 0.6, 0.6, 0.6, 0.6}, 2), 0);
  // Six sequences fill 6 of the 8 free rows: two draft rows ride free, more would cost half a
  // pass each for 0.6 of a token.
  EXPECT_EQ(std::accumulate(crowded.begin(), crowded.end(), 0), 2);
}

TEST(GoodputSizing, FreeVerificationDraftsToTheControllersK) {
  GoodputSizer sizer = sizer_with(1000, 0.0, 0.1);
  EXPECT_EQ(sizer.size(outlooks({0.8, 0.9, 0.85}, 6), 0), (std::vector<int>{6, 6, 6}));
}

TEST(GoodputSizing, ComputeBoundVerificationDraftsNothing) {
  // Every row costs a full pass's worth: a draft row never pays for itself.
  GoodputSizer sizer = sizer_with(0, 1.0, 0.3);
  EXPECT_EQ(sizer.size(outlooks({0.8, 0.9, 0.6, 0.7}, 6), 0), (std::vector<int>(4, 0)));
}

TEST(GoodputSizing, InBetweenOnlyLikelySequencesDraftAndNotTooFar) {
  GoodputSizer sizer = sizer_with(8, 0.12, 0.3);
  const std::vector<int> drafts = sizer.size(outlooks({0.1, 0.95, 0.9, 0.15}, 8), 2);
  ASSERT_EQ(drafts.size(), 4u);
  EXPECT_EQ(drafts[0], 0);
  EXPECT_EQ(drafts[3], 0);
  EXPECT_GT(drafts[1], 0);
  EXPECT_GT(drafts[2], 0);
  EXPECT_LT(drafts[1], 8) << "verification is not free here";
  // Better than letting every controller draft its K, and than drafting nothing.
  const Costs c = costs(8, 0.12, 0.3);
  const auto seqs = outlooks({0.1, 0.95, 0.9, 0.15}, 8);
  const double chosen = step_goodput(seqs, drafts, 2, c.draft, c.full);
  EXPECT_GT(chosen, step_goodput(seqs, std::vector<int>(4, 8), 2, c.draft, c.full));
  EXPECT_GT(chosen, step_goodput(seqs, std::vector<int>(4, 0), 2, c.draft, c.full));
}

// The steps (counted from the sizer's first sized step) on which exactly one sequence drafts
// its K of 4 while the optimum drafts nothing, over `steps` steps; every such sequence in turn.
std::vector<int> exploration_steps(GoodputSizer& sizer, int steps, std::vector<int>& explored) {
  std::vector<int> at;
  for (int step = 1; step <= steps; ++step) {
    const std::vector<int> drafts = sizer.size(outlooks({0.9, 0.8, 0.7}, 4), 0);
    int drafting = 0;
    for (std::size_t b = 0; b < drafts.size(); ++b) {
      EXPECT_TRUE(drafts[b] == 0 || drafts[b] == 4);
      if (drafts[b] == 4) {
        ++explored[b];
        ++drafting;
      }
    }
    EXPECT_LE(drafting, 1) << "step " << step;
    if (drafting == 1) at.push_back(step);
  }
  return at;
}

TEST(GoodputSizing, ExplorationsBackOffWhileNothingPays) {
  // Compute-bound: the optimum drafts nothing, so the interval doubles from 16 to 128 steps.
  GoodputSizer sizer = sizer_with(0, 1.0, 0.3);  // its first sized step made (an exploration)
  std::vector<int> explored(3, 0);
  const std::vector<int> at = exploration_steps(sizer, 600, explored);
  const int e = GoodputSizer::kExploreEvery;
  EXPECT_EQ(at, (std::vector<int>{e, 3 * e, 7 * e, 15 * e, 23 * e, 31 * e}));
  EXPECT_EQ(GoodputSizer::kExploreMost, 8 * e);
  EXPECT_EQ(explored, (std::vector<int>{2, 2, 2})) << "every sequence in turn";
}

TEST(GoodputSizing, ExplorationsAreEveryExploreEveryStepsAgainOnceDraftingPays) {
  GoodputSizer sizer = sizer_with(0, 1.0, 0.3);
  std::vector<int> explored(3, 0);
  (void)exploration_steps(sizer, 200, explored);  // backed off to 128 steps
  // Verification turns free (a lighter load, say): the optimum drafts, and a step later the
  // interval is kExploreEvery again.
  for (std::int64_t rows = 1; rows <= 160; ++rows) {
    for (int i = 0; i < 40; ++i) {
      sizer.record_pass(false, rows, 1.0);
      sizer.record_pass(true, rows, 0.05);
    }
  }
  EXPECT_EQ(sizer.size(outlooks({0.9, 0.8, 0.7}, 4), 0), (std::vector<int>{4, 4, 4}));
  for (std::int64_t rows = 1; rows <= 160; ++rows) {
    for (int i = 0; i < 40; ++i) {
      sizer.record_pass(false, rows, static_cast<double>(rows));
      sizer.record_pass(true, rows, 0.3 * static_cast<double>(rows));
    }
  }
  const std::vector<int> at = exploration_steps(sizer, 2 * GoodputSizer::kExploreEvery, explored);
  ASSERT_FALSE(at.empty());
  EXPECT_LE(at.front(), GoodputSizer::kExploreEvery);
}

}  // namespace
}  // namespace selfspec::testing
