// Static confidence threshold — Draft & Verify §3.4, first paragraph, and Alg. 3 lines 5–7 with a
// constant γ: after drafting a token whose draft probability max p(x | z*, x_1..x_j) is below γ,
// drafting stops.
//
// Reading of Alg. 3: line 5 drafts x_{j+1} first, line 6 then tests its confidence and line 7
// breaks — so the low-confidence token itself was drafted and goes to verification with the
// others. Here the caller keeps that token; the controller only answers whether to draft another:
// continue iff confidence >= γ (and drafted < K).
#include "control/confidence_threshold_controller.hpp"

#include "core/error.hpp"

namespace selfspec {

ConfidenceThresholdController::ConfidenceThresholdController(const ControllerOptions& options)
    : max_draft_(options.max_draft), gamma_(options.threshold) {
  options.validate();
}

bool ConfidenceThresholdController::continue_drafting(int drafted, double confidence) {
  SELFSPEC_CHECK(drafted >= 1,
                 "threshold controller: continue_drafting(drafted={}) needs drafted >= 1", drafted);
  // Alg. 3 line 6 stops on p < γ, so p == γ continues. A NaN confidence stops.
  return drafted < max_draft_ && confidence >= gamma_;
}

void ConfidenceThresholdController::update(int drafted, int accepted) {
  SELFSPEC_CHECK(drafted >= 1 && drafted <= max_draft_ && accepted >= 0 && accepted <= drafted,
                 "threshold controller: update(drafted={}, accepted={}) needs 1 <= drafted <= {} "
                 "and 0 <= accepted <= drafted",
                 drafted, accepted, max_draft_);
}

nlohmann::json ConfidenceThresholdController::state() const {
  return {{"gamma", gamma_}};
}

}  // namespace selfspec
