// A draft-length controller as a user chooses it (`--controller NAME`, a run config's
// `controller:`, a request's "controller"), declared in the controller's own file: its name, its
// settings (key, type, range, default: core/setting_spec.hpp), how they fill ControllerOptions and
// back, and the controller it makes. The kinds are registered in one place
// (control/controller_kinds.cpp); adding a controller is its file and one registry line.
#pragma once

#include "control/draft_length_controller.hpp"
#include "core/setting_spec.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <string_view>
#include <vector>

namespace selfspec {

class ControllerKind {
 public:
  virtual ~ControllerKind() = default;
  // The --controller value.
  virtual std::string_view name() const = 0;
  // What --controller's help says of it.
  virtual std::string_view help() const = 0;
  // Its own settings (max-draft, which every controller has, apart).
  virtual std::vector<SettingSpec> settings() const { return {}; }
  // Settings of this kind that only it reads: given with another controller they are refused
  // (cali-ts's predictor and priors); otherwise they are accepted and unused, as a run config
  // written for one controller may still set another's.
  virtual bool refuses_foreign_settings() const { return false; }
  // Fills `options` from `given`, the kind's own settings that were given, each already checked
  // against settings() and typed. By default they are kept in options.params.
  virtual void read(const nlohmann::json& given, ControllerOptions& options) const {
    options.params = given;
  }
  // The kind's settings as `options` holds them (read()'s inverse), for checks and reports.
  virtual nlohmann::json write(const ControllerOptions& options) const { return options.params; }
  // Cali-TS reads an acceptance predictor over the exit head's hidden states.
  virtual bool needs_predictor() const { return false; }
  virtual std::unique_ptr<DraftLengthController> make(const ControllerOptions& options) const = 0;
};

}  // namespace selfspec
