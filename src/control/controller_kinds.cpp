#include "control/controller_kinds.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace selfspec {

// The registry: one line per controller kind, in --controller's order. Each controller's file
// defines make_<name>_controller_kind().
#define SELFSPEC_CONTROLLER_KINDS(X) \
  X(fixed)                           \
  X(threshold)                       \
  X(adaptive)                        \
  X(thompson)                        \
  X(cali_ts)

#define SELFSPEC_DECLARE_KIND(name) std::unique_ptr<ControllerKind> make_##name##_controller_kind();
SELFSPEC_CONTROLLER_KINDS(SELFSPEC_DECLARE_KIND)
#undef SELFSPEC_DECLARE_KIND

const ControllerKinds& builtin_controller_kinds() {
  static const ControllerKinds kinds = [] {
    ControllerKinds made;
#define SELFSPEC_ADD_KIND(name) made.add(make_##name##_controller_kind());
    SELFSPEC_CONTROLLER_KINDS(SELFSPEC_ADD_KIND)
#undef SELFSPEC_ADD_KIND
    return made;
  }();
  return kinds;
}

#undef SELFSPEC_CONTROLLER_KINDS

SettingSpec max_draft_setting() {
  SettingSpec spec{"max-draft", SettingType::kInt, "most tokens drafted per round (K)"};
  spec.fallback = ControllerOptions{}.max_draft;
  spec.min = 1;
  spec.max = kMaxDraftTokens;
  return spec;
}

void ControllerKinds::add(std::unique_ptr<ControllerKind> kind) {
  SELFSPEC_CHECK(kind != nullptr, "a controller kind is null");
  const auto names_it = names();
  SELFSPEC_CHECK(std::find(names_it.begin(), names_it.end(), kind->name()) == names_it.end(),
                 "controller kind '{}' is registered twice", kind->name());
  kinds_.push_back(std::move(kind));
}

std::vector<std::string> ControllerKinds::names() const {
  std::vector<std::string> out;
  for (const auto& kind : kinds_) out.emplace_back(kind->name());
  return out;
}

std::string ControllerKinds::help() const {
  std::string text = "draft-length controller:";
  for (std::size_t i = 0; i < kinds_.size(); ++i) {
    text += fmt::format("{} {} ({})", i == 0 ? "" : ",", kinds_[i]->name(), kinds_[i]->help());
  }
  return text;
}

const ControllerKind& ControllerKinds::find(std::string_view name) const {
  for (const auto& kind : kinds_) {
    if (kind->name() == name) return *kind;
  }
  fail("--controller must be one of {} (got '{}')", fmt::join(names(), ", "), name);
}

const ControllerKind* ControllerKinds::owner_of(std::string_view key) const {
  for (const auto& kind : kinds_) {
    const std::vector<SettingSpec> specs = kind->settings();
    if (find_setting(specs, key) != nullptr) return kind.get();
  }
  return nullptr;
}

std::vector<SettingSpec> ControllerKinds::settings() const {
  std::vector<SettingSpec> out;
  for (const auto& kind : kinds_) {
    for (SettingSpec& spec : kind->settings()) {
      if (find_setting(out, spec.key) == nullptr) out.push_back(std::move(spec));
    }
  }
  return out;
}

bool ControllerKinds::any_needs_predictor(std::span<const std::string> names) const {
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& name) { return find(name).needs_predictor(); });
}

SettingSpec ControllerKinds::kind_setting() const {
  SettingSpec spec{"controller", SettingType::kChoice, help()};
  spec.fallback = ControllerOptions{}.kind;
  spec.choices = names();
  spec.list = true;
  return spec;
}

}  // namespace selfspec
