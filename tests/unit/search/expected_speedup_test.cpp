// The expected-speedup objective against hand-computed values of SWIFT eq. 6 and of
// M(α, γ) = (1 − α^(γ+1)) / (1 − α).
#include "search/expected_speedup.hpp"
#include "core/error.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace selfspec {
namespace {

TEST(ExpectedSpeedup, TokensPerRound) {
  EXPECT_DOUBLE_EQ(tokens_per_round(0.0, 5), 1.0);
  EXPECT_DOUBLE_EQ(tokens_per_round(1.0, 5), 6.0);
  EXPECT_NEAR(tokens_per_round(0.5, 2), 1.75, 1e-12);  // 1 + 0.5 + 0.25
  EXPECT_NEAR(tokens_per_round(0.8, 4), (1 - 0.32768) / 0.2, 1e-12);
  EXPECT_THROW(tokens_per_round(1.1, 2), Error);
  EXPECT_THROW(tokens_per_round(0.5, -1), Error);
}

TEST(ExpectedSpeedup, Eq6PicksTheBestDraftLength) {
  // α 0.9, c 0.5: γ=1: 1.9/1.5 = 1.2667; γ=2: 2.71/2 = 1.355; γ=3: 3.439/2.5 = 1.3756;
  // γ=4: 4.0951/3 = 1.3650. Best γ = 3.
  const SpeedupEstimate e = best_expected_speedup_eq6(0.9, 0.5, 8);
  EXPECT_EQ(e.draft_length, 3);
  EXPECT_NEAR(e.tokens_per_round, 3.439, 1e-9);
  EXPECT_NEAR(e.speedup, 3.439 / 2.5, 1e-9);
  // Equals SWIFT's form Mα / ((M − 1)c + α) with α = (M − 1)/γ as accepted per drafted token.
  const double m = e.tokens_per_round, a = (m - 1) / 3;
  EXPECT_NEAR(e.speedup, m * a / ((m - 1) * 0.5 + a), 1e-12);
}

TEST(ExpectedSpeedup, VerificationCostLowersTheEstimate) {
  const std::vector<double> v = {1.0, 1.2, 1.4, 1.6};
  const SpeedupEstimate e = best_expected_speedup(0.9, 0.5, v);
  // γ=1: 1.9/1.7 = 1.1176; γ=2: 2.71/2.4 = 1.1292; γ=3: 3.439/3.1 = 1.1094.
  EXPECT_EQ(e.draft_length, 2);
  EXPECT_NEAR(e.speedup, 2.71 / 2.4, 1e-9);
  EXPECT_THROW(best_expected_speedup(0.9, 0.0, v), Error);
  EXPECT_THROW(best_expected_speedup(0.9, 0.5, std::vector<double>{1.0}), Error);
}

}  // namespace
}  // namespace selfspec
