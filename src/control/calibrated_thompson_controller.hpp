// Calibrated Thompson-sampling draft control (Cali-TS): EESD §3.3 (eqs. 5–8) and App. B
// (Alg. 3, eqs. 9–10). The full derivation and our readings are in the .cpp's top comment.
#pragma once

#include "control/acceptance_predictor.hpp"
#include "control/draft_length_controller.hpp"

#include <boost/random/mersenne_twister.hpp>

#include <memory>

namespace selfspec {

class CalibratedThompsonController final : public DraftLengthController {
 public:
  // The posterior of μ, the mean of the per-round acceptance sample, at one θ_M (eq. 9).
  struct Posterior {
    double mean = 0.0;    // μ_{t+i} (eq. 6)
    double stddev = 0.0;  // σ_{t+i} (eq. 7)
  };

  // Needs options.predictor; σ_M is options.sigma_m, or the predictor's held-out error when that
  // is < 0. Throws selfspec::Error when options.validate() does or σ_M is not > 0.
  explicit CalibratedThompsonController(const ControllerOptions& options);

  std::string_view name() const override { return "cali-ts"; }
  int max_draft() const override { return max_draft_; }
  bool uses_hidden_states() const override { return true; }
  void begin_round() override;
  void observe_hidden(int drafted, std::span<const float> target_root,
                      std::span<const float> draft_token) override;
  bool continue_drafting(int drafted, double confidence) override;
  void update(int drafted, int accepted) override;
  // {"n", "theta_hat", "observations", "theta_m", "mu", "sigma", "sigma_m", "sigma_s"}
  nlohmann::json state() const override;

  Posterior posterior(double theta_m) const;
  double theta_hat() const { return theta_hat_; }
  std::int64_t verifications() const { return n_; }

 private:
  int max_draft_;
  std::shared_ptr<const AcceptancePredictor> predictor_;
  double sigma_m_;
  double sigma_s_;
  std::int64_t n_ = 0;             // verifications so far (n of eqs. 6–7)
  double theta_hat_;               // θ̂_t (eq. 10, as read in the .cpp)
  std::int64_t observations_ = 0;  // χ observations behind θ̂_t
  int observed_step_ = 0;          // the draft step θ_M was last computed for (0: none)
  double theta_m_ = 0.0;           // θ_M of that step
  Posterior last_{};               // the posterior of the last decision
  boost::random::mt19937_64 rng_;
};

}  // namespace selfspec
