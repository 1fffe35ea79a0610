// The registry of drafter kinds (speculative/drafter_kind.hpp): every --spec a command offers.
// builtin_drafter_kinds() lists the product's kinds in one place (drafter_kinds.cpp); a test may
// add its own to a DrafterKinds before a command declares its options.
#pragma once

#include "speculative/drafter_kind.hpp"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

class DrafterKinds {
 public:
  DrafterKinds() = default;
  explicit DrafterKinds(std::vector<std::unique_ptr<DrafterKind>> kinds);

  void add(std::unique_ptr<DrafterKind> kind);
  // The --spec choices: "none", then every kind's name in registry order.
  std::vector<std::string> choices() const;
  // --spec's help: each kind's name and help.
  std::string help() const;
  // Binds every kind's options into `group` and remembers which options are whose.
  void add_options(CLI::App& group, bool lists);
  // The kind of --spec `name`; nullptr for "none". Throws selfspec::Error for an unknown name.
  DrafterKind* find(std::string_view name) const;
  // Refuses the options of every kind but `chosen` (nullptr: --spec none), naming them and the
  // --spec they need, e.g. "--asd-alpha/--asd-m/--asd-n need --spec asd".
  void refuse_foreign_options(const DrafterKind* chosen) const;

 private:
  struct Entry {
    std::unique_ptr<DrafterKind> kind;
    std::vector<const CLI::Option*> options;  // bound by add_options
  };
  std::vector<Entry> entries_;
};

// The product's drafter kinds: layer-skip, swift, asd, early-exit.
DrafterKinds builtin_drafter_kinds();

}  // namespace selfspec
