// Adaptive draft-exiting threshold — Draft & Verify (Zhang et al., 2023) §3.4, eqs. 2–4, as used
// in App. L, Alg. 3 (greedy) and Alg. 4 (sampling); defaults from Table 7 (γ0 = 0.6, ε = 0.01,
// β1 = 0.5, β2 = 0.9, α = 0.85).
//
// Drafting (Alg. 3 lines 5–7): continue iff the draft probability of the token just drafted is
// >= γ (and fewer than K were drafted). Alg. 3 drafts x_{j+1} on line 5 and only then tests its
// confidence and breaks, so the token whose confidence fell below γ WAS drafted and is verified
// with the others: the caller keeps it, the controller only says whether to draft another.
//
// After each verification (Alg. 3 lines 14–18), for the e-th round:
//   AR_e = accepted / drafted                (the share of this round's drafts the target kept;
//                                             the target's own correction/bonus token is no draft)
//   AR  ← β1·AR + (1 − β1)·AR_e              (eq. 2; "when e is 1, β1 = 0": AR = AR_1)
//   γ̃   = γ + ε if AR <= α, else γ − ε        (eq. 3)
//   γ   ← β2·γ + (1 − β2)·γ̃                   (eq. 4)
// Note that eq. 4 collapses to γ ← γ ± (1 − β2)·ε: a constant step (0.001 with Table 7's values)
// whose sign is that of α − AR. Such a sign rule settles where P(AR <= α) ≈ 1/2, i.e. it holds the
// MEDIAN of the smoothed AR at α; when many rounds are accepted in full (AR_e = 1) the mean
// per-round AR_e sits below α (tests/unit/control/oracle_simulation_test.cpp measures both).
//
// Clamping (our decision; the paper does not clamp): γ is kept in [0, 1]. Outside that interval
// the decision no longer changes — confidence is a probability, so with γ <= 0 every token passes
// and with γ > 1 none does — and further steps only wind up. E.g. with a drafter whose first token
// is accepted less often than α, an unclamped γ climbs past 1 without bound (every round drafts
// one token, AR stays <= α); once the text gets easier it would then take (γ − 1)/0.001 rounds of
// AR > α before a second token is drafted again. Clamped, every step moves the operating point.
#include "control/adaptive_threshold_controller.hpp"

#include "control/controller_kind.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace selfspec {

AdaptiveThresholdController::AdaptiveThresholdController(const ControllerOptions& options)
    : max_draft_(options.max_draft),
      epsilon_(options.epsilon),
      beta1_(options.beta1),
      beta2_(options.beta2),
      target_(options.target_acceptance),
      gamma_(options.gamma0) {
  options.validate();
}

bool AdaptiveThresholdController::continue_drafting(int drafted, double confidence) {
  SELFSPEC_CHECK(drafted >= 1,
                 "adaptive controller: continue_drafting(drafted={}) needs drafted >= 1", drafted);
  // Alg. 3 line 6 exits on p < γ, so p == γ continues. A NaN confidence stops.
  return drafted < max_draft_ && confidence >= gamma_;
}

void AdaptiveThresholdController::update(int drafted, int accepted) {
  SELFSPEC_CHECK(drafted >= 1 && drafted <= max_draft_ && accepted >= 0 && accepted <= drafted,
                 "adaptive controller: update(drafted={}, accepted={}) needs 1 <= drafted <= {} "
                 "and 0 <= accepted <= drafted",
                 drafted, accepted, max_draft_);
  const double round_rate = static_cast<double>(accepted) / static_cast<double>(drafted);
  const double beta1 = rounds_ == 0 ? 0.0 : beta1_;                           // e = 1: β1 = 0
  acceptance_rate_ = beta1 * acceptance_rate_ + (1.0 - beta1) * round_rate;   // eq. 2
  const double gamma_tilde = acceptance_rate_ <= target_ ? gamma_ + epsilon_  // eq. 3
                                                         : gamma_ - epsilon_;
  gamma_ = std::clamp(beta2_ * gamma_ + (1.0 - beta2_) * gamma_tilde, 0.0, 1.0);  // eq. 4
  ++rounds_;
}

nlohmann::json AdaptiveThresholdController::state() const {
  return {{"gamma", gamma_}, {"ar", acceptance_rate_}, {"rounds", rounds_}};
}

namespace {

class AdaptiveKind final : public ControllerKind {
 public:
  std::string_view name() const override { return "adaptive"; }
  std::string_view help() const override { return "Draft & Verify's adaptive threshold"; }
  std::vector<SettingSpec> settings() const override {
    const ControllerOptions d;
    return {
        {.key = "gamma0",
         .type = SettingType::kNumber,
         .help = "adaptive controller: initial threshold γ0",
         .fallback = d.gamma0,
         .min = 0.0,
         .max = 1.0},
        {.key = "epsilon",
         .type = SettingType::kNumber,
         .help = "adaptive controller: step ε",
         .fallback = d.epsilon,
         .min = 0.0},
        {.key = "beta1",
         .type = SettingType::kNumber,
         .help = "adaptive controller: AR smoothing β1",
         .fallback = d.beta1,
         .min = 0.0,
         .max = 1.0,
         .max_open = true},
        {.key = "beta2",
         .type = SettingType::kNumber,
         .help = "adaptive controller: γ smoothing β2",
         .fallback = d.beta2,
         .min = 0.0,
         .max = 1.0,
         .max_open = true},
        {.key = "target-acceptance",
         .type = SettingType::kNumber,
         .help = "adaptive controller: target acceptance rate α",
         .fallback = d.target_acceptance,
         .min = 0.0,
         .max = 1.0,
         .min_open = true},
    };
  }
  void read(const nlohmann::json& given, ControllerOptions& options) const override {
    options.gamma0 = given.value("gamma0", options.gamma0);
    options.epsilon = given.value("epsilon", options.epsilon);
    options.beta1 = given.value("beta1", options.beta1);
    options.beta2 = given.value("beta2", options.beta2);
    options.target_acceptance = given.value("target-acceptance", options.target_acceptance);
  }
  nlohmann::json write(const ControllerOptions& options) const override {
    return {{"gamma0", options.gamma0},
            {"epsilon", options.epsilon},
            {"beta1", options.beta1},
            {"beta2", options.beta2},
            {"target-acceptance", options.target_acceptance}};
  }
  std::unique_ptr<DraftLengthController> make(const ControllerOptions& options) const override {
    return std::make_unique<AdaptiveThresholdController>(options);
  }
};

}  // namespace

std::unique_ptr<ControllerKind> make_adaptive_controller_kind() {
  return std::make_unique<AdaptiveKind>();
}

}  // namespace selfspec
