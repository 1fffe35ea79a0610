// Command-line options of self-speculative decoding, shared by `generate` and `bench`:
// the drafter (--spec layer-skip with a skip set from a file, lists or the uniform generator;
// --spec asd, Draft on the Fly's per-prompt skip set, with --asd-alpha/--asd-m/--asd-n),
// the draft-length controller and its parameters, how verification reads the logits, and tree
// drafting (--tree: SWIFT §4.2's confidence-aware dynamic verification).
#pragma once

#include "control/draft_length_controller.hpp"
#include "decode/generation_options.hpp"
#include "decode/sharded_logits.hpp"
#include "draft/adaptive_draft_model.hpp"
#include "draft/drafter.hpp"
#include "draft/skip_set.hpp"
#include "draft/swift_drafter.hpp"
#include "engine/engine.hpp"
#include "model_io/model_config.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace selfspec::launch {

// The draft-length controller draws from its own random stream: the sampling seed XOR this salt.
inline constexpr std::uint64_t kControllerSeedSalt = 0x7468656d70736f6eull;
// SWIFT's optimiser draws from its own stream too: the sampling seed XOR this salt.
inline constexpr std::uint64_t kSwiftSeedSalt = 0x7377696674736b70ull;

struct SpecCliOptions {
  std::string spec = "none";   // none | layer-skip | swift | asd | early-exit
  std::string exit_head;       // --exit-head: the early-exit head file (--spec early-exit)
  std::string cali_predictor;  // --cali-predictor: Cali-TS's prediction head (--controller cali-ts)
  std::string skip_config;
  std::string skip_attn;
  std::string skip_mlp;
  double skip_uniform = -1.0;
  AsdParams asd;  // --spec asd: Draft on the Fly's α, m, n (Table 2's defaults)
  ControllerOptions controller;
  std::string logits = "local";
  bool debug_sync = false;
  std::string trace;
  SwiftOptions swift;            // --spec swift
  std::string draft_vocab;       // --draft-vocab: a count-vocab file (launch/draft_vocab_file.hpp)
  std::string draft_vocab_size;  // --draft-vocab-size: V' (bench: a list); 0: the full head
  std::string tree = "none";     // --tree: none, swift, or bins P:K,... (draft/tree_widths.hpp)
  int tree_max_nodes = 32;       // --tree-max-nodes: draft nodes per round's tree
  // --cali-predictor's content, loaded by attach_drafting_files once the model is known.
  mutable std::shared_ptr<const AcceptancePredictor> predictor;

  // lists: --controller and --logits accept comma-separated lists (bench compares them).
  void add_to(CLI::App& command, bool lists = false);
  std::vector<std::string> controller_kinds() const;
  std::vector<LogitsMode> logits_modes() const;
  bool enabled() const { return spec != "none"; }
  // --spec layer-skip: one skip set for every prompt (skip_set()); asd chooses one per prompt.
  bool fixed_skip_set() const { return spec == "layer-skip"; }
  // Validates the combination of options (names the option at fault) before any weight is read.
  void validate(const CLI::App& command) const;
  // Checks the drafter's parameters against the model (--asd-n against the layer count) before
  // any weight is read.
  void check_for_model(int num_layers) const;
  // The skip set the options describe (--spec layer-skip), for a model with `num_layers` layers.
  SkipSet skip_set(const CLI::App& command, int num_layers) const;
  // The drafter of one request (or, for bench, one configuration's runs): a LayerSkipDrafter over
  // `skips` (--spec layer-skip), a SwiftDrafter seeded from the sampling seed (--spec swift) or a
  // CosineSkipDrafter (--spec asd; throws selfspec::Error naming --asd-n when n > num_layers).
  std::unique_ptr<Drafter> make_drafter(const SkipSet* skips, int num_layers,
                                        std::uint64_t sampling_seed) const;
  // How tables name the drafter: the skip set's name, "swift (r .., window ..)" or
  // "asd (alpha .., m .., n ..)".
  std::string drafter_label(const SkipSet* skips) const;
  // The options of the `kind` controller (--controller, or one of a bench's list), seeded from
  // the sampling seed (kControllerSeedSalt).
  ControllerOptions controller_options(const std::string& kind, std::uint64_t sampling_seed) const;
  LogitsMode logits_mode() const;
  // After Engine::load, before any KV cache is made: with --spec early-exit, loads --exit-head
  // (checked against the model) and attaches it to the engine's model; with --cali-predictor,
  // loads the acceptance predictor (checked against the model and the exit head) for
  // controller_options(). Nothing otherwise.
  void attach_drafting_files(Engine& engine) const;
  // --tree and --tree-max-nodes into a run's options.
  void apply_tree(GenerationOptions& generation) const;
  // The pruned draft vocabularies asked for, one per --draft-vocab-size item (one when the option
  // is absent): each the kept ids (launch/draft_vocab_file.hpp select_draft_vocab), or empty for
  // the full head (size 0, or no --draft-vocab file and no draft_vocab in the skip set).
  std::vector<std::vector<std::int32_t>> draft_vocab_ids(const CLI::App& command,
                                                         const SkipSet* skips,
                                                         std::int64_t vocab_size,
                                                         std::span<const std::int32_t> eos) const;
  // {"drafter", "skip_set", "skipped_sublayers", "skip_fraction", "controller", "max_draft",
  // "logits"} for reports with a fixed skip set; with --spec asd {"drafter", "asd": {"alpha", "m",
  // "n"}, "controller", "max_draft", "logits"} (the chosen sets are per request: the drafter's
  // state()); with --spec swift its options under "swift".
  nlohmann::json describe(const SkipSet* skips, int num_layers) const;
};

}  // namespace selfspec::launch
