// The latency-bandwidth (Hockney) model of one collective: t(n) = α + n / β for a message of n
// bytes, α the start-up latency and β the bandwidth (R. W. Hockney, "The communication challenge
// for MPP: Intel Paragon and Meiko CS-2", Parallel Computing 20(3), 1994, §2; the same α + nβ
// cost terms as Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
// Operations in MPICH", IJHPCA 19(1), 2005, §3). Fitted to measured (bytes, seconds) points by
// ordinary least squares on t = α + s·n with s = 1/β.
#pragma once

#include <limits>
#include <span>

namespace selfspec {

struct LatencyFit {
  double latency_s = 0.0;  // α
  // β in bytes per second; infinity when the time does not grow with the size (a flat fit).
  double bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();

  // α + bytes / β.
  double time_s(double bytes) const;
};

// The least-squares fit of t = α + n/β to the points (bytes[i], seconds[i]), constrained to a
// physical model: α >= 0 (refitted through the origin when the free intercept is negative) and
// 1/β >= 0 (a flat fit, α = mean time, when the slope is not positive). One point, or points of a
// single size, give a flat fit. Throws selfspec::Error when the spans differ in length, are
// empty, or hold a negative or non-finite value.
LatencyFit fit_latency(std::span<const double> bytes, std::span<const double> seconds);

}  // namespace selfspec
