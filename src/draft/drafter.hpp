// A drafter decides how a self-speculative round drafts: which sublayers its draft forwards run,
// how the draft grows (a chain, later a token tree), and what it learns from each verdict. The
// decoding loop (decode/decoder.hpp) runs a round as draft → verify → commit; the drafter owns the
// first step through three calls, may watch each request's prompt go in, and reports:
//   begin_request()  every rank, before the prompt's prefill: a new request starts; the drafter
//                 may return a ForwardObserver that the loop passes to every prefill forward (all
//                 chunks of a chunked prefill, in order), to learn from the prompt's hidden states
//                 (Draft on the Fly §3.2 picks its skip set this way). The observer runs on every
//                 rank and sees the same bits there (the residual stream is replicated), but only
//                 rank 0's conclusions may matter: they reach the other ranks through next_plan().
//                 Observed forwards cannot be recorded as CUDA graphs; prefill rarely is anyway.
//   next_plan()   rank 0, before each round (the first time right after the prefill): the
//                 DraftPlan of its draft forwards (the layer plan, and the exit layer of an
//                 early-exit draft). It travels to every rank in rank 0's control message, so all
//                 ranks skip the same sublayers and their collectives stay matched.
//   propose()     every rank, collectively: grows the round's Draft through the DraftContext,
//                 whose step() runs one draft forward on every rank, lets rank 0 pick the token
//                 (and, when drafting trees, its alternatives) and decide with the draft-length
//                 controller whether to go on, and tells every rank. A drafter never branches on
//                 its own rank's floating-point data.
//   observe()     rank 0, after verification: the draft and the Verdict on it (state a drafter
//                 carries between rounds — e.g. an on-the-fly skip-set search — lives here).
//   verification_observer(), verified()
//                 every rank: a drafter that drafts from the target's features (a feature-level
//                 head, EAGLE §3) sees each verification forward's "final_residual" rows and
//                 then, on every rank, which of them the verdict kept.
//   state()       rank 0, for reports and traces: what the drafter decided (JSON; null if nothing).
// One implementation per file: LayerSkipDrafter (a fixed skip set: Draft & Verify §3.1),
// EarlyExitDrafter (the first N layers and a trained exit head: EESD §3.1),
// SwiftDrafter (SWIFT's on-the-fly skip-set search, §4.1), CosineSkipDrafter (a skip set per
// request from the prompt's cosine similarities: Draft on the Fly §3, Alg. 1), SourcedDrafter
// (draft sources such as lookup drafts tried before another drafter: LLMA / prompt lookup
// decoding), FeatureHeadDrafter (a trained head over the target's own features: EAGLE §3).
#pragma once

#include "draft/draft.hpp"
#include "draft/draft_plan.hpp"
#include "draft/verdict.hpp"
#include "model/layer_plan.hpp"
#include "model/llama_model.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace selfspec {

// What one draft forward gave, known on every rank.
struct DraftStep {
  std::int32_t token = -1;  // the drafted token (rank 0's pick)
  double confidence = 0.0;  // the draft distribution's top probability (rank 0; 0 elsewhere)
  bool more = false;        // rank 0's decision: draft another token
  // Tree drafting (decode's --tree): the next most likely tokens of the same draft distribution,
  // to verify as siblings of `token` (every rank; empty for chains).
  std::vector<std::int32_t> alternatives;
};

// The rows of one feature-level draft step (DraftContext::step_rows): each token with its
// position and the feature row the head reads for it (model/draft_forward.hpp's FeatureRows).
// The last row's logits give the draft; `observer` (may be null) sees every forward's
// "final_residual" rows, the head's outputs, which the next step reads.
struct DraftRows {
  std::span<const std::int32_t> tokens;
  std::span<const std::int32_t> positions;
  FeatureRows features;
  const ForwardObserver* observer = nullptr;
};

// How many of a candidate draft plan's greedy tokens equal the target's (SWIFT §4.1 eq. 3,
// "matchness"), known on rank 0.
struct DraftMatch {
  std::int64_t matches = 0;
  std::int64_t positions = 0;
  double rate() const {
    return positions > 0 ? static_cast<double>(matches) / static_cast<double>(positions) : 0.0;
  }
};

