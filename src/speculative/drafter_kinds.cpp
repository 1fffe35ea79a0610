#include "speculative/drafter_kinds.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace selfspec {

// The registry: one line per drafter kind, in --spec's order. Each kind's file defines
// make_<name>_kind().
#define SELFSPEC_DRAFTER_KINDS(X) \
  X(layer_skip)                   \
  X(swift)                        \
  X(asd)                          \
  X(early_exit)                   \
  X(lookup)

#define SELFSPEC_DECLARE_KIND(name) std::unique_ptr<DrafterKind> make_##name##_kind();
SELFSPEC_DRAFTER_KINDS(SELFSPEC_DECLARE_KIND)
#undef SELFSPEC_DECLARE_KIND

DrafterKinds builtin_drafter_kinds() {
  DrafterKinds kinds;
#define SELFSPEC_ADD_KIND(name) kinds.add(&make_##name##_kind);
  SELFSPEC_DRAFTER_KINDS(SELFSPEC_ADD_KIND)
#undef SELFSPEC_ADD_KIND
  return kinds;
}

#undef SELFSPEC_DRAFTER_KINDS

void DrafterKinds::add(Factory factory) {
  SELFSPEC_CHECK(factory != nullptr, "a drafter kind's factory is empty");
  const std::unique_ptr<DrafterKind> kind = factory();
  SELFSPEC_CHECK(kind != nullptr, "a drafter kind's factory made nothing");
  const std::string name(kind->name());
  SELFSPEC_CHECK(name != "none" && std::find(names_.begin(), names_.end(), name) == names_.end(),
                 "drafter kind '{}' is registered twice", name);
  factories_.push_back(std::move(factory));
  names_.push_back(name);
}

std::vector<std::string> DrafterKinds::choices() const {
  std::vector<std::string> names{"none"};
  names.insert(names.end(), names_.begin(), names_.end());
  return names;
}

std::string DrafterKinds::help() const {
  std::string text = "drafting method: none (autoregressive)";
  for (std::size_t i = 0; i < factories_.size(); ++i) {
    text += fmt::format("{} {} ({})", i + 1 == factories_.size() ? " or" : ",", names_[i],
                        factories_[i]()->help());
  }
  return text;
}

std::unique_ptr<DrafterKind> DrafterKinds::make(std::string_view name) const {
  if (name == "none") return nullptr;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return factories_[i]();
  }
  fail("--spec must be one of {} (got '{}')", fmt::join(choices(), ", "), name);
}

std::string DrafterKinds::owner_of(std::string_view key) const {
  for (std::size_t i = 0; i < factories_.size(); ++i) {
    const std::vector<SettingSpec> specs = factories_[i]()->settings();
    if (find_setting(specs, key) != nullptr) return names_[i];
  }
  return {};
}

std::vector<SettingSpec> DrafterKinds::settings() const {
  std::vector<SettingSpec> out;
  for (const Factory& factory : factories_) {
    for (SettingSpec& spec : factory()->settings()) out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace selfspec
