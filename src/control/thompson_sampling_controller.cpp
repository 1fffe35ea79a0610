// Beta–Thompson-sampling draft control — EESD (Liu et al., 2024) §3.3, eqs. 2–4, and App. A,
// Alg. 2. The probability θ that drafting should go on is unknown; its posterior is
// Beta(θ; α, β) (eq. 2), starting at the prior Beta(α0, β0).
//
// Drafting (Alg. 2 lines 6–12): after each drafted token, sample θ ~ Beta(α, β), then
// χ ~ Bernoulli(θ), and draft another iff χ = 1. The caller stops anyway at K = max_draft; at the
// cap no draw is made (the engine is not advanced). Per decision P(χ = 1) = E[θ] = α / (α + β).
//
// Update (Alg. 2 lines 15–21; eqs. 3–4): r = |Q_v| − 1, n = min(|Q_v| + 1, |Q_d|), α += r,
// β += n − r. Our reading of the sets: Q_d holds the round's `drafted` tokens, and Q_v is what
// the verification adds to the output (line 17 advances t by |Q_v|): the `accepted` drafts plus
// the target's own token — the correction, or the bonus token when every draft was accepted. So
//   |Q_v| = accepted + 1,   r = accepted,   n = min(accepted + 2, drafted),
// and α never decreases. (Reading Q_v as the accepted drafts alone would give r = −1 for a round
// with nothing accepted — not a count.) In §3.3's words, r counts the drafted tokens for which
// going on was right (χ = 1), n the tokens "validated by the target model".
//
// Worked example, drafted = 5:
//   accepted 2 (third draft rejected): |Q_v| = 3, r = 2, n = min(4, 5) = 4 -> α += 2, β += 2
//   accepted 5 (all):                  |Q_v| = 6, r = 5, n = min(7, 5) = 5 -> α += 5, β += 0
//   accepted 4 (only the last one):    |Q_v| = 5, r = 4, n = min(6, 5) = 5 -> α += 4, β += 1
//   accepted 0 (first rejected):       |Q_v| = 1, r = 0, n = min(2, 5) = 2 -> α += 0, β += 2
// So n − r is 0 when every draft was accepted (n = drafted = r: correct, no failure was seen),
// 1 when only the last draft was rejected (drafted = accepted + 1), and 2 otherwise — a rejection
// before the last draft counts two failures. Consequence: with independent per-token agreement a
// (and K -> ∞) a round yields E r = a / (1 − aθ) and E(n − r) = (1 − a)(1 + θ) / (1 − aθ), so the
// posterior mean settles at the θ* with θ* = E r / (E r + E(n − r)), i.e.
// (1 − a)θ*² + θ* − a = 0, θ* = (√(1 + 4a(1 − a)) − 1) / (2(1 − a)): 0.702 for a = 0.8, below a
// (counting one failure per rejection would give θ* = a).
#include "control/thompson_sampling_controller.hpp"

#include "control/controller_kind.hpp"

#include "core/error.hpp"

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/beta_distribution.hpp>

#include <algorithm>

namespace selfspec {

ThompsonSamplingController::ThompsonSamplingController(const ControllerOptions& options)
    : max_draft_(options.max_draft),
      alpha_(options.prior_alpha),
      beta_(options.prior_beta),
      rng_(options.seed) {
  options.validate();
}

bool ThompsonSamplingController::continue_drafting(int drafted, double /*confidence*/) {
  SELFSPEC_CHECK(drafted >= 1,
                 "thompson controller: continue_drafting(drafted={}) needs drafted >= 1", drafted);
  if (drafted >= max_draft_) return false;
  double theta = boost::random::beta_distribution<double>(alpha_, beta_)(rng_);
  // Boost draws Beta as X / (X + Y) with X, Y Gamma-distributed; for tiny α and β both can
  // underflow to 0 and the draw is 0/0. Falling back to the posterior mean keeps the law of the
  // decision itself, since P(χ = 1) = E[θ] either way.
  if (!(theta >= 0.0 && theta <= 1.0)) theta = posterior_mean();
  return boost::random::bernoulli_distribution<double>(theta)(rng_);
}

void ThompsonSamplingController::update(int drafted, int accepted) {
  SELFSPEC_CHECK(drafted >= 1 && drafted <= max_draft_ && accepted >= 0 && accepted <= drafted,
                 "thompson controller: update(drafted={}, accepted={}) needs 1 <= drafted <= {} "
                 "and 0 <= accepted <= drafted",
                 drafted, accepted, max_draft_);
  // |Q_v| = the accepted drafts + the target's own token; r = |Q_v| − 1; n = min(|Q_v| + 1, |Q_d|).
  const int verified = accepted + 1;
  const int successes = verified - 1;
  const int trials = std::min(verified + 1, drafted);
  alpha_ += successes;          // eq. 3
  beta_ += trials - successes;  // eq. 4
}

nlohmann::json ThompsonSamplingController::state() const {
  return {{"alpha", alpha_}, {"beta", beta_}, {"posterior_mean", posterior_mean()}};
}

namespace {

class ThompsonKind final : public ControllerKind {
 public:
  std::string_view name() const override { return "thompson"; }
  std::string_view help() const override { return "EESD's Beta-Thompson sampling"; }
  std::vector<SettingSpec> settings() const override {
    const ControllerOptions d;
    return {{.key = "prior-alpha",
             .type = SettingType::kNumber,
             .help = "thompson controller: Beta prior α0",
             .fallback = d.prior_alpha,
             .min = 0.0,
             .min_open = true},
            {.key = "prior-beta",
             .type = SettingType::kNumber,
             .help = "thompson controller: Beta prior β0",
             .fallback = d.prior_beta,
             .min = 0.0,
             .min_open = true}};
  }
  void read(const nlohmann::json& given, ControllerOptions& options) const override {
    options.prior_alpha = given.value("prior-alpha", options.prior_alpha);
    options.prior_beta = given.value("prior-beta", options.prior_beta);
  }
  nlohmann::json write(const ControllerOptions& options) const override {
    return {{"prior-alpha", options.prior_alpha}, {"prior-beta", options.prior_beta}};
  }
  std::unique_ptr<DraftLengthController> make(const ControllerOptions& options) const override {
    return std::make_unique<ThompsonSamplingController>(options);
  }
};

}  // namespace

std::unique_ptr<ControllerKind> make_thompson_controller_kind() {
  return std::make_unique<ThompsonKind>();
}

}  // namespace selfspec