// The decoding loop's side of a drafting round (implemented in decode/).
class DraftContext {
 public:
  virtual ~DraftContext() = default;
  // The round's draft plan (every rank: it arrived in rank 0's control message).
  virtual const DraftPlan& plan() const = 0;
  // Collective: one draft forward of node `parent`'s token (Draft::kRoot: the last committed
  // token) under plan(), at the position after `parent`; rank 0 picks the draft token and
  // decides whether drafting goes on (the draft-length controller, the round's cap), and every
  // rank learns both. Call only while the previous step said `more` (a round's first step is
  // always allowed).
  virtual DraftStep step(const Draft& draft, int parent) = 0;
  // Collective: step() for a feature-level draft: the attached feature head over `rows` (a
  // round's first step carries every committed row the head has not seen yet, in forwards of at
  // most a prefill chunk each), drafting the child of `parent` from the last row. The default
  // throws: a context that runs no feature-head drafts.
  virtual DraftStep step_rows(const Draft& draft, int parent, const DraftRows& rows);

  // Every rank: whether this is rank 0, where drafters decide.
  virtual bool is_root() const = 0;
  // Every rank, the same value: tokens the target has produced in this run so far, the last
  // committed one included.
  virtual std::int64_t generated() const = 0;
  // Collective: every rank's `data` becomes rank 0's (a drafter's own decisions, e.g. the next
  // candidate plan to score).
  virtual void share(std::span<std::byte> data) = 0;
  // Collective (same candidate on every rank): SWIFT's matchness of `candidate` over the last
  // w = min(window, generated()) tokens the target produced — one parallel forward of the tokens
  // before them under the candidate plan, which sees the target's cached K/V for everything
  // earlier (§4.1: "the cached key-value pairs in the target LLM are reused"), its argmax per row
  // compared with the target's token. The KV cache is restored afterwards. Counts on rank 0;
  // nothing runs (and no collective) when w < 1.
  virtual DraftMatch score_plan(const LayerPlan& candidate, int window) = 0;
  // Every rank: the sequence so far, the prompt and then every committed token (the round's root
  // last), into `out`.
  virtual void history(std::vector<std::int32_t>& out) const = 0;
  // Rank 0: the most nodes this round's draft may hold without draft steps (the tokens left to
  // generate and, for trees, the node budget; not the controller's K); 0 elsewhere. It bounds a
  // chain's length, and so any path's depth.
  virtual int draft_room() const = 0;
  // Rank 0: the most nodes this round's draft may hold in all, however they branch (the
  // verification forward's rows: the KV cache's room, the control message's and, for trees, the
  // node budget); 0 elsewhere. The default, draft_room(), is never more.
  virtual int node_room() const { return draft_room(); }
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string_view name() const = 0;
  // Every rank, before the prefill of a request of `prompt_tokens` tokens: resets per-request
  // state. Returns the observer for the prefill forwards, or nullptr (the default) for none; it
  // must stay valid until the prefill ends.
  virtual const ForwardObserver* begin_request(std::int64_t prompt_tokens) {
    (void)prompt_tokens;
    return nullptr;
  }
  // Rank 0: the plan of the next round's draft forwards: a layer plan, and N when they exit early
  // through the model's exit head after its first N layers (EarlyExitDrafter).
  virtual DraftPlan next_plan() = 0;
  // Collective: fills `draft` (empty on entry) for this round. The default drafts one step per
  // token, each continuing the previous step's drawn token, until rank 0 stops; a step's
  // alternatives become siblings of its drawn token (a chain when there are none).
  virtual void propose(DraftContext& context, Draft& draft);
  // Every rank: the observer of each verification forward, which sees its "final_residual" rows
  // (row 0 the round's root, row 1 + i draft node i), or nullptr (the default) for none. It must
  // stay valid until the request ends.
  virtual const ForwardObserver* verification_observer() { return nullptr; }
  // Every rank, after each verification (drafted or not): the draft and the verdict on it, whose
  // accepted path every rank knows.
  virtual void verified(const Draft& draft, const Verdict& verdict) {
    (void)draft;
    (void)verdict;
  }
  // Rank 0: the verdict on this round's draft.
  virtual void observe(const Draft& draft, const Verdict& verdict) {
    (void)draft;
    (void)verdict;
  }
  // Rank 0: the drafter's decisions for reports (e.g. the skip set it chose); null by default.
  virtual nlohmann::json state() const { return nullptr; }
  // Every rank: whether some rounds' drafts are point masses proposed without a draft forward
  // (Draft::from_lookup; SourcedDrafter): sampled verification then walks warped distributions.
  virtual bool point_mass_drafts() const { return false; }
};

}  // namespace selfspec
