// Draft & Verify's adaptive draft-exiting threshold (§3.4, eqs. 2–4) against update sequences
// computed by hand, plus its decision rule, its first-round rule (e = 1: β1 = 0) and the clamp
// of γ to [0, 1].
#include "control/adaptive_threshold_controller.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace selfspec {
namespace {

constexpr double kTolerance = 1e-12;

ControllerOptions table7_options() {
  ControllerOptions options;
  options.kind = "adaptive";
  options.max_draft = 12;
  options.gamma0 = 0.6;
  options.epsilon = 0.01;
  options.beta1 = 0.5;
  options.beta2 = 0.9;
  options.target_acceptance = 0.85;
  return options;
}

TEST(AdaptiveThresholdController, StartsAtGamma0) {
  AdaptiveThresholdController controller(table7_options());
  EXPECT_EQ(controller.name(), "adaptive");
  EXPECT_EQ(controller.gamma(), 0.6);
  EXPECT_EQ(controller.rounds(), 0);
  EXPECT_EQ(controller.state(), nlohmann::json({{"gamma", 0.6}, {"ar", 0.0}, {"rounds", 0}}));
}

TEST(AdaptiveThresholdController, HandComputedSequence) {
  // γ0 = 0.6, ε = 0.01, β1 = 0.5, β2 = 0.9, α = 0.85 (Table 7).
  AdaptiveThresholdController controller(table7_options());

  // e = 1, (drafted, accepted) = (4, 4): AR_1 = 1. First round, β1 = 0: AR = 1.
  //   AR = 1 > α -> γ̃ = 0.6 − 0.01 = 0.59; γ = 0.9·0.6 + 0.1·0.59 = 0.54 + 0.059 = 0.599.
  controller.update(4, 4);
  EXPECT_NEAR(controller.acceptance_rate(), 1.0, kTolerance);
  EXPECT_NEAR(controller.gamma(), 0.599, kTolerance);

  // e = 2, (5, 2): AR_2 = 0.4; AR = 0.5·1 + 0.5·0.4 = 0.7.
  //   0.7 <= α -> γ̃ = 0.599 + 0.01 = 0.609; γ = 0.9·0.599 + 0.1·0.609 = 0.5391 + 0.0609 = 0.6.
  controller.update(5, 2);
  EXPECT_NEAR(controller.acceptance_rate(), 0.7, kTolerance);
  EXPECT_NEAR(controller.gamma(), 0.6, kTolerance);

  // e = 3, (3, 3): AR_3 = 1; AR = 0.5·0.7 + 0.5·1 = 0.85 = α — eq. 3's tie, which goes up:
  //   AR <= α -> γ̃ = 0.6 + 0.01 = 0.61; γ = 0.9·0.6 + 0.1·0.61 = 0.54 + 0.061 = 0.601.
  // In IEEE double 0.5·0.7 and 0.5·1 are exact and their sum rounds to the double nearest 0.85,
  // the same double as α, so the tie is exact here (with or without FMA contraction).
  controller.update(3, 3);
  EXPECT_EQ(controller.acceptance_rate(), 0.85);
  EXPECT_NEAR(controller.gamma(), 0.601, kTolerance);

  // e = 4, (2, 0): AR_4 = 0; AR = 0.5·0.85 + 0 = 0.425.
  //   <= α -> γ̃ = 0.611; γ = 0.9·0.601 + 0.1·0.611 = 0.5409 + 0.0611 = 0.602.
  controller.update(2, 0);
  EXPECT_NEAR(controller.acceptance_rate(), 0.425, kTolerance);
  EXPECT_NEAR(controller.gamma(), 0.602, kTolerance);

  // e = 5, (12, 12): AR_5 = 1; AR = 0.5·0.425 + 0.5 = 0.7125 <= α -> γ = 0.602 + 0.001 = 0.603.
  controller.update(12, 12);
  EXPECT_NEAR(controller.acceptance_rate(), 0.7125, kTolerance);
  EXPECT_NEAR(controller.gamma(), 0.603, kTolerance);

  EXPECT_EQ(controller.rounds(), 5);
  const nlohmann::json state = controller.state();
  EXPECT_NEAR(state.at("gamma").get<double>(), 0.603, kTolerance);
  EXPECT_NEAR(state.at("ar").get<double>(), 0.7125, kTolerance);
  EXPECT_EQ(state.at("rounds").get<long>(), 5);
}

TEST(AdaptiveThresholdController, FirstUpdateIgnoresBeta1) {
  ControllerOptions options = table7_options();
  options.beta1 = 0.9;
  AdaptiveThresholdController controller(options);
  // e = 1: AR = AR_1 = 3/10 (not 0.9·0 + 0.1·0.3 = 0.03).
  controller.update(10, 3);
  EXPECT_NEAR(controller.acceptance_rate(), 0.3, kTolerance);
  // e = 2: AR = 0.9·0.3 + 0.1·(6/6) = 0.37.
  controller.update(6, 6);
  EXPECT_NEAR(controller.acceptance_rate(), 0.37, kTolerance);
}

TEST(AdaptiveThresholdController, DecidesWithTheCurrentGamma) {
  AdaptiveThresholdController controller(table7_options());
  EXPECT_TRUE(controller.continue_drafting(1, 0.6));    // at γ
  EXPECT_FALSE(controller.continue_drafting(1, 0.59));  // below
  controller.update(4, 4);                              // γ = 0.599
  EXPECT_TRUE(controller.continue_drafting(1, 0.5995));
  EXPECT_FALSE(controller.continue_drafting(1, 0.5985));
  EXPECT_TRUE(controller.continue_drafting(11, 1.0));
  EXPECT_FALSE(controller.continue_drafting(12, 1.0));  // the cap K
}

TEST(AdaptiveThresholdController, EachUpdateStepsGammaByOneMinusBeta2TimesEpsilon) {
  // Eq. 4 with eq. 3 is γ ± (1 − β2)·ε: with Table 7's values, 0.001 per round.
  AdaptiveThresholdController controller(table7_options());
  const int drafted[] = {3, 7, 1, 12, 5, 2, 9, 4};
  const int accepted[] = {3, 2, 0, 12, 5, 1, 9, 0};
  for (int i = 0; i < 8; ++i) {
    const double before = controller.gamma();
    controller.update(drafted[i], accepted[i]);
    EXPECT_NEAR(std::abs(controller.gamma() - before), 0.001, kTolerance) << i;
  }
}

TEST(AdaptiveThresholdController, GammaIsClampedToTheUnitInterval) {
  ControllerOptions options = table7_options();
  options.gamma0 = 1.0;
  AdaptiveThresholdController high(options);
  // Nothing accepted: AR = 0 <= α, γ would become 1.001, ... — it stays at 1.
  for (int i = 0; i < 100; ++i) high.update(1, 0);
  EXPECT_EQ(high.gamma(), 1.0);
  // Accepted rounds: AR = 0.5, 0.75 (still <= α, γ stays 1), then 0.875 > α: γ = 0.999 at once
  // (unclamped, γ would have been 1.102 and need 103 such rounds to get back below 1).
  high.update(1, 1);
  high.update(1, 1);
  EXPECT_EQ(high.gamma(), 1.0);
  high.update(1, 1);
  EXPECT_NEAR(high.acceptance_rate(), 0.875, kTolerance);
  EXPECT_NEAR(high.gamma(), 0.999, kTolerance);

  options.gamma0 = 0.0;
  AdaptiveThresholdController low(options);
  for (int i = 0; i < 100; ++i) low.update(4, 4);  // AR = 1 > α: γ would go negative
  EXPECT_EQ(low.gamma(), 0.0);
  EXPECT_TRUE(low.continue_drafting(1, 0.0));
  low.update(4, 0);  // AR = 0.5 <= α
  EXPECT_NEAR(low.gamma(), 0.001, kTolerance);
}

TEST(AdaptiveThresholdController, ZeroEpsilonFreezesGamma) {
  ControllerOptions options = table7_options();
  options.epsilon = 0.0;
  AdaptiveThresholdController controller(options);
  controller.update(4, 0);
  controller.update(4, 4);
  EXPECT_EQ(controller.gamma(), 0.6);
}

}  // namespace
}  // namespace selfspec
