// ControllerOptions::validate() and the controller factory. The ranges are declared once, by each
// controller's kind (its settings, in the controller's file); they come from the papers'
// definitions: γ and the target acceptance rate α are probabilities (Draft & Verify §3.4,
// eqs. 2–4), β1 and β2 are smoothing factors whose weight on the new value (1 − β) must stay
// positive, and the Beta prior of EESD's Thompson sampling (§3.3, eq. 2) needs α0, β0 > 0.
#include "control/draft_length_controller.hpp"

#include "control/controller_kinds.hpp"
#include "core/error.hpp"

namespace selfspec {

void ControllerOptions::validate() const {
  parse_setting(max_draft_setting(), max_draft, SettingSource::kCommandLine);
  const ControllerKinds& kinds = builtin_controller_kinds();
  for (const std::string& name : kinds.names()) {
    const ControllerKind& registered = kinds.find(name);
    const std::vector<SettingSpec> specs = registered.settings();
    const nlohmann::json written = registered.write(*this);
    for (const auto& [key, value] : written.items()) {
      const SettingSpec* spec = find_setting(specs, key);
      SELFSPEC_CHECK(spec != nullptr, "controller '{}' writes '{}', which it does not declare",
                     name, key);
      parse_setting(*spec, value, SettingSource::kCommandLine);
    }
  }
}

std::unique_ptr<DraftLengthController> make_draft_length_controller(
    const ControllerOptions& options) {
  return make_draft_length_controller(options, builtin_controller_kinds());
}

std::unique_ptr<DraftLengthController> make_draft_length_controller(
    const ControllerOptions& options, const ControllerKinds& kinds) {
  const ControllerKind& kind = kinds.find(options.kind);
  options.validate();
  return kind.make(options);
}

}  // namespace selfspec
