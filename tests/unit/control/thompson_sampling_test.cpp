// EESD's Beta–Thompson-sampling control (§3.3, eqs. 2–4; App. A, Alg. 2): posterior updates
// against hand-computed (α, β), the decision law P(continue) = α / (α + β), determinism per seed.
#include "control/thompson_sampling_controller.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace selfspec {
namespace {

// Two-sided standard-normal quantile for a false-alarm rate of 1e-6: Φ⁻¹(1 − 5e-7).
constexpr double kZ1e6 = 4.8916;

ControllerOptions thompson_options(double prior_alpha, double prior_beta, std::uint64_t seed,
                                   int max_draft = 12) {
  ControllerOptions options;
  options.kind = "thompson";
  options.max_draft = max_draft;
  options.prior_alpha = prior_alpha;
  options.prior_beta = prior_beta;
  options.seed = seed;
  return options;
}

// Fraction of `draws` decisions at drafted = 1 that say "continue", the posterior held fixed.
double continue_frequency(ThompsonSamplingController& controller, int draws) {
  int continues = 0;
  for (int i = 0; i < draws; ++i) continues += controller.continue_drafting(1, 0.5) ? 1 : 0;
  return static_cast<double>(continues) / draws;
}

TEST(ThompsonSamplingController, StartsAtThePrior) {
  ThompsonSamplingController controller(thompson_options(2.0, 3.0, 7));
  EXPECT_EQ(controller.name(), "thompson");
  EXPECT_EQ(controller.alpha(), 2.0);
  EXPECT_EQ(controller.beta(), 3.0);
  EXPECT_EQ(controller.state(),
            nlohmann::json({{"alpha", 2.0}, {"beta", 3.0}, {"posterior_mean", 0.4}}));
}

struct Step {
  int drafted;
  int accepted;
  double alpha;  // expected after the update
  double beta;
};

TEST(ThompsonSamplingController, HandComputedPosteriorUpdates) {
  // |Q_v| = accepted + 1, r = accepted, n = min(accepted + 2, drafted); α += r, β += n − r.
  const std::vector<Step> steps = {
      // (5, 2), third draft rejected: r = 2, n = min(4, 5) = 4: α = 1 + 2, β = 1 + 2.
      {5, 2, 3.0, 3.0},
      // (5, 5), all accepted: r = 5, n = min(7, 5) = 5, n − r = 0: α = 8, β = 3.
      {5, 5, 8.0, 3.0},
      // (5, 4), only the last rejected: r = 4, n = min(6, 5) = 5, n − r = 1: α = 12, β = 4.
      {5, 4, 12.0, 4.0},
      // (5, 0), none accepted: r = 0, n = min(2, 5) = 2: α = 12, β = 6.
      {5, 0, 12.0, 6.0},
      // (1, 0), the single draft rejected (= last rejected): r = 0, n = min(2, 1) = 1: β = 7.
      {1, 0, 12.0, 7.0},
      // (1, 1): r = 1, n = min(3, 1) = 1, n − r = 0: α = 13, β = 7.
      {1, 1, 13.0, 7.0},
      // (2, 0), none accepted: r = 0, n = min(2, 2) = 2: β = 9.
      {2, 0, 13.0, 9.0},
      // (12, 10), eleventh rejected: r = 10, n = min(12, 12) = 12, n − r = 2: α = 23, β = 11.
      {12, 10, 23.0, 11.0},
      // (3, 1): r = 1, n = min(3, 3) = 3, n − r = 2: α = 24, β = 13.
      {3, 1, 24.0, 13.0},
  };
  ThompsonSamplingController controller(thompson_options(1.0, 1.0, 0));
  for (const Step& step : steps) {
    controller.update(step.drafted, step.accepted);
    EXPECT_EQ(controller.alpha(), step.alpha) << step.drafted << "/" << step.accepted;
    EXPECT_EQ(controller.beta(), step.beta) << step.drafted << "/" << step.accepted;
  }
  EXPECT_DOUBLE_EQ(controller.posterior_mean(), 24.0 / 37.0);
  EXPECT_DOUBLE_EQ(controller.state().at("posterior_mean").get<double>(), 24.0 / 37.0);
}

TEST(ThompsonSamplingController, AlphaAndBetaNeverDecrease) {
  ThompsonSamplingController controller(thompson_options(1.0, 1.0, 0));
  for (int drafted = 1; drafted <= 12; ++drafted) {
    for (int accepted = 0; accepted <= drafted; ++accepted) {
      const double alpha = controller.alpha();
      const double beta = controller.beta();
      controller.update(drafted, accepted);
      EXPECT_EQ(controller.alpha() - alpha, accepted);
      const double failures = controller.beta() - beta;
      const double expected = accepted == drafted ? 0.0 : accepted + 1 == drafted ? 1.0 : 2.0;
      EXPECT_EQ(failures, expected) << drafted << "/" << accepted;
    }
  }
}

TEST(ThompsonSamplingController, ContinueProbabilityIsThePosteriorMean) {
  // Beta(30, 10): P(continue) = E[θ] = 0.75. 200000 decisions with a fixed seed; the binomial
  // tolerance z·sqrt(p(1 − p)/N) = 4.8916·0.000968 = 0.0047 has a false-alarm rate of 1e-6.
  constexpr int kDraws = 200000;
  ThompsonSamplingController controller(thompson_options(30.0, 10.0, 12345, kMaxDraftTokens));
  const double frequency = continue_frequency(controller, kDraws);
  const double tolerance = kZ1e6 * std::sqrt(0.75 * 0.25 / kDraws);
  EXPECT_NEAR(frequency, 0.75, tolerance);
  EXPECT_EQ(controller.alpha(), 30.0);  // deciding does not touch the posterior
  EXPECT_EQ(controller.beta(), 10.0);
}

TEST(ThompsonSamplingController, TinyPriorsStillGiveThePosteriorMean) {
  // Beta(0.001, 0.002) puts almost all mass at θ ≈ 0 or 1; Boost's X/(X + Y) draw then often
  // underflows to 0/0, where the controller uses the posterior mean (1/3): either way
  // P(continue) = 1/3.
  constexpr int kDraws = 100000;
  ThompsonSamplingController controller(thompson_options(0.001, 0.002, 99, kMaxDraftTokens));
  const double frequency = continue_frequency(controller, kDraws);
  const double p = 1.0 / 3.0;
  EXPECT_NEAR(frequency, p, kZ1e6 * std::sqrt(p * (1.0 - p) / kDraws));
}

TEST(ThompsonSamplingController, SameSeedSameDecisions) {
  ThompsonSamplingController first(thompson_options(1.0, 1.0, 2024, kMaxDraftTokens));
  ThompsonSamplingController second(thompson_options(1.0, 1.0, 2024, kMaxDraftTokens));
  ThompsonSamplingController other(thompson_options(1.0, 1.0, 2025, kMaxDraftTokens));
  int differences = 0;
  for (int i = 0; i < 1000; ++i) {
    const int drafted = 1 + i % 10;
    const bool decision = first.continue_drafting(drafted, 0.3);
    EXPECT_EQ(decision, second.continue_drafting(drafted, 0.9));  // confidence is ignored
    differences += decision != other.continue_drafting(drafted, 0.3) ? 1 : 0;
    if (drafted == 10) {
      first.update(10, i % 7);
      second.update(10, i % 7);
      other.update(10, i % 7);
    }
  }
  EXPECT_GT(differences, 0);
}

TEST(ThompsonSamplingController, TheCapStopsWithoutADraw) {
  ThompsonSamplingController asked(thompson_options(1.0, 1.0, 5, 4));
  ThompsonSamplingController not_asked(thompson_options(1.0, 1.0, 5, 4));
  for (int i = 0; i < 200; ++i) {
    EXPECT_FALSE(asked.continue_drafting(4, 1.0));
    EXPECT_FALSE(asked.continue_drafting(5, 1.0));
    EXPECT_EQ(asked.continue_drafting(1 + i % 3, 0.5), not_asked.continue_drafting(1 + i % 3, 0.5));
  }
}

}  // namespace
}  // namespace selfspec
