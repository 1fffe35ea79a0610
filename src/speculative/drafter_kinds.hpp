// The registry of drafter kinds (speculative/drafter_kind.hpp): every --spec there is, as
// factories, so that each setup drafts with a fresh instance of its kind. builtin_drafter_kinds()
// lists the product's kinds in one place (drafter_kinds.cpp); a test may add its own.
#pragma once

#include "speculative/drafter_kind.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

class DrafterKinds {
 public:
  using Factory = std::function<std::unique_ptr<DrafterKind>()>;

  void add(Factory factory);
  // The --spec choices: "none", then every kind's name in registry order.
  std::vector<std::string> choices() const;
  // --spec's help: each kind's name and help.
  std::string help() const;
  // A fresh kind named `name`; nullptr for "none". Throws selfspec::Error for an unknown name.
  std::unique_ptr<DrafterKind> make(std::string_view name) const;
  // The name of the kind whose settings include `key`, or empty.
  std::string owner_of(std::string_view key) const;
  // Every kind's settings, in registry order.
  std::vector<SettingSpec> settings() const;

 private:
  // A registered kind: its factory, and what queries read, taken once from one instance.
  struct Entry {
    Factory factory;
    std::string name;
    std::string help;
    std::vector<SettingSpec> settings;
  };
  std::vector<Entry> entries_;
};

// The product's drafter kinds: layer-skip, swift, asd, early-exit, lookup.
DrafterKinds builtin_drafter_kinds();

}  // namespace selfspec
