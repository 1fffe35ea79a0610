// Beta–Thompson-sampling draft control: EESD §3.3 (eqs. 2–4) and App. A, Alg. 2.
#pragma once

#include "control/draft_length_controller.hpp"

#include <boost/random/mersenne_twister.hpp>

namespace selfspec {

class ThompsonSamplingController final : public DraftLengthController {
 public:
  // Posterior starts at the prior Beta(options.prior_alpha, options.prior_beta); the random
  // engine is seeded with options.seed. Throws selfspec::Error when options.validate() does.
  explicit ThompsonSamplingController(const ControllerOptions& options);

  std::string_view name() const override { return "thompson"; }
  int max_draft() const override { return max_draft_; }
  bool continue_drafting(int drafted, double confidence) override;
  void update(int drafted, int accepted) override;
  // {"alpha": α, "beta": β, "posterior_mean": α / (α + β)}
  nlohmann::json state() const override;

  double alpha() const { return alpha_; }
  double beta() const { return beta_; }
  double posterior_mean() const { return alpha_ / (alpha_ + beta_); }

 private:
  int max_draft_;
  double alpha_;
  double beta_;
  boost::random::mt19937_64 rng_;
};

}  // namespace selfspec
