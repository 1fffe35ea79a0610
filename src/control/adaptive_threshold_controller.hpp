// Adaptive draft-exiting threshold: Draft & Verify §3.4, eqs. 2–4 (defaults from Table 7).
#pragma once

#include "control/draft_length_controller.hpp"

namespace selfspec {

class AdaptiveThresholdController final : public DraftLengthController {
 public:
  // γ starts at options.gamma0; ε, β1, β2 and α from options. Throws selfspec::Error when
  // options.validate() does.
  explicit AdaptiveThresholdController(const ControllerOptions& options);

  std::string_view name() const override { return "adaptive"; }
  int max_draft() const override { return max_draft_; }
  bool continue_drafting(int drafted, double confidence) override;
  void update(int drafted, int accepted) override;
  // {"gamma": γ, "ar": AR, "rounds": e}; "ar" is 0 until the first update (rounds == 0).
  nlohmann::json state() const override;

  // The current threshold γ, in [0, 1].
  double gamma() const { return gamma_; }
  // The smoothed acceptance rate AR of eq. 2 (0 before the first update).
  double acceptance_rate() const { return acceptance_rate_; }
  // The number of updates so far (the paper's e after the last one).
  long rounds() const { return rounds_; }

 private:
  int max_draft_;
  double epsilon_;
  double beta1_;
  double beta2_;
  double target_;  // α
  double gamma_;
  double acceptance_rate_ = 0.0;
  long rounds_ = 0;
};

}  // namespace selfspec
