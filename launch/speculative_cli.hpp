// The self-speculative settings (speculative/speculative_config.hpp) as a command's options: each
// declared setting, the drafter kinds' and controllers' own included, becomes --KEY in the
// "self-speculative decoding" group, and config() turns the options the command line (or its run
// config, launch/run_config.hpp) gave into a SpeculativeConfig, checked as JSON settings are.
// Values are bound as text: the declarations check them, so a bad value gets the same error from
// every source.
#pragma once

#include "speculative/speculative_config.hpp"

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace selfspec::launch {

class SpeculativeCli {
 public:
  explicit SpeculativeCli(SpeculativeKinds kinds = {}) : kinds_(std::move(kinds)) {}
  SpeculativeCli(const SpeculativeCli&) = delete;  // its options point into it
  SpeculativeCli& operator=(const SpeculativeCli&) = delete;

  // Declares the options on `command`. lists: --controller, --logits and --draft-vocab-size take
  // comma-separated lists (bench compares them).
  void add_to(CLI::App& command, bool lists = false);
  // After parsing: the config of the options given. Throws selfspec::Error naming the option.
  SpeculativeConfig config() const;
  const SpeculativeKinds& kinds() const { return kinds_; }

 private:
  SpeculativeKinds kinds_;
  bool lists_ = false;
  std::vector<std::pair<std::string, const CLI::Option*>> options_;  // key, its option
  std::map<std::string, std::string> text_;                          // key -> value as given
  std::map<std::string, bool> flags_;
};

// A CLI11 check of one declared setting (with `lists`, a comma-separated list of its values), for
// commands that take a speculative setting outside the group (plan's --logits).
CLI::Validator setting_validator(SettingSpec spec, bool lists);

// --max-draft K in [1, kMaxDraftTokens], for the commands that draft without the whole group
// (plan, collect-cali-data, search-skips).
CLI::Option* add_max_draft_option(CLI::App& command, int& max_draft);

// --draft-weights FORMAT (none, a quantized format or a dense dtype), for plan, which adds the
// copy's memory.
CLI::Option* add_draft_weights_option(CLI::App& command, std::string& draft_weights);

}  // namespace selfspec::launch
