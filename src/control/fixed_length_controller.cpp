// Fixed draft length K (the speculative decoding baseline; Draft & Verify Alg. 3 with the draft
// exit of lines 6–7 removed): continue while drafted < K. The confidence is ignored and
// verification results change nothing.
#include "control/fixed_length_controller.hpp"

#include "control/controller_kind.hpp"

#include "core/error.hpp"

namespace selfspec {

FixedLengthController::FixedLengthController(const ControllerOptions& options)
    : max_draft_(options.max_draft) {
  options.validate();
}

bool FixedLengthController::continue_drafting(int drafted, double /*confidence*/) {
  SELFSPEC_CHECK(drafted >= 1, "fixed controller: continue_drafting(drafted={}) needs drafted >= 1",
                 drafted);
  return drafted < max_draft_;
}

void FixedLengthController::update(int drafted, int accepted) {
  SELFSPEC_CHECK(drafted >= 1 && drafted <= max_draft_ && accepted >= 0 && accepted <= drafted,
                 "fixed controller: update(drafted={}, accepted={}) needs 1 <= drafted <= {} and "
                 "0 <= accepted <= drafted",
                 drafted, accepted, max_draft_);
}

nlohmann::json FixedLengthController::state() const {
  return {{"k", max_draft_}};
}

namespace {

class FixedKind final : public ControllerKind {
 public:
  std::string_view name() const override { return "fixed"; }
  std::string_view help() const override { return "always K tokens"; }
  void read(const nlohmann::json& /*given*/, ControllerOptions& /*options*/) const override {}
  nlohmann::json write(const ControllerOptions& /*options*/) const override {
    return nlohmann::json::object();
  }
  std::unique_ptr<DraftLengthController> make(const ControllerOptions& options) const override {
    return std::make_unique<FixedLengthController>(options);
  }
};

}  // namespace

std::unique_ptr<ControllerKind> make_fixed_controller_kind() {
  return std::make_unique<FixedKind>();
}

}  // namespace selfspec
