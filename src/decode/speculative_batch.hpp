// Continuous batching in which every sequence speculates (issue 34): B slots hold requests in
// flight, each running the one decoding loop of decode/decoding_run.hpp (first token, then draft →
// verify → commit, rank 0 deciding and broadcasting), and the forwards of all of them run
// together. Each slot's run is a fiber (decode/sequence_fiber.hpp) whose forwards go through a
// ForwardPort that suspends it; once every running sequence waits for a forward, the loop runs
// them as passes and resumes the fibers in slot order:
//
//   admit     the request feed (decode/request_feed.hpp) says, alike on every rank, which
//             requests join; free slots take them
//   resume    every sequence whose forward is done (or that is new) runs on to its next forward
//             (or ends: its result is handed over, its slot frees)
//   passes    the waiting forwards, grouped by what they read (the full model, or a draft's layer
//             plan, early exit, weight copy and vocabulary), each group as forwards of at most
//             pass_tokens tokens over the sequences' own KV regions (KvSegment). Draft forwards
//             go first: while any sequence drafts, the others wait, so that all verifications
//             (chains, and trees under each sequence's own mask) and prefill chunks then share
//             one full pass
//
// So a step of the batch drafts every speculating sequence's next token in one draft forward per
// plan, verifies every sequence's draft in one ragged forward, and lets each sequence accept, roll
// back (a length change of its region) and commit on its own. New requests join between passes
// (their prefill chunks ride along the others' drafts and verifications); a request may ask for
// plain decoding (a run without drafter).
//
// Per request, the tokens are those of Decoder::generate on that request alone, whatever else is
// running, at every TP degree: each sequence's logits (and hidden states) in a pass are
// bit-identical to a forward of its own (SequenceBatch's token-count invariance), its run is the
// single-request run, and its sampler draws from its own seeded stream.
//
// Draft lengths follow the load with goodput sizing (control/goodput_sizing.hpp): rank 0 caps
// each sequence's next round from its running acceptance and the measured cost of the batch's
// forwards, down to 0 (plain decoding) when speculation no longer pays (SmartSpec, arXiv
// 2406.14066 §4).
//
// Several sequences per forward need a host-memory backend (the CUDA backend refuses segments);
// a batch of one runs plain forwards over its cache, on every backend.
#pragma once

#include "comm/communicator.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/generation_options.hpp"
#include "decode/generation_result.hpp"
#include "decode/request_feed.hpp"
#include "draft/drafter.hpp"
#include "model/llama_model.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace selfspec {

// One request's drafter and draft-length controller. Each request gets its own, made when it
// starts, so that its drafts, and with them its sampled tokens, do not depend on which requests
// ran before it in its slot (a learning controller learns within the request, as in a run of
// `selfspec generate`).
struct SequenceSpeculators {
  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<DraftLengthController> controller;
};

struct SpeculativeBatchOptions {
  std::int64_t batch = 8;          // slots: requests in flight
  std::int64_t capacity = 0;       // KV slots per sequence; 0: what the longest request needs
  std::int64_t pass_tokens = 512;  // the most tokens of one forward
  // Rank 0 sizes each round's draft from goodput under the load (control/goodput_sizing.hpp);
  // off: each sequence's controller alone decides.
  bool goodput = false;
};

struct SpeculativeBatchStats {
  std::int64_t passes = 0;         // forwards the loop ran
  std::int64_t draft_passes = 0;   // of them, draft forwards
  std::int64_t tokens = 0;         // token rows through the model
  std::int64_t max_sequences = 0;  // the most sequences in one pass
  double seconds = 0.0;            // wall time of the passes
};

class SpeculativeBatch {
 public:
  // Every rank: the speculators of request `request`, asked when it starts (requests that
  // speculate only).
  using MakeSpeculators = std::function<SequenceSpeculators(std::int64_t request)>;

  struct Hooks {
    // run(): rank 0: how many requests have arrived so far (never decreasing; empty: all of them).
    // With `idle` true nothing is running, and the hook should wait for the next arrival.
    std::function<std::int64_t(bool idle)> arrived;
    // Rank 0: a request's token (by id), as soon as it is chosen.
    std::function<void(std::int64_t request, std::int32_t token)> on_token;
    // Every rank: a finished request's result, in the order they finish.
    std::function<void(std::int64_t request, GenerationResult&& result)> on_done;
  };

  SpeculativeBatch(LlamaModel& model, Communicator& comm, SpeculativeBatchOptions options,
                   MakeSpeculators make_speculators);
  ~SpeculativeBatch();
  SpeculativeBatch(const SpeculativeBatch&) = delete;
  SpeculativeBatch& operator=(const SpeculativeBatch&) = delete;

  // Every rank, the same requests (request i has id i). Throws before any forward when a request
  // cannot fit its KV region (naming it), or when a request speculates and no slot has a drafter.
  void run(std::span<const SpeculativeRequest> requests, const Hooks& hooks);

  // Every rank: requests as `feed` hands them over, until it ends and the last one finishes
  // (`hooks.arrived` is not used). Needs options.capacity > 0, and make_speculators when any
  // request speculates; a request that cannot fit its region is an error (a server checks
  // first).
  void serve(RequestFeed& feed, const Hooks& hooks);

  const SpeculativeBatchStats& stats() const { return stats_; }

 private:
  class Loop;
  LlamaModel& model_;
  Communicator& comm_;
  SpeculativeBatchOptions options_;
  MakeSpeculators make_speculators_;
  SpeculativeBatchStats stats_;
};

}  // namespace selfspec
