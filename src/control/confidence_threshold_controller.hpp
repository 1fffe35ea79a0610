// Static confidence threshold: Draft & Verify §3.4's draft exit with a fixed γ.
#pragma once

#include "control/draft_length_controller.hpp"

namespace selfspec {

class ConfidenceThresholdController final : public DraftLengthController {
 public:
  // γ = options.threshold. Throws selfspec::Error when options.validate() does.
  explicit ConfidenceThresholdController(const ControllerOptions& options);

  std::string_view name() const override { return "threshold"; }
  int max_draft() const override { return max_draft_; }
  bool continue_drafting(int drafted, double confidence) override;
  void update(int drafted, int accepted) override;
  // {"gamma": γ}
  nlohmann::json state() const override;

  double gamma() const { return gamma_; }

 private:
  int max_draft_;
  double gamma_;
};

}  // namespace selfspec
