// Command-line options of self-speculative decoding, shared by `generate` and `bench`:
// the drafter (--spec layer-skip with a skip set from a file, lists or the uniform generator),
// the draft-length controller and its parameters, and how verification reads the logits.
#pragma once

#include "control/draft_length_controller.hpp"
#include "decode/sharded_logits.hpp"
#include "draft/drafter.hpp"
#include "draft/skip_set.hpp"
#include "model_io/model_config.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace selfspec::launch {

// The draft-length controller draws from its own random stream: the sampling seed XOR this salt.
inline constexpr std::uint64_t kControllerSeedSalt = 0x7468656d70736f6eull;

struct SpecCliOptions {
  std::string spec = "none";  // none | layer-skip
  std::string skip_config;
  std::string skip_attn;
  std::string skip_mlp;
  double skip_uniform = -1.0;
  ControllerOptions controller;
  std::string logits = "local";
  bool debug_sync = false;
  std::string trace;

  // lists: --controller and --logits accept comma-separated lists (bench compares them).
  void add_to(CLI::App& command, bool lists = false);
  std::vector<std::string> controller_kinds() const;
  std::vector<LogitsMode> logits_modes() const;
  bool enabled() const { return spec != "none"; }
  // Validates the combination of options (names the option at fault) before any weight is read.
  void validate(const CLI::App& command) const;
  // The skip set the options describe, for a model with `num_layers` layers.
  SkipSet skip_set(const CLI::App& command, int num_layers) const;
  // The options of the `kind` controller (--controller, or one of a bench's list), seeded from
  // the sampling seed (kControllerSeedSalt).
  ControllerOptions controller_options(const std::string& kind, std::uint64_t sampling_seed) const;
  LogitsMode logits_mode() const;
  // {"drafter", "skip_set", "controller", "max_draft", "logits"} for reports.
  nlohmann::json describe(const SkipSet& skips, int num_layers) const;
};

}  // namespace selfspec::launch
