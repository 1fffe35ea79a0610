// Rank 0's token decisions for plain and self-speculative decoding, from vocab-sharded logits
// (through ShardedLogits: gathered rows or local reductions — identical decisions): the next
// token of a plain step, each draft token, and the verdict on a draft.
//
//   greedy (temperature 0): the next token is the argmax (first maximum); a draft's confidence is
//     its top softmax probability; verification accepts the longest drafted prefix that equals
//     the target's argmax at each position, then appends the target's own argmax there — so the
//     output is token-identical to greedy autoregressive decoding (Draft & Verify Alg. 3).
//   sampling: temperature, top-k and top-p warp the target p and the draft q identically; a
//     drafted token x ~ q is accepted with probability min(1, p(x)/q(x)); at the first rejection
//     the target's token is drawn from norm(max(0, p − q)); when every draft is accepted a bonus
//     token is drawn from p at the next position (Leviathan et al. 2023; Chen et al. 2023;
//     Draft & Verify Alg. 4). The output then follows the target distribution exactly.
//
//   token trees (SWIFT §4.2's dynamic verification; SpecInfer, Miao et al. 2024, §4): a draft
//     step may also propose alternatives — the next most likely tokens of its draft distribution q
//     — as siblings of its drawn token. Verification walks the tree from the root. Greedy: at
//     each node, accept the child carrying the target's argmax there, if any; else emit the
//     argmax. The accepted path is still the target's greedy continuation, token for token.
//     Sampling: recursive rejection over a node's children, in order (SpecInfer's multi-step
//     speculative sampling). The target's distribution at the node starts as r = p; the drawn
//     child x ~ q is accepted with probability min(1, r(x)/q(x)), else r = norm(max(0, r − q));
//     each alternative y, a deterministic proposal (a point mass), is accepted with probability
//     r(y), else r = r without y, renormalised. The first acceptance moves the walk to that
//     child; when none is accepted the token is drawn from r. Each test is an exact speculative
//     sampling step for the current r (any proposal that depends only on earlier candidates will
//     do), so the emitted token follows p at every node. Trees with sampling use the warped
//     (rank 0) distributions, whatever top-k / top-p say.
//
//   lookup drafts (draft/sourced_drafter.hpp; Draft::from_lookup): a chain copied from the
//     sequence, each token a deterministic proposal. Greedy: as any chain. Sampling: at each node
//     the copied token x is accepted with probability r(x) (r = p, the warped target there), else
//     the token is drawn from r without x, renormalised; when every token is accepted the bonus
//     comes from p after the last one. These are exact speculative sampling steps for a point-mass
//     q, so the output follows p; they need the warped distributions, as trees do (a picker made
//     with point_mass_drafts).
//   lookup branches (--lookup-tree; Draft::add_sourced): a source's tokens grafted onto the
//     model's draft as a branch of its tree. Sourced nodes are point masses wherever they sit and
//     are tested as alternatives are (accepted with probability r(x), else r without x), after the
//     node's drawn child and alternatives; a draft with sourced nodes is walked as a tree under
//     sampling even when it is a chain.
//
// Random draws come from one seeded stream on rank 0, consumed in a fixed order: one draw per
// sampled token, one per acceptance test, one for the residual (plus one more when the residual
// has no mass and p itself is sampled).
//
// All methods are collective (every rank calls them in the same order with its own logit shard);
// the results are meaningful on rank 0, which broadcasts its decisions in ControlMessages.
#pragma once

#include "comm/communicator.hpp"
#include "draft/draft.hpp"
#include "draft/verdict.hpp"
#include "model/shard_plan.hpp"
#include "verify/sampler.hpp"
#include "verify/sharded_logits.hpp"

#include <boost/random/mersenne_twister.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace selfspec {

struct DraftChoice {
  std::int32_t token = -1;
  double confidence = 0.0;  // the draft distribution's top probability
  // The next most likely tokens of the draft distribution after `token`, most likely first (at
  // most the picker's max_alternatives; rank 0).
  std::vector<std::int32_t> alternatives;
};

