// Self-speculative decoding across tensor-parallel ranks with rank-0 control (ARCHITECTURE.md,
// "Decoding loop"; Draft & Verify §3.2, Alg. 3/4; Leviathan et al. 2023 for sampling).
//
// One round, starting from `pending` (the last generated token, not yet in the KV cache):
//   draft:  up to K times — every rank runs forward(last token, draft plan) (the same skip mask
//           on all ranks: it travels in rank 0's control message), the verifier picks the draft
//           token on rank 0, the draft-length controller decides whether to continue, and rank 0
//           broadcasts {draft | verify, token};
//   verify: every rank truncates the KV cache back to the round's start and runs one full
//           forward over [pending, d1..dk] (k + 1 positions; this overwrites whatever the draft
//           forwards wrote); the verifier decides on rank 0 how many drafts are accepted and the
//           target's own next token; rank 0 updates the controller and broadcasts
//           {accepted n, tokens, the next round's plan, stop?};
//   all:    kv.truncate(start + 1 + n) — rollback is a length change.
// Ranks other than 0 never look at logits: they obey messages, so every rank runs the same
// forwards and collectives. Greedy output is token-identical to autoregressive greedy decoding
// (and bit-identical logits, by the kernels' token-count invariance); sampled output follows the
// target distribution exactly.
//
// --debug-sync: after every message each rank contributes a checksum of (message, step, KV length)
// to an all-gather; any difference is reported as a divergence error instead of a later hang.
#pragma once

#include "comm/communicator.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/generator.hpp"
#include "draft/drafter.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace selfspec {

struct SpeculativeOptions {
  GenerationOptions generation;
  bool debug_sync = false;
  std::filesystem::path trace;  // rank 0 writes one JSONL record per round; empty: no trace
};

// Wall time by phase; together they cover the decoding loop after the first token.
struct PhaseTimes {
  double draft_s = 0.0;    // draft forwards (compute; their collectives count as comm)
  double verify_s = 0.0;   // verification forwards (compute)
  double control_s = 0.0;  // rank-0 decisions: verifier, controller, drafter, bookkeeping
  double comm_s = 0.0;     // all collectives: all-reduces, logit exchanges, control messages
};

struct SpeculativeStats {
  std::int64_t rounds = 0;    // = verification forwards
  std::int64_t drafted = 0;   // draft tokens proposed
  std::int64_t accepted = 0;  // draft tokens accepted
  std::int64_t draft_forwards = 0;
  std::int64_t verify_forwards = 0;
  std::int64_t round_tokens = 0;  // tokens the rounds emitted (all but the first)
  double draft_forward_s = 0.0;   // total wall time of draft forwards (incl. their all-reduces)
  double verify_forward_s = 0.0;
  PhaseTimes phases;

  // α: accepted ÷ drafted.
  double acceptance_rate() const {
    return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
  }
  // M: tokens per verification forward.
  double mean_accepted_length() const {
    return verify_forwards > 0
               ? static_cast<double>(round_tokens) / static_cast<double>(verify_forwards)
               : 0.0;
  }
};

struct SpeculativeResult {
  std::vector<std::int32_t> tokens;
  bool stopped_on_eos = false;
  int interrupt_signal = 0;   // non-zero: stopped early by GenerationOptions::interrupt
  GenerationTimings timings;  // prefill = prompt + first token; decode = every round after it
  SpeculativeStats stats;
};

class SpeculativeDecoder {
 public:
  // drafter and controller are used on rank 0 only (other ranks may pass their own copies).
  SpeculativeDecoder(LlamaModel& model, Communicator& comm, Drafter& drafter,
                     DraftLengthController& controller);

  // Every rank calls this with the same prompt and options; kv must be empty and hold at least
  // prompt.size() + max_new_tokens slots.
  SpeculativeResult generate(std::span<const std::int32_t> prompt,
                             const SpeculativeOptions& options, KvCache& kv,
                             const TokenCallback& on_token = {});

 private:
  LlamaModel& model_;
  Communicator& comm_;
  Drafter& drafter_;
  DraftLengthController& controller_;
};

}  // namespace selfspec
