// Calibrated Thompson-sampling draft control — EESD (Liu et al., 2024) §3.3, eqs. 5–8, and
// App. B, Alg. 3, eqs. 9–10.
//
// As in Beta-TS (thompson_sampling_controller.cpp), drafting goes on while χ ~ Bernoulli(θ) is 1.
// Here θ is drawn from a Gaussian whose mean mixes a model prediction with what was observed:
//   * the prediction head (acceptance_predictor.hpp, eq. 5) gives θ_M^{t+i} from the target's
//     hidden state at the round's root and the draft's at the token just drafted;
//   * the per-round sample mean χ̃ is taken as N(μ, σ_S²) (σ_S = σ_χ / √k) and the prior of μ as
//     N(θ_M, σ_M²), σ_M the head's prediction error; the conjugate posterior after n
//     verifications is (eqs. 6, 7, 9)
//        μ_{t+i}  = σ_S² / (nσ_M² + σ_S²) · θ_M^{t+i} + nσ_M² / (nσ_M² + σ_S²) · θ̂_t
//        σ_{t+i}² = σ_M² σ_S² / (σ_S² + nσ_M²)
//     so early on μ follows the head, later the observations;
//   * θ_{t+i} ~ N(μ_{t+i}, σ_{t+i}²), clamped to [0, 1] (a probability), then χ ~ Bernoulli(θ).
// n counts verifications (Alg. 3 line 21). The caller stops at K = max_draft without asking.
//
// θ̂_t (eq. 10, Alg. 3 line 22) as printed, θ̂_t = (θ̂_{t−|Q_v|}(t − |Q_v| + 1) + |Q_v|) / (t + 1)
// with t the generated tokens, tends to 1 whatever is accepted: every verified token counts as a
// success, and a round with nothing accepted still adds the target's own token. We keep its form
// — a running mean with θ̂_0 as one pseudo-observation — over the χ observations that Beta-TS
// counts (App. A, Alg. 2: per round r = accepted successes out of m = min(accepted + 2, drafted)
// observations):
//        θ̂ ← (θ̂ · (T + 1) + r) / (T + m + 1),   T ← T + m        (T: observations so far)
// which is "the observed sample mean of χ" the text of App. B asks for.
//
// Defaults (the paper gives none): σ_M = the head's held-out root-mean-square error (written by
// the trainer), σ_S = 0.25 (σ_χ ≤ 0.5 over k ≈ 4 observations per round), θ̂_0 = 0.5.
//
// Worked example (the unit test's): σ_M = 0.4, σ_S = 0.25, θ̂_0 = 0.5. Round 1: n = 0, so
// μ = θ_M, σ = 0.4. A round drafting 4 tokens with 2 accepted: r = 2, m = 4, θ̂ = (0.5 + 2) / 5
// = 0.5, T = 4; n = 1. With θ_M = 0.9 next: μ = (0.0625 · 0.9 + 0.16 · 0.5) / 0.2225 = 0.61236,
// σ² = 0.01 / 0.2225, σ = 0.21200.
#include "control/calibrated_thompson_controller.hpp"

#include "control/controller_kind.hpp"

#include "core/error.hpp"

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/normal_distribution.hpp>

#include <algorithm>
#include <cmath>

