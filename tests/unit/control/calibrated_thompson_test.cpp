// EESD's calibrated Thompson sampling (§3.3, eqs. 5–10; App. B, Alg. 3): the prediction head of
// eq. 5 against a direct evaluation, the posterior (eqs. 6–7) and θ̂ updates against
// hand-computed values, the decision law P(continue) = E[clamp(N(μ, σ²), 0, 1)], determinism per
// seed, and the errors.
#include "control/acceptance_predictor.hpp"
#include "control/calibrated_thompson_controller.hpp"
#include "core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/math/distributions/normal.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace selfspec {
namespace {

using ::testing::HasSubstr;

// Two-sided standard-normal quantile for a false-alarm rate of 1e-6.
constexpr double kZ1e6 = 4.8916;

AcceptancePredictorWeights random_weights(std::int64_t d, int steps, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0F, 0.3F);
  AcceptancePredictorWeights w;
  w.hidden_size = d;
  w.steps = steps;
  w.step_transforms.resize(static_cast<std::size_t>(steps * d * d));
  for (float& v : w.step_transforms) v = normal(rng);
  w.weight.resize(static_cast<std::size_t>(2 * d));
  for (float& v : w.weight) v = normal(rng);
  w.bias = 0.25F;
  w.sigma_m = 0.4;
  return w;
}

// θ_M = sigmoid(w_T · (W^i h_T) + w_D · h_D + b), evaluated as eq. 5 reads (no folding).
double direct_prediction(const AcceptancePredictorWeights& w, int step,
                         const std::vector<float>& target, const std::vector<float>& draft) {
  const auto d = static_cast<std::size_t>(w.hidden_size);
  const std::size_t i = static_cast<std::size_t>(std::min(step, w.steps) - 1);
  double z = w.bias;
  for (std::size_t r = 0; r < d; ++r) {
    double projected = 0.0;
    for (std::size_t c = 0; c < d; ++c) {
      projected += static_cast<double>(w.step_transforms[(i * d + r) * d + c]) * target[c];
    }
    z += w.weight[r] * projected + static_cast<double>(w.weight[d + r]) * draft[r];
  }
  return 1.0 / (1.0 + std::exp(-z));
}

TEST(AcceptancePredictor, FoldedHeadEqualsEquationFive) {
  const std::int64_t d = 7;
  const AcceptancePredictorWeights w = random_weights(d, 3, 11);
  const AcceptancePredictor predictor(w);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  std::vector<float> target(d), draft(d);
  for (int trial = 0; trial < 5; ++trial) {
    for (float& v : target) v = normal(rng);
    for (float& v : draft) v = normal(rng);
    // Steps beyond S use W^S (i = min(i, S)).
    for (const int step : {1, 2, 3, 4, 9}) {
      EXPECT_NEAR(predictor.predict(step, target, draft), direct_prediction(w, step, target, draft),
                  1e-12)
          << "step " << step;
    }
  }
  // A hand value: d = 1, S = 1, W = [2], w = [0.5, -1], b = 0.1; h_T = 3, h_D = 0.4:
  // z = 0.5 · 2 · 3 − 1 · 0.4 + 0.1 = 2.7.
  const AcceptancePredictor tiny({1, 1, {2.0F}, {0.5F, -1.0F}, 0.1F, 0.3});
  EXPECT_NEAR(tiny.predict(1, std::vector<float>{3.0F}, std::vector<float>{0.4F}),
              1.0 / (1.0 + std::exp(-2.7)), 1e-7);
}

