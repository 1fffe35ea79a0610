// Command-line options of self-speculative decoding, shared by `generate` and `bench`:
// the drafter (--spec layer-skip with a skip set from a file, lists or the uniform generator),
// the draft-length controller and its parameters, and how verification reads the logits.
#pragma once

#include "control/draft_length_controller.hpp"
#include "decode/sharded_logits.hpp"
#include "draft/drafter.hpp"
#include "draft/skip_set.hpp"
#include "draft/swift_drafter.hpp"
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
  std::string spec = "none";  // none | layer-skip | swift
  std::string skip_config;
  std::string skip_attn;
  std::string skip_mlp;
  double skip_uniform = -1.0;
  ControllerOptions controller;
  std::string logits = "local";
  bool debug_sync = false;
  std::string trace;
  SwiftOptions swift;  // --spec swift
  std::string draft_vocab;       // --draft-vocab: a count-vocab file (launch/draft_vocab_file.hpp)
  std::string draft_vocab_size;  // --draft-vocab-size: V' (bench: a list); 0: the full head

  // lists: --controller and --logits accept comma-separated lists (bench compares them).
  void add_to(CLI::App& command, bool lists = false);
  std::vector<std::string> controller_kinds() const;
  std::vector<LogitsMode> logits_modes() const;
  bool enabled() const { return spec != "none"; }
  // Validates the combination of options (names the option at fault) before any weight is read.
  void validate(const CLI::App& command) const;
  // The skip set the options describe, for a model with `num_layers` layers (--spec swift: the
  // uniform set its search starts from).
  SkipSet skip_set(const CLI::App& command, int num_layers) const;
  // The drafter of --spec (layer-skip: `skips`, fixed; swift: the on-the-fly search), seeded
  // from the sampling seed.
  std::unique_ptr<Drafter> make_drafter(const SkipSet& skips, int num_layers,
                                        std::uint64_t sampling_seed) const;
  // What a drafter learned, for reports (null for drafters that learn nothing).
  static nlohmann::json drafter_state(const Drafter& drafter);
  // The options of the `kind` controller (--controller, or one of a bench's list), seeded from
  // the sampling seed (kControllerSeedSalt).
  ControllerOptions controller_options(const std::string& kind, std::uint64_t sampling_seed) const;
  LogitsMode logits_mode() const;
  // The pruned draft vocabularies asked for, one per --draft-vocab-size item (one when the option
  // is absent): each the kept ids (launch/draft_vocab_file.hpp select_draft_vocab), or empty for
  // the full head (size 0, or no --draft-vocab file and no draft_vocab in the skip set).
  std::vector<std::vector<std::int32_t>> draft_vocab_ids(const CLI::App& command,
                                                         const SkipSet& skips,
                                                         std::int64_t vocab_size,
                                                         std::span<const std::int32_t> eos) const;
  // {"drafter", "skip_set", "controller", "max_draft", "logits"} for reports.
  nlohmann::json describe(const SkipSet& skips, int num_layers) const;
};

}  // namespace selfspec::launch
