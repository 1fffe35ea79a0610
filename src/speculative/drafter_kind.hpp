// A drafter kind: one drafting method as a user chooses it (`--spec NAME`, a run config's
// `spec:`, a request's "spec"), in one file: its own settings (key, type, range, default:
// core/setting_spec.hpp), their combination, the files it loads into the model, the Drafter it
// makes, and how reports name and describe it. The kinds are registered in one place
// (speculative/drafter_kinds.cpp); a SpeculativeConfig names one and carries its settings, and
// SpeculativeSetup makes a fresh instance of it for each setup.
//
// The calls, in order (only the kind a config chooses gets them):
//   configure()    its settings as given (each checked against settings() and typed), before any
//                  weight is read: their combination.
//   prepare()      before any weight is read, once the model's configuration is known: checks
//                  against it and reads small files (a skip set).
//   attach()       after Engine::load: loads the kind's files into the model (an exit head).
//   make_drafter() a Drafter for a run (or, for bench, one configuration's runs).
#pragma once

#include "draft/drafter.hpp"
#include "draft/skip_set.hpp"

#include <nlohmann/json.hpp>
#include "core/setting_spec.hpp"

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
  // Its own settings (--skip-config, --asd-alpha, --exit-head, ...).
  virtual std::vector<SettingSpec> settings() const { return {}; }
  // What a refusal says when the kind's settings come with another --spec, e.g.
  // "--asd-alpha/--asd-m/--asd-n need --spec asd".
  virtual std::string foreign_options_message() const = 0;
  // The chosen kind: why it takes no other kind's settings, appended to such a refusal, e.g.
  // " (--spec asd chooses its skip set per prompt)"; empty by default.
  virtual std::string_view declines_others() const { return ""; }
  // Whether the kind drafts with lookup alone and so needs --lookup N.
  virtual bool needs_lookup() const { return false; }
  // The chosen kind, before any weight is read: its settings that were given (the others take
  // their defaults), checked one by one already; the kind keeps them and checks their
  // combination. Throws selfspec::Error naming the setting.
  virtual void configure(const nlohmann::json& given) { (void)given; }
  // The chosen kind, before any weight is read: checks against the model's configuration, and
  // reads what it needs of small files (a skip set, an exit head's header).
  virtual void prepare(const ModelConfig& config) { (void)config; }
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
