// The options of self-speculative decoding as a command declares them (generate, bench): --spec
// and each drafter kind's own options (speculative/drafter_kinds.hpp), the draft-length controller
// and its parameters, how verification reads the logits, the pruned draft vocabulary, token trees
// (SWIFT §4.2's confidence-aware dynamic verification) and the debugging aids. SpeculativeSetup
// (speculative_setup.hpp) turns them into what a run drafts with.
#pragma once

#include "control/draft_length_controller.hpp"
#include "speculative/drafter_kinds.hpp"
#include "verify/sharded_logits.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace selfspec {

// --max-draft K in [1, 63] (the papers' K): most tokens drafted per round. A control message
// carries at most 64 tokens, the K drafts and the target's own token. Shared with the commands
// that draft without --spec (plan, collect-cali-data).
CLI::Option* add_max_draft_option(CLI::App& command, int& max_draft);

// --draft-weights FORMAT: none, or the format of the quantized (or converted) copy of the weights
// that draft forwards read. Shared with plan, which adds the copy's memory.
CLI::Option* add_draft_weights_option(CLI::App& command, std::string& draft_weights);

// --draft-vocab-size: one count (or, with lists, comma-separated counts), each an integer >= 0.
// Throws selfspec::Error naming the option and the item otherwise.
std::vector<std::int64_t> parse_draft_vocab_sizes(const std::string& text);

struct SpeculativeOptions {
  explicit SpeculativeOptions(DrafterKinds registered = builtin_drafter_kinds())
      : kinds(std::move(registered)) {}

  DrafterKinds kinds;
  std::string spec = "none";  // --spec: none or a kind's name
  ControllerOptions controller;
  std::string cali_predictor;  // --cali-predictor: Cali-TS's prediction head (--controller cali-ts)
  std::string logits = "local";
  bool debug_sync = false;
  std::string trace;        // --trace (generate): one JSON line per round
  std::string draft_vocab;  // --draft-vocab: a count-vocab file (model_io/draft_vocab_file.hpp)
  std::string draft_vocab_size;  // --draft-vocab-size: V' (bench: a list); 0: the full head
  std::string tree = "none";     // --tree: none, swift, or bins P:K,... (draft/tree_widths.hpp)
  int tree_max_nodes = 32;       // --tree-max-nodes: draft nodes per round's tree
  // --draft-weights: none, or the format of the quantized copy of the weights draft forwards
  // read (LlamaModel::attach_draft_weights), e.g. q4_0.
  std::string draft_weights = "none";
  // --lookup N: lookup drafts (draft/lookup_drafter.hpp) from the longest recurring suffix of up
  // to N tokens, down to --lookup-min-ngram; at most --lookup-max-draft tokens. 0: off.
  int lookup = 0;
  int lookup_min_ngram = 2;
  int lookup_max_draft = 4;

  // lists: --controller, --logits and --draft-vocab-size accept comma-separated lists (bench
  // compares them); trace: the command offers --trace.
  void add_to(CLI::App& command, bool lists = false, bool trace = true);
  bool enabled() const { return spec != "none"; }
  // --draft-weights names a quantized format (EngineOptions::quantized_draft_weights).
  bool quantized_draft_weights() const;
  std::vector<std::string> controller_kinds() const;
  std::vector<LogitsMode> logits_modes() const;
  // The kind --spec names (nullptr: none).
  DrafterKind* chosen() const { return kinds.find(spec); }
  // Validates the combination of options (names the option at fault) before any weight is read.
  void validate(const CLI::App& command) const;
  // {"drafter", "controller", "max_draft", "logits", "tree"[, "tree_max_nodes"]} and the chosen
  // kind's own fields (its skip set, parameters or exit head).
  nlohmann::json describe(int num_layers) const;
};

}  // namespace selfspec
