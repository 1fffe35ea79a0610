// Fixed draft length: every round drafts exactly K = max_draft tokens — the classic speculative
// decoding baseline (Leviathan et al. / Chen et al.; the K of Draft & Verify Alg. 3 without the
// draft exit).
#pragma once

#include "control/draft_length_controller.hpp"

namespace selfspec {

class FixedLengthController final : public DraftLengthController {
 public:
  // Throws selfspec::Error when options.validate() does.
  explicit FixedLengthController(const ControllerOptions& options);

  std::string_view name() const override { return "fixed"; }
  int max_draft() const override { return max_draft_; }
  bool continue_drafting(int drafted, double confidence) override;
  void update(int drafted, int accepted) override;
  // {"k": K}
  nlohmann::json state() const override;

 private:
  int max_draft_;
};

}  // namespace selfspec
