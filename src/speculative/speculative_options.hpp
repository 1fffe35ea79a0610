// The options of self-speculative decoding as a command declares them (generate, bench): --spec
// and each drafter kind's own options (speculative/drafter_kinds.hpp), the draft-length controller
// and its parameters, how verification reads the logits, the pruned draft vocabulary, token trees
// (SWIFT §4.2's confidence-aware dynamic verification) and the debugging aids. SpeculativeSetup
// (speculative_setup.hpp) turns them into what a run drafts with.
#pragma once

#include "control/draft_length_controller.hpp"
#include "verify/sharded_logits.hpp"
#include "speculative/drafter_kinds.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace selfspec {

// --max-draft K in [1, 63] (the papers' K): most tokens drafted per round. A control message
// carries at most 64 tokens, the K drafts and the target's own token. Shared with the commands
// that draft without --spec (plan, collect-cali-data).
CLI::Option* add_max_draft_option(CLI::App& command, int& max_draft);

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

  // lists: --controller, --logits and --draft-vocab-size accept comma-separated lists (bench
  // compares them); trace: the command offers --trace.
  void add_to(CLI::App& command, bool lists = false, bool trace = true);
  bool enabled() const { return spec != "none"; }
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
