// What self-speculative runs draft with, built from a SpeculativeConfig (speculative_config.hpp):
// a fresh instance of the chosen drafter kind prepared against the model (its skip set or exit
// head), the Cali-TS predictor, the pruned draft vocabularies, and the factories of drafters and
// draft-length controllers. generate, bench, collect-cali-data, search-skips and examples/ build
// drafters and controllers here and nowhere else.
//
//   SpeculativeSetup setup(config, engine);             // before any weight is read: every check
//   engine.load();
//   setup.attach(engine);                               // exit head, predictor, vocabularies
//   auto drafter = setup.make_drafter(seed);            // per run (bench: per configuration)
//   auto controller = setup.make_controller(kind, seed);
#pragma once

#include "control/acceptance_predictor.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/generation_options.hpp"
#include "model/draft_vocabulary.hpp"
#include "speculative/speculative_config.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace selfspec {

class Engine;

// The draft-length controller draws from its own random stream: the sampling seed XOR this salt.
inline constexpr std::uint64_t kControllerSeedSalt = 0x7468656d70736f6eull;

class SpeculativeSetup {
 public:
  // Before any weight is read: prepares the chosen kind against the engine's model
  // configuration and chooses the draft vocabularies' ids. With drafter "none", enabled() is
  // false and nothing else may be asked. `kinds` must name the config's kinds.
  SpeculativeSetup(SpeculativeConfig config, const Engine& engine,
                   const SpeculativeKinds& kinds = {});
  SpeculativeSetup(SpeculativeSetup&&) = delete;

  // After Engine::load, before any KV cache is made: loads the kind's files into the model (an
  // exit head), the Cali-TS predictor (checked against the model and the exit head) and the
  // draft vocabularies.
  void attach(Engine& engine);

  bool enabled() const { return kind_ != nullptr; }
  const SpeculativeConfig& config() const { return config_; }
  const DrafterKind& kind() const;

  // A drafter for a run (bench: for one configuration's runs, so that a drafter that learns
  // carries what it learned from prompt to prompt).
  std::unique_ptr<Drafter> make_drafter(std::uint64_t sampling_seed) const;
  // The options of the `kind` controller (one of config().controllers), seeded from
  // the sampling seed (kControllerSeedSalt), with the predictor for cali-ts.
  ControllerOptions controller_options(const std::string& kind, std::uint64_t sampling_seed) const;
  // `max_draft_cap` >= 0 lowers the controller's K to at most that (a server request's own cap).
  std::unique_ptr<DraftLengthController> make_controller(const std::string& kind,
                                                         std::uint64_t sampling_seed,
                                                         int max_draft_cap = -1) const;
  // `generation` with the options of self-speculative runs: trees, --debug-sync and the draft
  // vocabulary `vocabulary` (nullptr: the full head).
  GenerationOptions generation(GenerationOptions generation,
                               const DraftVocabulary* vocabulary) const;

  // Cali-TS's acceptance predictor (after attach(); nullptr without --cali-predictor).
  const std::shared_ptr<const AcceptancePredictor>& predictor() const { return predictor_; }
  // The draft vocabularies asked for, one per --draft-vocab-size item (one when the option is
  // absent): each the kept ids, or empty for the full head.
  const std::vector<std::vector<std::int32_t>>& draft_vocab_ids() const { return vocab_ids_; }
  // After attach(): the vocabulary of V' = `size` (nullptr for the full head or no such size).
  const DraftVocabulary* draft_vocabulary(std::int64_t size) const;

  // How tables and logs name the drafter.
  std::string label() const;
  // The one skip set of every prompt (--spec layer-skip), or nullptr.
  const SkipSet* skip_set() const;
  int num_layers() const { return num_layers_; }
  // A report's "spec" object: {"drafter", "controller", "max_draft", "logits", "tree"
  // [, "tree_max_nodes"][, "draft_weights"][, "lookup"]} and the kind's own fields (its skip set,
  // parameters or exit head).
  nlohmann::json describe() const;

 private:
  void choose_draft_vocabularies(const Engine& engine);
  // --draft-weights: the quantized copy, made from the model's tensors and attached to it.
  void attach_draft_weights(Engine& engine) const;

  SpeculativeConfig config_;
  const ControllerKinds* controller_kinds_;
  std::unique_ptr<DrafterKind> kind_;
  int num_layers_ = 0;
  std::vector<std::vector<std::int32_t>> vocab_ids_;
  std::vector<std::unique_ptr<DraftVocabulary>> vocabularies_;
  std::shared_ptr<const AcceptancePredictor> predictor_;
};

}  // namespace selfspec
