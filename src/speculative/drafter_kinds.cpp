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
  X(feature_head)                 \
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
  SELFSPEC_CHECK(name != "none" && std::none_of(entries_.begin(), entries_.end(),
                                                [&](const Entry& e) { return e.name == name; }),
                 "drafter kind '{}' is registered twice", name);
  entries_.push_back({std::move(factory), name, std::string(kind->help()), kind->settings()});
}

std::vector<std::string> DrafterKinds::choices() const {
  std::vector<std::string> names{"none"};
  for (const Entry& e : entries_) names.push_back(e.name);
  return names;
}

std::string DrafterKinds::help() const {
  std::string text = "drafting method: none (autoregressive)";
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    text += fmt::format("{} {} ({})", i + 1 == entries_.size() ? " or" : ",", entries_[i].name,
                        entries_[i].help);
  }
  return text;
}

std::unique_ptr<DrafterKind> DrafterKinds::make(std::string_view name) const {
  if (name == "none") return nullptr;
  for (const Entry& e : entries_) {
    if (e.name == name) return e.factory();
  }
  fail("--spec must be one of {} (got '{}')", fmt::join(choices(), ", "), name);
}

std::string DrafterKinds::owner_of(std::string_view key) const {
  for (const Entry& e : entries_) {
    if (find_setting(e.settings, key) != nullptr) return e.name;
  }
  return {};
}

std::vector<SettingSpec> DrafterKinds::settings() const {
  std::vector<SettingSpec> out;
  for (const Entry& e : entries_) out.insert(out.end(), e.settings.begin(), e.settings.end());
  return out;
}

}  // namespace selfspec
