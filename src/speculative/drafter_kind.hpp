// A drafter kind: one drafting method as a user chooses it (`--spec NAME`), in one file: its own
// options, their checks, the files it loads into the model, the Drafter it makes, and how reports
// name and describe it. The kinds are registered in one place (speculative/drafter_kinds.cpp) and
// put together by SpeculativeOptions (the options of a command) and SpeculativeSetup (what one
// run drafts with), which generate, bench, collect-cali-data and search-skips share.
//
// The calls, in the order a command makes them (only the kind chosen with --spec gets the calls
// after add_options):
//   add_options()  when the command is declared: binds the kind's options (--skip-config,
//                  --asd-alpha, --exit-head, ...) into the self-speculative option group.
//   validate()     after parsing, before any weight is read: the options' combination and values.
//   prepare()      before any weight is read, once the model's configuration is known: checks
//                  against it and reads small files (a skip set).
//   attach()       after Engine::load: loads the kind's files into the model (an exit head).
//   make_drafter() a Drafter for a run (or, for bench, one configuration's runs).
#pragma once

#include "draft/drafter.hpp"
#include "draft/skip_set.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

class Engine;
struct ModelConfig;

// A ranking of token ids for the draft forwards' LM head (most frequent first) and where it came
// from, for messages.
struct DraftVocabRanking {
  std::vector<std::int32_t> ids;
  std::string origin;
};

class DrafterKind {
 public:
  virtual ~DrafterKind() = default;
  // The --spec value.
  virtual std::string_view name() const = 0;
  // What --spec's help says of it.
  virtual std::string_view help() const = 0;
  // Binds the kind's options into `group` (lists: bench's comma-separated comparisons).
  virtual void add_options(CLI::App& group, bool lists) = 0;
  // What a refusal says when the kind's options come with another --spec, e.g.
  // "--asd-alpha/--asd-m/--asd-n need --spec asd".
  virtual std::string foreign_options_message() const = 0;
  // The chosen kind: why it takes no other kind's options, appended to such a refusal, e.g.
  // " (--spec asd chooses its skip set per prompt)"; empty by default.
  virtual std::string_view declines_others() const { return ""; }
  // The chosen kind, before any weight is read: the combination and values of its options.
  // Throws selfspec::Error naming the option.
  virtual void validate(const CLI::App& command) const { (void)command; }
  // The chosen kind, before any weight is read: checks against the model's configuration, and
  // reads what it needs of small files (a skip set, an exit head's header).
  virtual void prepare(const CLI::App& command, const ModelConfig& config) {
    (void)command;
    (void)config;
  }
  // The chosen kind, after Engine::load: loads its files into the engine's model.
  virtual void attach(Engine& engine) { (void)engine; }
  // N when the draft forwards exit early after the model's first N layers (Cali-TS's predictor
  // reads the exit head's hidden states), -1 otherwise. Valid after prepare().
  virtual int exit_layer() const { return -1; }
  // A drafter for `num_layers` layers; `sampling_seed` seeds drafters that draw (SWIFT's search).
  virtual std::unique_ptr<Drafter> make_drafter(int num_layers,
                                                std::uint64_t sampling_seed) const = 0;
  // How tables and logs name the drafter: a skip set's name, "swift (r .., window ..)", ...
  virtual std::string label() const = 0;
  // Adds the kind's own fields to a report's "spec" object (its skip set, its parameters).
  virtual void describe(nlohmann::json& spec, int num_layers) const {
    (void)spec;
    (void)num_layers;
  }
  // The one skip set of every prompt (--spec layer-skip), or nullptr when the drafter chooses.
  virtual const SkipSet* skip_set() const { return nullptr; }
  // A ranking of token ids that the kind's own files carry for a pruned draft LM head (a skip
  // set's draft_vocab); empty ids when none.
  virtual DraftVocabRanking draft_vocab_ranking() const { return {}; }
};

}  // namespace selfspec
