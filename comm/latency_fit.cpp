// Least-squares fit of the Hockney model t = α + n/β (comm/latency_fit.hpp): the normal
// equations of simple linear regression in n, with the constraints α >= 0 and 1/β >= 0.
#include "comm/latency_fit.hpp"

#include "core/error.hpp"

#include <cmath>
#include <cstddef>

namespace selfspec {

double LatencyFit::time_s(double bytes) const {
  return latency_s + (std::isinf(bandwidth_bytes_per_s) ? 0.0 : bytes / bandwidth_bytes_per_s);
}

LatencyFit fit_latency(std::span<const double> bytes, std::span<const double> seconds) {
  SELFSPEC_CHECK(bytes.size() == seconds.size(), "latency fit: {} sizes but {} times", bytes.size(),
                 seconds.size());
  SELFSPEC_CHECK(!bytes.empty(), "latency fit: no points");
  const auto n = static_cast<double>(bytes.size());
  double sum_b = 0.0, sum_t = 0.0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const double b = bytes[i];
    const double t = seconds[i];
    SELFSPEC_CHECK(std::isfinite(b) && b >= 0.0 && std::isfinite(t) && t >= 0.0,
                   "latency fit: point {} ({} bytes, {} s) is negative or not finite", i, b, t);
    sum_b += b;
    sum_t += t;
  }
  const double mean_b = sum_b / n;
  const double mean_t = sum_t / n;
  // Centred sums (two passes: no cancellation between large n² terms).
  double var_b = 0.0, cov_bt = 0.0, sum_bb = 0.0, sum_bt = 0.0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    var_b += (bytes[i] - mean_b) * (bytes[i] - mean_b);
    cov_bt += (bytes[i] - mean_b) * (seconds[i] - mean_t);
    sum_bb += bytes[i] * bytes[i];
    sum_bt += bytes[i] * seconds[i];
  }
  LatencyFit fit;
  fit.latency_s = mean_t;  // a flat fit unless the points show growth with size
  if (!(var_b > 0.0) || !(cov_bt > 0.0)) return fit;
  double slope = cov_bt / var_b;
  double intercept = mean_t - slope * mean_b;
  if (intercept < 0.0) {  // through the origin: minimise Σ (t - s·n)^2
    intercept = 0.0;
    slope = sum_bt / sum_bb;
  }
  fit.latency_s = intercept;
  fit.bandwidth_bytes_per_s = 1.0 / slope;
  return fit;
}

}  // namespace selfspec
