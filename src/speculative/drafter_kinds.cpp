#include "speculative/drafter_kinds.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

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
#define SELFSPEC_ADD_KIND(name) kinds.add(make_##name##_kind());
  SELFSPEC_DRAFTER_KINDS(SELFSPEC_ADD_KIND)
#undef SELFSPEC_ADD_KIND
  return kinds;
}

#undef SELFSPEC_DRAFTER_KINDS

DrafterKinds::DrafterKinds(std::vector<std::unique_ptr<DrafterKind>> kinds) {
  for (auto& kind : kinds) add(std::move(kind));
}

void DrafterKinds::add(std::unique_ptr<DrafterKind> kind) {
  SELFSPEC_CHECK(kind != nullptr, "a drafter kind is null");
  SELFSPEC_CHECK(kind->name() != "none" &&
                     std::none_of(entries_.begin(), entries_.end(),
                                  [&](const Entry& e) { return e.kind->name() == kind->name(); }),
                 "drafter kind '{}' is registered twice", kind->name());
  entries_.push_back({std::move(kind), {}});
}

std::vector<std::string> DrafterKinds::choices() const {
  std::vector<std::string> names{"none"};
  for (const Entry& e : entries_) names.emplace_back(e.kind->name());
  return names;
}

std::string DrafterKinds::help() const {
  std::string text = "drafting method: none (autoregressive)";
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    text += fmt::format("{} {} ({})", i + 1 == entries_.size() ? " or" : ",",
                        entries_[i].kind->name(), entries_[i].kind->help());
  }
  return text;
}

void DrafterKinds::add_options(CLI::App& group, bool lists) {
  for (Entry& e : entries_) {
    const std::vector<CLI::Option*> before = group.get_options();
    e.kind->add_options(group, lists);
    for (const CLI::Option* option : group.get_options()) {
      if (std::find(before.begin(), before.end(), option) == before.end()) {
        e.options.push_back(option);
      }
    }
  }
}

DrafterKind* DrafterKinds::find(std::string_view name) const {
  if (name == "none") return nullptr;
  for (const Entry& e : entries_) {
    if (e.kind->name() == name) return e.kind.get();
  }
  fail("--spec must be one of {} (got '{}')", fmt::join(choices(), ", "), name);
}

void DrafterKinds::refuse_foreign_options(const DrafterKind* chosen) const {
  for (const Entry& e : entries_) {
    if (e.kind.get() == chosen) continue;
    const bool given = std::any_of(e.options.begin(), e.options.end(),
                                   [](const CLI::Option* o) { return o->count() > 0; });
    SELFSPEC_CHECK(!given, "{}{}", e.kind->foreign_options_message(),
                   chosen != nullptr ? chosen->declines_others() : std::string_view());
  }
}

}  // namespace selfspec
