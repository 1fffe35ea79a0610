// Matchness of a candidate draft plan (SWIFT §4.1, eq. 3): the fraction of positions at which the
// draft's greedy token equals the target's own next token, scored against a calibration set
// (calibration_set.hpp). It is the per-token acceptance α of greedy verification that the
// expected-speedup model (expected_speedup.hpp) takes.
//
// How a sequence is scored: its continuation is cut into windows of `window` tokens (the length
// of a typical draft). For the window starting at continuation index j, the KV cache is cut back
// to the target's KV of prompt + continuation[0 .. j−1] and the draft plan runs one parallel
// forward over the window's input tokens (the token before each target), so — as in a real
// drafting round — a draft token sees the target's KV for everything committed and the draft's own
// KV only for the earlier tokens of its window. Windows run from the last to the first: a window
// overwrites only KV rows at or after its start, which later-scored (earlier) windows never read.
// Afterwards the continuation's rows are restored from a host copy of the target's KV taken when
// the evaluator was built, so every evaluation starts from the same cache and is deterministic.
//
// With a pruned draft vocabulary (model/draft_vocabulary.hpp) the draft forwards compute the LM
// head over the kept ids only, as the drafts will.
//
// Collective: every rank passes the same plan; greedy picks use LocalReductionLogits (per-shard
// argmax, only scalars cross ranks); the counts are meaningful on rank 0.
#pragma once

#include "comm/communicator.hpp"
#include "verify/sharded_logits.hpp"
#include "draft/drafter.hpp"
#include "model/kv_rows.hpp"
#include "model/layer_plan.hpp"
#include "model/llama_model.hpp"
#include "search/calibration_set.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace selfspec {

class MatchnessEvaluator {
 public:
  // Keeps references to `model`, `set` and `vocabulary` (all must outlive the evaluator).
  // window >= 1; vocabulary: nullptr for the full LM head.
  MatchnessEvaluator(LlamaModel& model, Communicator& comm, std::span<CalibrationSequence> set,
                     int window, const DraftVocabulary* vocabulary = nullptr);

  DraftMatch evaluate(const LayerPlan& plan);
  std::int64_t positions() const { return positions_; }

 private:
  DraftMatch score_window(CalibrationSequence& s, const LayerPlan& plan, std::int64_t j,
                          std::int64_t length);

  LlamaModel& model_;
  Communicator& comm_;
  std::span<CalibrationSequence> set_;
  int window_;
  const DraftVocabulary* vocabulary_;
  std::int64_t positions_ = 0;
  std::vector<KvRows> saved_;  // the target's K/V rows of each continuation
  std::unique_ptr<ShardedLogits> logits_reader_;
  std::vector<float> logits_;
};

}  // namespace selfspec
