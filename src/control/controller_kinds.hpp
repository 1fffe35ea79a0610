// The registry of draft-length controller kinds (control/controller_kind.hpp): every --controller
// there is. builtin_controller_kinds() lists the product's kinds in one place
// (controller_kinds.cpp); a test may add its own to a ControllerKinds.
#pragma once

#include "control/controller_kind.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

class ControllerKinds {
 public:
  void add(std::unique_ptr<ControllerKind> kind);
  // The --controller choices, in registry order.
  std::vector<std::string> names() const;
  // --controller's help: each kind's name and help.
  std::string help() const;
  // The kind named `name`; throws selfspec::Error listing the known ones otherwise.
  const ControllerKind& find(std::string_view name) const;
  // The kind whose settings include `key`, or nullptr.
  const ControllerKind* owner_of(std::string_view key) const;
  // Every kind's settings, in registry order (a key shared by two kinds once).
  std::vector<SettingSpec> settings() const;
  // The spec of --controller (one of names(); a list with `lists`).
  SettingSpec kind_setting() const;
  // Whether any of the kinds `names` reads Cali-TS's acceptance predictor.
  bool any_needs_predictor(std::span<const std::string> names) const;

 private:
  std::vector<std::unique_ptr<ControllerKind>> kinds_;
};

// The product's controllers: fixed, threshold, adaptive, thompson, cali-ts.
const ControllerKinds& builtin_controller_kinds();

// The spec of --max-draft, the one draft limit: K in [1, kMaxDraftTokens].
SettingSpec max_draft_setting();

}  // namespace selfspec
