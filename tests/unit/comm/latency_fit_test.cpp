// The Hockney fit t = α + n/β (comm/latency_fit.hpp): exact recovery from points on the line,
// the physical constraints (α >= 0, β > 0 or a flat fit), and refused inputs.
#include "comm/latency_fit.hpp"
#include "core/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace selfspec {
namespace {

TEST(LatencyFit, RecoversLatencyAndBandwidthFromPointsOnTheLine) {
  const double alpha = 20e-6;
  const double beta = 5e9;
  std::vector<double> bytes = {1024, 16384, 65536, 262144, 1048576};
  std::vector<double> seconds;
  for (double b : bytes) seconds.push_back(alpha + b / beta);
  const LatencyFit fit = fit_latency(bytes, seconds);
  EXPECT_NEAR(fit.latency_s, alpha, 1e-12);
  EXPECT_NEAR(fit.bandwidth_bytes_per_s / beta, 1.0, 1e-9);
  EXPECT_NEAR(fit.time_s(4096), alpha + 4096 / beta, 1e-12);
}

TEST(LatencyFit, IsTheLeastSquaresLineForNoisyPoints) {
  // Hand-computed: x̄ = 2, t̄ = 3; Sxx = 2, Sxt = 2 → slope 1, intercept 1.
  const std::vector<double> bytes = {1, 2, 3};
  const std::vector<double> seconds = {2.5, 2.5, 4.0};
  const LatencyFit fit = fit_latency(bytes, seconds);
  EXPECT_NEAR(1.0 / fit.bandwidth_bytes_per_s, 0.75, 1e-12);
  EXPECT_NEAR(fit.latency_s, 1.5, 1e-12);
}

TEST(LatencyFit, NegativeInterceptRefitsThroughTheOrigin) {
  const std::vector<double> bytes = {10, 20, 30};
  const std::vector<double> seconds = {0.5, 2.0, 3.0};  // free fit: slope 0.125, intercept -0.6
  const LatencyFit fit = fit_latency(bytes, seconds);
  EXPECT_EQ(fit.latency_s, 0.0);
  // Σ n·t / Σ n² = (5 + 40 + 90) / (100 + 400 + 900)
  EXPECT_NEAR(1.0 / fit.bandwidth_bytes_per_s, 135.0 / 1400.0, 1e-12);
}

TEST(LatencyFit, FlatWhenTimeDoesNotGrowWithSizeOrThereIsOneSize) {
  LatencyFit fit = fit_latency(std::vector<double>{100, 200}, std::vector<double>{3e-6, 1e-6});
  EXPECT_TRUE(std::isinf(fit.bandwidth_bytes_per_s));
  EXPECT_NEAR(fit.latency_s, 2e-6, 1e-15);
  EXPECT_NEAR(fit.time_s(1e9), 2e-6, 1e-15);
  fit = fit_latency(std::vector<double>{64}, std::vector<double>{7e-6});
  EXPECT_TRUE(std::isinf(fit.bandwidth_bytes_per_s));
  EXPECT_EQ(fit.latency_s, 7e-6);
}

TEST(LatencyFit, RefusesMismatchedEmptyAndNegativeInput) {
  EXPECT_THROW(fit_latency(std::vector<double>{1, 2}, std::vector<double>{1}), Error);
  EXPECT_THROW(fit_latency(std::vector<double>{}, std::vector<double>{}), Error);
  EXPECT_THROW(fit_latency(std::vector<double>{-1, 2}, std::vector<double>{1, 2}), Error);
  EXPECT_THROW(fit_latency(std::vector<double>{1, 2}, std::vector<double>{1, NAN}), Error);
}

}  // namespace
}  // namespace selfspec
