// Expected speedup of a draft (SWIFT App. B.3 eq. 6): see expected_speedup.hpp.
#include "search/expected_speedup.hpp"

#include "core/error.hpp"

#include <cmath>
#include <vector>

namespace selfspec {

double tokens_per_round(double alpha, int draft_length) {
  SELFSPEC_CHECK(alpha >= 0.0 && alpha <= 1.0, "acceptance {} outside [0, 1]", alpha);
  SELFSPEC_CHECK(draft_length >= 0, "draft length {} is negative", draft_length);
  if (alpha >= 1.0) return static_cast<double>(draft_length + 1);
  return (1.0 - std::pow(alpha, draft_length + 1)) / (1.0 - alpha);
}

SpeedupEstimate best_expected_speedup(double alpha, double draft_cost,
                                      std::span<const double> verify_cost) {
  SELFSPEC_CHECK(draft_cost > 0.0, "draft cost {} must be positive", draft_cost);
  SELFSPEC_CHECK(verify_cost.size() >= 2,
                 "the verification cost table needs entries for 0 and at least 1 draft token");
  SpeedupEstimate best;
  best.speedup = -1.0;
  for (std::size_t g = 1; g < verify_cost.size(); ++g) {
    const int gamma = static_cast<int>(g);
    const double m = tokens_per_round(alpha, gamma);
    const double speedup = m / (gamma * draft_cost + verify_cost[g]);
    if (speedup > best.speedup) best = {gamma, m, speedup};
  }
  return best;
}

SpeedupEstimate best_expected_speedup_eq6(double alpha, double draft_cost, int max_draft) {
  SELFSPEC_CHECK(max_draft >= 1, "max draft {} must be at least 1", max_draft);
  const std::vector<double> ones(static_cast<std::size_t>(max_draft) + 1, 1.0);
  return best_expected_speedup(alpha, draft_cost, ones);
}

}  // namespace selfspec