// How a picker reads the logits and decides.
struct TokenPickerOptions {
  LogitsMode mode = LogitsMode::kGather;  // how rank 0 reads vocab-sharded logits
  SamplingParams sampling;
  int max_alternatives = 0;        // the most alternatives a draft step proposes (trees; 0: chains)
  bool tp_invariant = false;       // decide from whole rows, the same at every TP degree
  bool point_mass_drafts = false;  // drafts may be lookup chains (sampling walks warped rows)
};

class TokenPicker {
 public:
  // reductions: where the local mode's per-shard reductions run (make_sharded_logits; nullptr:
  // host rows). Device-resident reductions take the rows in device memory (LogitRows::device).
  TokenPicker(const TokenPickerOptions& options, Communicator& comm, const ShardPlan& shard,
              std::unique_ptr<ShardReductions> reductions = nullptr);

  std::string_view mode_name() const { return logits_->name(); }
  const SamplingParams& sampling() const { return sampling_; }

  // The next token from one position's logits (plain decoding, the first token after prefill).
  std::int32_t next_token(const LogitRows& rows);
  std::int32_t next_token(std::span<const float> local_row) { return next_token(host(local_row)); }

  // Starts a drafting round: forgets the previous round's draft distributions.
  void begin_round();
  // One draft step: choose the draft token (and up to max_alternatives alternatives) from the
  // draft forward's logits and remember its distribution q for verification.
  DraftChoice draft(const LogitRows& rows);
  DraftChoice draft(std::span<const float> local_row) { return draft(host(local_row)); }
  // The verdict on this round's draft (n nodes, a chain or a tree, known on every rank), from
  // the verification forward's logits of its n + 1 rows (local_rows: (n + 1) × vocab_local; row
  // 0 the root, row 1 + i node i): the accepted path and the target's next token (rank 0).
  // kv_length is left to the caller. With an empty draft this is next_token() of the one row.
  Verdict verify(const LogitRows& rows, const Draft& draft);
  Verdict verify(std::span<const float> local_rows, const Draft& draft) {
    return verify(host(local_rows), draft);
  }

  // Seconds spent inside collectives.
  double comm_seconds() const { return logits_->comm_seconds() + comm_seconds_; }

 private:
  enum class Kind { kGreedy, kDense, kSparse };
  LogitRows host(std::span<const float> rows) const { return LogitRows::host(rows, vocab_local_); }
  // Sets the logits' rows, checking their count.
  void set_rows(const LogitRows& rows, std::int64_t expected);
  double uniform();
  // Shares a small decision of rank 0 with every rank, when the logits access needs it.
  template <typename T>
  void share(T& value);
  int accept_greedy(std::span<const std::int32_t> drafted, std::int32_t& next);
  int accept_dense(std::span<const std::int32_t> drafted, std::int32_t& next);
  int accept_sparse(std::span<const std::int32_t> drafted, std::int32_t& next);
  void walk_tree_greedy(const Draft& draft, Verdict& verdict);
  void walk_tree_sampled(const Draft& draft, Verdict& verdict);
  // Sampling over a lookup chain (point-mass proposals).
  void walk_lookup_sampled(const Draft& draft, Verdict& verdict);
  // The alternatives of a draft step: `ranked` (most likely first) without `drawn`.
  std::vector<std::int32_t> alternatives_from(std::span<const std::int32_t> ranked,
                                              std::int32_t drawn) const;

  Communicator& comm_;
  std::unique_ptr<ShardedLogits> logits_;
  SamplingParams sampling_;
  Kind kind_;
  int max_alternatives_ = 0;
  double inv_temperature_ = 1.0;
  std::int64_t vocab_local_ = 0;
  boost::random::mt19937_64 rng_;
  double comm_seconds_ = 0.0;

  // This round's draft distributions (rank 0), one per drafted token.
  std::vector<RowStats> q_stats_;           // dense
  std::vector<float> q_token_logit_;        // dense: the drafted token's logit in q
  std::vector<int> q_slot_;                 // dense: retained q rows
  std::vector<TokenDistribution> q_dists_;  // sparse
};

}  // namespace selfspec
