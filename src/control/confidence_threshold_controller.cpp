// Static confidence threshold — Draft & Verify §3.4, first paragraph, and Alg. 3 lines 5–7 with a
// constant γ: after drafting a token whose draft probability max p(x | z*, x_1..x_j) is below γ,
// drafting stops.
//
// Reading of Alg. 3: line 5 drafts x_{j+1} first, line 6 then tests its confidence and line 7
// breaks — so the low-confidence token itself was drafted and goes to verification with the
// others. Here the caller keeps that token; the controller only answers whether to draft another:
// continue iff confidence >= γ (and drafted < K).
#include "control/confidence_threshold_controller.hpp"

#include "control/controller_kind.hpp"

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

namespace {

class ThresholdKind final : public ControllerKind {
 public:
  std::string_view name() const override { return "threshold"; }
  std::string_view help() const override { return "stop below a draft confidence"; }
  std::vector<SettingSpec> settings() const override {
    return {{.key = "threshold",
             .type = SettingType::kNumber,
             .help = "threshold controller: stop drafting below this draft confidence",
             .fallback = ControllerOptions{}.threshold,
             .min = 0.0,
             .max = 1.0}};
  }
  void read(const nlohmann::json& given, ControllerOptions& options) const override {
    options.threshold = given.value("threshold", options.threshold);
  }
  nlohmann::json write(const ControllerOptions& options) const override {
    return {{"threshold", options.threshold}};
  }
  std::unique_ptr<DraftLengthController> make(const ControllerOptions& options) const override {
    return std::make_unique<ConfidenceThresholdController>(options);
  }
};

}  // namespace

std::unique_ptr<ControllerKind> make_threshold_controller_kind() {
  return std::make_unique<ThresholdKind>();
}

}  // namespace selfspec
