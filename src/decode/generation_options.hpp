// What a generation run is asked to do: the token budget, sampling, end-of-sequence handling,
// prefill chunking, how rank 0 reads vocab-sharded logits, the draft forwards' vocabulary, the
// stop-request hook, the self-speculative debugging aid and the per-round report hook. Every rank
// passes the same options (the hooks matter on rank 0).
#pragma once

#include "draft/tree_widths.hpp"
#include "model/draft_forward.hpp"
#include "verify/sampler.hpp"
#include "verify/sharded_logits.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace selfspec {

class Draft;
class DraftVocabulary;
struct RoundReport;
struct Verdict;

struct GenerationOptions {
  std::int64_t max_new_tokens = 128;
  SamplingParams sampling;
  bool ignore_eos = false;
  std::vector<std::int32_t> eos_ids;
  std::int64_t prefill_chunk = 512;         // prompt tokens per prefill forward
  LogitsMode logits = LogitsMode::kGather;  // how rank 0 learns about vocab-sharded logits
  // What draft forwards read (model/draft_forward.hpp): draft.draft_weights, the model's attached
  // quantized copy (--draft-weights); draft.vocabulary, a pruned LM head (must outlive the run;
  // nullptr: the full head). Each round's plan and early exit come from the drafter; verification
  // always runs the full model.
  DraftForward draft;
  // Tree drafting (SWIFT §4.2's dynamic verification): how many alternatives each draft step
  // adds beside its drawn token, by confidence; the chain by default. A round's tree holds at
  // most tree_max_nodes draft nodes (the verification forward's rows, the root apart).
  TreeWidths tree = TreeWidths::chain();
  int tree_max_nodes = 32;
  // Polled on rank 0 once per step: a non-zero value (a signal number) stops generation after the
  // tokens already chosen, on every rank (the stop travels in the control message).
  std::function<int()> interrupt;
  // After every control message, check that all ranks agree on it (fails loudly on divergence).
  bool debug_sync = false;
  // Called on rank 0 after each self-speculative round is decided (generate --trace writes it
  // as one JSON line); empty: nothing is reported.
  std::function<void(const RoundReport&)> on_round;
};

// What rank 0 knows of one self-speculative round once it is decided.
struct RoundReport {
  std::int64_t round = 0;  // rounds before this one
  const Draft& draft;
  const Verdict& verdict;
  int emitted = 0;                  // tokens the round emitted (accepted path + the target's own)
  nlohmann::json controller_state;  // the draft-length controller's state() after its update
  std::string plan;                 // the round's draft plan (LayerPlan::describe())
};

// Called on rank 0 for each generated token, as soon as it is chosen.
using TokenCallback = std::function<void(std::int32_t token)>;

}  // namespace selfspec