TEST(AcceptancePredictor, RefusesWrongSizes) {
  AcceptancePredictorWeights w = random_weights(4, 2, 1);
  w.weight.pop_back();
  EXPECT_THAT([&] { AcceptancePredictor{w}; },
              ::testing::ThrowsMessage<Error>(HasSubstr("7 weights, expected 2 x 4")));
  const AcceptancePredictor ok(random_weights(4, 2, 1));
  EXPECT_THAT([&] { ok.predict(1, std::vector<float>(3), std::vector<float>(4)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("expected 4")));
}

// A predictor that returns exactly θ_M = sigmoid(b) for any input (all weights 0).
std::shared_ptr<const AcceptancePredictor> constant_predictor(double theta_m, double sigma_m) {
  AcceptancePredictorWeights w;
  w.hidden_size = 2;
  w.steps = 1;
  w.step_transforms.assign(4, 0.0F);
  w.weight.assign(4, 0.0F);
  w.bias = static_cast<float>(std::log(theta_m / (1.0 - theta_m)));
  w.sigma_m = sigma_m;
  return std::make_shared<const AcceptancePredictor>(w);
}

ControllerOptions cali_options(std::shared_ptr<const AcceptancePredictor> predictor,
                               std::uint64_t seed = 3, int max_draft = 12) {
  ControllerOptions options;
  options.kind = "cali-ts";
  options.max_draft = max_draft;
  options.predictor = std::move(predictor);
  options.sigma_s = 0.25;
  options.theta0 = 0.5;
  options.seed = seed;
  return options;
}

const std::vector<float> kHidden = {0.5F, -1.0F};

TEST(CalibratedThompsonController, HandComputedPosteriorAndThetaHat) {
  CalibratedThompsonController controller(cali_options(constant_predictor(0.9, 0.4)));
  EXPECT_EQ(controller.name(), "cali-ts");
  EXPECT_TRUE(controller.uses_hidden_states());
  // n = 0: μ = θ_M, σ = σ_M.
  EXPECT_NEAR(controller.posterior(0.9).mean, 0.9, 1e-12);
  EXPECT_NEAR(controller.posterior(0.9).stddev, 0.4, 1e-12);
  // Round 1: 4 drafted, 2 accepted: r = 2, m = min(4, 4) = 4; θ̂ = (0.5 · 1 + 2) / 5 = 0.5.
  controller.update(4, 2);
  EXPECT_EQ(controller.verifications(), 1);
  EXPECT_NEAR(controller.theta_hat(), 0.5, 1e-12);
  // n = 1: μ = (0.0625 · 0.9 + 0.16 · 0.5) / 0.2225, σ² = 0.16 · 0.0625 / 0.2225.
  EXPECT_NEAR(controller.posterior(0.9).mean, 0.13625 / 0.2225, 1e-12);
  EXPECT_NEAR(controller.posterior(0.9).stddev, std::sqrt(0.01 / 0.2225), 1e-12);
  // Round 2: 6 drafted, all accepted: r = 6, m = min(8, 6) = 6; θ̂ = (0.5 · 5 + 6) / 11.
  controller.update(6, 6);
  EXPECT_NEAR(controller.theta_hat(), 8.5 / 11.0, 1e-12);
  // Round 3: 3 drafted, none accepted: r = 0, m = min(2, 3) = 2; θ̂ = (8.5 / 11 · 11) / 13.
  controller.update(3, 0);
  EXPECT_NEAR(controller.theta_hat(), 8.5 / 13.0, 1e-12);
  // n = 3: μ = (0.0625 · 0.2 + 0.48 · θ̂) / 0.5425, σ² = 0.01 / 0.5425.
  EXPECT_NEAR(controller.posterior(0.2).mean, (0.0625 * 0.2 + 0.48 * 8.5 / 13.0) / 0.5425, 1e-12);
  EXPECT_NEAR(controller.posterior(0.2).stddev, std::sqrt(0.01 / 0.5425), 1e-12);
  const nlohmann::json state = controller.state();
  EXPECT_EQ(state["n"], 3);
  EXPECT_EQ(state["observations"], 12);
}

TEST(CalibratedThompsonController, SigmaMComesFromThePredictorUnlessGiven) {
  EXPECT_EQ(
      CalibratedThompsonController(cali_options(constant_predictor(0.5, 0.3))).state()["sigma_m"],
      0.3);
  ControllerOptions given = cali_options(constant_predictor(0.5, 0.3));
  given.sigma_m = 0.1;
  EXPECT_EQ(CalibratedThompsonController(given).state()["sigma_m"], 0.1);
  EXPECT_THAT([] { CalibratedThompsonController(cali_options(constant_predictor(0.5, 0.0))); },
              ::testing::ThrowsMessage<Error>(HasSubstr("--cali-sigma-m")));
  EXPECT_THAT([] { CalibratedThompsonController(cali_options(nullptr)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("--cali-predictor")));
}

// P(continue) = E[clamp(θ, 0, 1)] for θ ~ N(μ, σ²): with Φ, φ the standard normal's cdf and pdf,
// a = (0 − μ)/σ, b = (1 − μ)/σ: μ(Φ(b) − Φ(a)) + σ(φ(a) − φ(b)) + (1 − Φ(b)).
double expected_continue(double mu, double sigma) {
  const boost::math::normal_distribution<double> unit(0.0, 1.0);
  const double a = -mu / sigma;
  const double b = (1.0 - mu) / sigma;
  return mu * (cdf(unit, b) - cdf(unit, a)) + sigma * (pdf(unit, a) - pdf(unit, b)) +
         (1.0 - cdf(unit, b));
}

TEST(CalibratedThompsonController, DecisionLawIsTheClampedGaussianMean) {
  for (const double theta_m : {0.2, 0.7, 0.95}) {
    CalibratedThompsonController controller(cali_options(constant_predictor(theta_m, 0.4), 17));
    controller.update(5, 3);  // n = 1, θ̂ = (0.5 + 3) / 6
    const CalibratedThompsonController::Posterior post = controller.posterior(theta_m);
    const double p = expected_continue(post.mean, post.stddev);
    const int draws = 40000;
    int continues = 0;
    for (int i = 0; i < draws; ++i) {
      controller.begin_round();
      controller.observe_hidden(1, kHidden, kHidden);
      continues += controller.continue_drafting(1, 0.5) ? 1 : 0;
    }
    const double frequency = static_cast<double>(continues) / draws;
    EXPECT_NEAR(frequency, p, kZ1e6 * std::sqrt(p * (1.0 - p) / draws)) << "θ_M " << theta_m;
  }
}

TEST(CalibratedThompsonController, SameSeedSameDecisionsAndTheCapIsHonoured) {
  const auto run = [](std::uint64_t seed) {
    CalibratedThompsonController controller(cali_options(constant_predictor(0.6, 0.4), seed, 4));
    std::vector<int> lengths;
    for (int round = 0; round < 50; ++round) {
      controller.begin_round();
      int drafted = 1;
      while (true) {
        controller.observe_hidden(drafted, kHidden, kHidden);
        if (!controller.continue_drafting(drafted, 0.5)) break;
        ++drafted;
      }
      EXPECT_LE(drafted, 4);
      lengths.push_back(drafted);
      controller.update(drafted, drafted / 2);
    }
    return lengths;
  };
  EXPECT_EQ(run(9), run(9));
  EXPECT_NE(run(9), run(10));
}

TEST(CalibratedThompsonController, AsksForTheHiddenStatesOfEveryStep) {
  CalibratedThompsonController controller(cali_options(constant_predictor(0.6, 0.4)));
  controller.begin_round();
  EXPECT_THAT([&] { controller.continue_drafting(1, 0.5); },
              ::testing::ThrowsMessage<Error>(HasSubstr("no hidden states for draft step 1")));
  controller.observe_hidden(1, kHidden, kHidden);
  EXPECT_THAT([&] { controller.continue_drafting(2, 0.5); },
              ::testing::ThrowsMessage<Error>(HasSubstr("no hidden states for draft step 2")));
}

}  // namespace
}  // namespace selfspec