namespace selfspec {

CalibratedThompsonController::CalibratedThompsonController(const ControllerOptions& options)
    : max_draft_(options.max_draft),
      predictor_(options.predictor),
      sigma_m_(options.sigma_m),
      sigma_s_(options.sigma_s),
      theta_hat_(options.theta0),
      rng_(options.seed) {
  options.validate();
  SELFSPEC_CHECK(predictor_ != nullptr,
                 "--controller cali-ts needs an acceptance predictor: --cali-predictor FILE "
                 "(scripts/train_exit_head.py --predictor, on collect-cali-data's output)");
  if (sigma_m_ < 0.0) sigma_m_ = predictor_->sigma_m();
  SELFSPEC_CHECK(sigma_m_ > 0.0 && std::isfinite(sigma_m_),
                 "cali-ts: sigma_M must be > 0 (got {}; the predictor's held-out error is {}): "
                 "pass --cali-sigma-m",
                 sigma_m_, predictor_->sigma_m());
}

void CalibratedThompsonController::begin_round() {
  observed_step_ = 0;
}

void CalibratedThompsonController::observe_hidden(int drafted, std::span<const float> target_root,
                                                  std::span<const float> draft_token) {
  theta_m_ = predictor_->predict(drafted, target_root, draft_token);
  observed_step_ = drafted;
}

CalibratedThompsonController::Posterior CalibratedThompsonController::posterior(
    double theta_m) const {
  const double vm = sigma_m_ * sigma_m_;
  const double vs = sigma_s_ * sigma_s_;
  const double nvm = static_cast<double>(n_) * vm;
  const double mean = (vs * theta_m + nvm * theta_hat_) / (nvm + vs);  // eq. 6
  const double variance = vm * vs / (vs + nvm);                        // eq. 7 / eq. 9
  return {mean, std::sqrt(variance)};
}

bool CalibratedThompsonController::continue_drafting(int drafted, double /*confidence*/) {
  SELFSPEC_CHECK(drafted >= 1,
                 "cali-ts controller: continue_drafting(drafted={}) needs drafted >= 1", drafted);
  SELFSPEC_CHECK(observed_step_ == drafted,
                 "cali-ts controller: no hidden states for draft step {} (last seen: {})", drafted,
                 observed_step_);
  if (drafted >= max_draft_) return false;
  last_ = posterior(theta_m_);
  const double drawn = boost::random::normal_distribution<double>(last_.mean, last_.stddev)(rng_);
  const double theta = std::clamp(drawn, 0.0, 1.0);
  return boost::random::bernoulli_distribution<double>(theta)(rng_);
}

void CalibratedThompsonController::update(int drafted, int accepted) {
  SELFSPEC_CHECK(drafted >= 1 && drafted <= max_draft_ && accepted >= 0 && accepted <= drafted,
                 "cali-ts controller: update(drafted={}, accepted={}) needs 1 <= drafted <= {} "
                 "and 0 <= accepted <= drafted",
                 drafted, accepted, max_draft_);
  const int successes = accepted;                        // r = |Q_v| − 1
  const int observed = std::min(accepted + 2, drafted);  // m = min(|Q_v| + 1, |Q_d|)
  const auto before = static_cast<double>(observations_);
  theta_hat_ = (theta_hat_ * (before + 1.0) + successes) / (before + observed + 1.0);
  observations_ += observed;
  ++n_;
}

nlohmann::json CalibratedThompsonController::state() const {
  return {{"n", n_},
          {"theta_hat", theta_hat_},
          {"observations", observations_},
          {"theta_m", theta_m_},
          {"mu", last_.mean},
          {"sigma", last_.stddev},
          {"sigma_m", sigma_m_},
          {"sigma_s", sigma_s_}};
}

namespace {

class CaliTsKind final : public ControllerKind {
 public:
  std::string_view name() const override { return "cali-ts"; }
  std::string_view help() const override {
    return "EESD's calibrated Thompson sampling, with --cali-predictor";
  }
  std::vector<SettingSpec> settings() const override {
    const ControllerOptions d;
    return {{.key = "cali-predictor",
             .type = SettingType::kFile,
             .help = "cali-ts controller: the acceptance predictor (scripts/train_exit_head.py "
                     "--predictor)"},
            {.key = "cali-sigma-m",
             .type = SettingType::kNumber,
             .help = "cali-ts controller: σ_M, the prediction's error (default: the predictor's "
                     "held-out error)",
             .min = 0.0,
             .min_open = true},
            {.key = "cali-sigma-s",
             .type = SettingType::kNumber,
             .help = "cali-ts controller: σ_S, the per-round acceptance mean's deviation",
             .fallback = d.sigma_s,
             .min = 0.0,
             .min_open = true},
            {.key = "cali-theta0",
             .type = SettingType::kNumber,
             .help = "cali-ts controller: the prior θ̂_0",
             .fallback = d.theta0,
             .min = 0.0,
             .max = 1.0}};
  }
  bool refuses_foreign_settings() const override { return true; }
  bool needs_predictor() const override { return true; }
  void read(const nlohmann::json& given, ControllerOptions& options) const override {
    options.sigma_m = given.value("cali-sigma-m", options.sigma_m);
    options.sigma_s = given.value("cali-sigma-s", options.sigma_s);
    options.theta0 = given.value("cali-theta0", options.theta0);
  }
  nlohmann::json write(const ControllerOptions& options) const override {
    nlohmann::json out = {{"cali-sigma-s", options.sigma_s}, {"cali-theta0", options.theta0}};
    if (options.sigma_m >= 0.0) out["cali-sigma-m"] = options.sigma_m;  // < 0: the predictor's
    return out;
  }
  std::unique_ptr<DraftLengthController> make(const ControllerOptions& options) const override {
    return std::make_unique<CalibratedThompsonController>(options);
  }
};

}  // namespace

std::unique_ptr<ControllerKind> make_cali_ts_controller_kind() {
  return std::make_unique<CaliTsKind>();
}

}  // namespace selfspec
