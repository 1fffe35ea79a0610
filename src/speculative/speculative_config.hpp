// Self-speculative decoding's settings as one typed value: the drafter kind and its own settings,
// the draft-length controller and its parameters, lookup drafts, the draft's weights and
// vocabulary, token trees (SWIFT §4.2's dynamic verification), how verification reads the logits.
// One function builds it from the settings a user gave, whatever their source: a command line
// (launch/speculative_cli.hpp binds them to options), a run config (whose keys are the same),
// or JSON (a request, a library caller; see examples/). Every value is checked against its
// declaration (core/setting_spec.hpp), and a bad one gets one error naming the field and what it
// allows. to_json() gives settings that build the same value again. SpeculativeSetup
// (speculative_setup.hpp) turns a config into what a run drafts with.
//
//   SpeculativeConfig config = speculative_config({{"spec", "layer-skip"},
//                                                  {"skip-uniform", 0.3},
//                                                  {"controller", "fixed"},
//                                                  {"max-draft", 4}});
#pragma once

#include "control/controller_kinds.hpp"
#include "control/draft_length_controller.hpp"
#include "core/setting_spec.hpp"
#include "speculative/drafter_kinds.hpp"
#include "verify/sharded_logits.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace selfspec {

// The kinds a config may name: drafters (--spec) and draft-length controllers (--controller).
struct SpeculativeKinds {
  DrafterKinds drafters = builtin_drafter_kinds();
  const ControllerKinds* controllers = &builtin_controller_kinds();  // must outlive its users
};

// Lookup drafts (draft/lookup_source.hpp, a source tried before the model's draft): the longest
// recurring suffix of up to max_ngram tokens, down to min_ngram, proposes at most max_draft tokens;
// drafting its round alone, or grafted onto the model's draft (tree), as far as its running
// acceptance reaches min_reach (draft/sourced_drafter.hpp). max_ngram 0: off.
struct LookupConfig {
  int max_ngram = 0;
  int min_ngram = 2;
  int max_draft = 4;
  bool tree = false;
  double min_reach = 0.0;
  bool enabled() const { return max_ngram > 0; }
};

// The draft forwards' LM head over a ranking's first ids (model/draft_vocabulary.hpp).
struct DraftVocabConfig {
  std::string file;                 // a count-vocab file; empty: the kind's own ranking, if any
  std::vector<std::int64_t> sizes;  // V' (bench: several); 0: the full head; empty: not given
};

// Token trees: the widths' text form (draft/tree_widths.hpp) and the most draft nodes a round.
struct TreeConfig {
  std::string widths = "none";
  int max_nodes = 32;
};

struct SpeculativeConfig {
  std::string drafter = "none";  // --spec: none or a kind's name
  // The kind's own settings as given (typed, checked); the rest take the kind's defaults.
  nlohmann::json drafter_settings = nlohmann::json::object();
  // --controller: one kind (bench: several, compared). The parameters of every kind, max_draft
  // included, are in `controller` (whose kind is controllers.front()).
  std::vector<std::string> controllers = {ControllerOptions{}.kind};
  ControllerOptions controller;
  std::string cali_predictor;  // cali-ts's acceptance predictor file
  LookupConfig lookup;
  std::string draft_weights = "none";  // the format of the draft's copy of the weights
  DraftVocabConfig draft_vocab;
  TreeConfig tree;
  std::vector<LogitsMode> logits = {LogitsMode::kLocal};  // bench: several, compared
  bool debug_sync = false;  // check after every control message that all ranks agree

  bool enabled() const { return drafter != "none"; }
  // The draft's weights are a quantized copy (EngineOptions::quantized_draft_weights).
  bool quantized_draft_weights() const;
  // Settings that speculative_config() turns into this value again (keys as on a command line).
  nlohmann::json to_json() const;
};

// Every setting a config reads, with its declaration: the common ones, every drafter kind's and
// every controller kind's, in the order --help lists them.
std::vector<SettingSpec> speculative_settings(const SpeculativeKinds& kinds = {});

// The one way to make a config: from the settings given (a JSON object: keys as on a command line
// without the dashes, or with underscores; values typed, or strings from a command line). `lists`
// lets --controller, --logits and --draft-vocab-size hold several values (bench compares them).
// Throws selfspec::Error naming the field for an unknown key, a bad value or a bad combination.
SpeculativeConfig speculative_config(const nlohmann::json& settings,
                                     SettingSource source = SettingSource::kJson,
                                     const SpeculativeKinds& kinds = {}, bool lists = false);

}  // namespace selfspec
