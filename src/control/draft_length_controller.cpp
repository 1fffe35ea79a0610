// ControllerOptions::validate() and the controller factory. The ranges come from the papers'
// definitions: γ and the target acceptance rate α are probabilities (Draft & Verify §3.4,
// eqs. 2–4), β1 and β2 are smoothing factors whose weight on the new value (1 − β) must stay
// positive, and the Beta prior of EESD's Thompson sampling (§3.3, eq. 2) needs α0, β0 > 0.
#include "control/draft_length_controller.hpp"

#include "control/adaptive_threshold_controller.hpp"
#include "control/calibrated_thompson_controller.hpp"
#include "control/confidence_threshold_controller.hpp"
#include "control/fixed_length_controller.hpp"
#include "control/thompson_sampling_controller.hpp"
#include "core/error.hpp"

#include <cmath>

namespace selfspec {
namespace {

constexpr int kMaxDraftLimit = 64;
constexpr std::string_view kKnownKinds = "fixed, threshold, adaptive, thompson, cali-ts";

// Written so that NaN fails every check.
bool in_closed_unit(double value) {
  return value >= 0.0 && value <= 1.0;
}

void check_kind(const std::string& kind) {
  if (kind != "fixed" && kind != "threshold" && kind != "adaptive" && kind != "thompson" &&
      kind != "cali-ts") {
    fail("--controller must be one of {} (got '{}')", kKnownKinds, kind);
  }
}

}  // namespace

void ControllerOptions::validate() const {
  check_kind(kind);
  if (max_draft < 1 || max_draft > kMaxDraftLimit) {
    fail("--max-draft must be in [1, {}] (got {})", kMaxDraftLimit, max_draft);
  }
  if (!in_closed_unit(threshold)) fail("--threshold must be in [0, 1] (got {})", threshold);
  if (!in_closed_unit(gamma0)) fail("--gamma0 must be in [0, 1] (got {})", gamma0);
  if (!(epsilon >= 0.0 && std::isfinite(epsilon))) {
    fail("--epsilon must be finite and >= 0 (got {})", epsilon);
  }
  if (!(beta1 >= 0.0 && beta1 < 1.0)) fail("--beta1 must be in [0, 1) (got {})", beta1);
  if (!(beta2 >= 0.0 && beta2 < 1.0)) fail("--beta2 must be in [0, 1) (got {})", beta2);
  if (!(target_acceptance > 0.0 && target_acceptance <= 1.0)) {
    fail("--target-acceptance must be in (0, 1] (got {})", target_acceptance);
  }
  if (!(prior_alpha > 0.0 && std::isfinite(prior_alpha))) {
    fail("--prior-alpha must be finite and > 0 (got {})", prior_alpha);
  }
  if (!(prior_beta > 0.0 && std::isfinite(prior_beta))) {
    fail("--prior-beta must be finite and > 0 (got {})", prior_beta);
  }
  if (!(sigma_m < 0.0 || (sigma_m > 0.0 && std::isfinite(sigma_m)))) {
    fail("--cali-sigma-m must be finite and > 0 (got {})", sigma_m);
  }
  if (!(sigma_s > 0.0 && std::isfinite(sigma_s))) {
    fail("--cali-sigma-s must be finite and > 0 (got {})", sigma_s);
  }
  if (!in_closed_unit(theta0)) fail("--cali-theta0 must be in [0, 1] (got {})", theta0);
}

std::unique_ptr<DraftLengthController> make_draft_length_controller(
    const ControllerOptions& options) {
  options.validate();
  if (options.kind == "fixed") return std::make_unique<FixedLengthController>(options);
  if (options.kind == "threshold") return std::make_unique<ConfidenceThresholdController>(options);
  if (options.kind == "adaptive") return std::make_unique<AdaptiveThresholdController>(options);
  if (options.kind == "thompson") return std::make_unique<ThompsonSamplingController>(options);
  if (options.kind == "cali-ts") return std::make_unique<CalibratedThompsonController>(options);
  // Unreachable: validate() has checked the kind.
  fail("--controller must be one of {} (got '{}')", kKnownKinds, options.kind);
}

}  // namespace selfspec
