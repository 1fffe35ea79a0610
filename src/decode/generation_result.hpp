// What a generation run produced: the tokens, why it stopped, and how the time went — prefill and
// decode timings, and the per-round statistics of the decoding loop (for plain decoding every
// round verifies one token and drafts none, so α is 0 and M is 1).
#pragma once

#include <cstdint>
#include <vector>

namespace selfspec {

// Wall time by phase; together they cover the decoding loop after the first token.
struct PhaseTimes {
  double draft_s = 0.0;    // draft forwards (compute; their collectives count as comm)
  double verify_s = 0.0;   // verification forwards (compute)
  double control_s = 0.0;  // rank-0 decisions: token picking, controller, drafter, bookkeeping
  double comm_s = 0.0;     // all collectives: all-reduces, logit exchanges, control messages

  PhaseTimes& operator+=(const PhaseTimes& other);
};

struct DecodingStats {
  std::int64_t rounds = 0;    // = verification forwards
  std::int64_t drafted = 0;   // draft tokens proposed (draft steps; a tree's alternatives apart)
  std::int64_t accepted = 0;  // draft tokens accepted
  std::int64_t alternatives = 0;  // tree drafting: alternatives verified beside the drawn tokens
  std::int64_t alternatives_accepted = 0;  // accepted draft tokens that were alternatives
  std::int64_t draft_forwards = 0;
  std::int64_t verify_forwards = 0;
  std::int64_t round_tokens = 0;    // tokens the rounds emitted (all but the first)
  double draft_forward_s = 0.0;     // total wall time of draft forwards (incl. their all-reduces)
  double verify_forward_s = 0.0;    // total wall time of verification forwards (likewise)
  std::int64_t score_forwards = 0;  // forwards scoring candidate draft plans (SWIFT's search)
  double score_forward_s = 0.0;     // their wall time, KV save/restore included
  PhaseTimes phases;

  // Totals over several runs.
  DecodingStats& operator+=(const DecodingStats& other);

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
  // Mean wall time of one verification forward (for plain decoding: of one decode step).
  double seconds_per_verify_forward() const {
    return verify_forwards > 0 ? verify_forward_s / static_cast<double>(verify_forwards) : 0.0;
  }
  // Mean wall time of one draft forward.
  double seconds_per_draft_forward() const {
    return draft_forwards > 0 ? draft_forward_s / static_cast<double>(draft_forwards) : 0.0;
  }
};

inline PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& other) {
  draft_s += other.draft_s;
  verify_s += other.verify_s;
  control_s += other.control_s;
  comm_s += other.comm_s;
  return *this;
}

inline DecodingStats& DecodingStats::operator+=(const DecodingStats& other) {
  rounds += other.rounds;
  drafted += other.drafted;
  accepted += other.accepted;
  draft_forwards += other.draft_forwards;
  verify_forwards += other.verify_forwards;
  round_tokens += other.round_tokens;
  draft_forward_s += other.draft_forward_s;
  verify_forward_s += other.verify_forward_s;
  score_forwards += other.score_forwards;
  alternatives += other.alternatives;
  alternatives_accepted += other.alternatives_accepted;
  score_forward_s += other.score_forward_s;
  phases += other.phases;
  return *this;
}

struct GenerationTimings {
  double prefill_seconds = 0.0;  // prompt forward(s) + first token
  double decode_seconds = 0.0;   // every later token
  std::int64_t prefill_tokens = 0;
  std::int64_t decode_forwards = 0;  // tokens produced after the first
  double comm_seconds = 0.0;         // time inside collectives (all-reduce, gather, broadcast)
  double decode_tokens_per_second() const {
    return decode_seconds > 0.0 ? static_cast<double>(decode_forwards) / decode_seconds : 0.0;
  }
  double prefill_tokens_per_second() const {
    return prefill_seconds > 0.0 ? static_cast<double>(prefill_tokens) / prefill_seconds : 0.0;
  }
};

struct GenerationResult {
  std::vector<std::int32_t> tokens;  // generated ids (including a final EOS when one stopped it)
  bool stopped_on_eos = false;
  int interrupt_signal = 0;  // non-zero: stopped early by GenerationOptions::interrupt
  GenerationTimings timings;
  DecodingStats stats;
};

}  // namespace selfspec
