// EESD §3.3, eq. 5 (see the header): the prediction head with its step matrices folded into
// vectors, u_i = W^iᵀ w_T, accumulated in double.
#include "control/acceptance_predictor.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>

namespace selfspec {

AcceptancePredictor::AcceptancePredictor(const AcceptancePredictorWeights& weights)
    : hidden_size_(weights.hidden_size),
      steps_(weights.steps),
      bias_(weights.bias),
      sigma_m_(weights.sigma_m) {
  const std::int64_t d = hidden_size_;
  SELFSPEC_CHECK(d >= 1 && steps_ >= 1,
                 "acceptance predictor: hidden size {} and steps {} must be >= 1", d, steps_);
  SELFSPEC_CHECK(static_cast<std::int64_t>(weights.step_transforms.size()) == steps_ * d * d,
                 "acceptance predictor: {} step-transform values, expected {} x {} x {}",
                 weights.step_transforms.size(), steps_, d, d);
  SELFSPEC_CHECK(static_cast<std::int64_t>(weights.weight.size()) == 2 * d,
                 "acceptance predictor: {} weights, expected 2 x {}", weights.weight.size(), d);
  SELFSPEC_CHECK(std::isfinite(sigma_m_) && sigma_m_ >= 0.0,
                 "acceptance predictor: sigma_m {} must be finite and >= 0", sigma_m_);
  const auto ud = static_cast<std::size_t>(d);
  folded_.assign(static_cast<std::size_t>(steps_) * ud, 0.0);
  for (int i = 0; i < steps_; ++i) {
    const float* w_i = weights.step_transforms.data() + static_cast<std::size_t>(i) * ud * ud;
    double* u = folded_.data() + static_cast<std::size_t>(i) * ud;
    for (std::size_t r = 0; r < ud; ++r) {
      const double w_r = weights.weight[r];
      for (std::size_t c = 0; c < ud; ++c) u[c] += w_r * w_i[r * ud + c];
    }
  }
  draft_weight_.assign(weights.weight.begin() + d, weights.weight.end());
}

double AcceptancePredictor::predict(int step, std::span<const float> target_root,
                                    std::span<const float> draft_token) const {
  const auto d = static_cast<std::size_t>(hidden_size_);
  SELFSPEC_CHECK(target_root.size() == d && draft_token.size() == d,
                 "acceptance predictor: hidden states of {} and {} values, expected {}",
                 target_root.size(), draft_token.size(), d);
  SELFSPEC_CHECK(step >= 1, "acceptance predictor: step {} must be >= 1", step);
  const std::size_t i = static_cast<std::size_t>(std::min(step, steps_) - 1);
  const double* u = folded_.data() + i * d;
  double z = bias_;
  for (std::size_t c = 0; c < d; ++c) {
    z += u[c] * target_root[c] + draft_weight_[c] * draft_token[c];
  }
  return 1.0 / (1.0 + std::exp(-z));
}

}  // namespace selfspec
