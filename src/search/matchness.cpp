// Matchness of a candidate draft plan: see matchness.hpp.
#include "search/matchness.hpp"

#include "core/error.hpp"
#include "verify/greedy_matches.hpp"

#include <algorithm>

namespace selfspec {

MatchnessEvaluator::MatchnessEvaluator(LlamaModel& model, Communicator& comm,
                                       std::span<CalibrationSequence> set, int window,
                                       const DraftVocabulary* vocabulary)
    : model_(model),
      comm_(comm),
      set_(set),
      window_(window),
      vocabulary_(vocabulary),
      logits_reader_(make_sharded_logits(LogitsMode::kLocal, comm, model.shard())) {
  SELFSPEC_CHECK(window >= 1, "the matchness window must be at least 1 token, not {}", window);
  for (const CalibrationSequence& s : set_) {
    positions_ += static_cast<std::int64_t>(s.continuation.size());
    // Rows [n − 1, n − 1 + g): the slots of the windows' input tokens.
    const auto n = static_cast<std::int64_t>(s.prompt.size());
    const auto g = static_cast<std::int64_t>(s.continuation.size());
    SELFSPEC_CHECK(s.kv.length() == n - 1 + g, "calibration KV holds {} tokens, expected {}",
                   s.kv.length(), n - 1 + g);
    saved_.push_back(save_kv_rows(model.backend(), s.kv, n - 1, g));
  }
}

DraftMatch MatchnessEvaluator::score_window(CalibrationSequence& s, const LayerPlan& plan,
                                            std::int64_t j, std::int64_t length) {
  // Row i predicts continuation[j + i] from the token before it (the prompt's last for j + i = 0).
  const auto n = static_cast<std::int64_t>(s.prompt.size());
  std::vector<std::int32_t> inputs;
  if (j == 0) inputs.push_back(s.prompt.back());
  inputs.insert(inputs.end(), s.continuation.begin() + std::max<std::int64_t>(j - 1, 0),
                s.continuation.begin() + j + length - 1);
  const std::span<const std::int32_t> targets =
      std::span<const std::int32_t>(s.continuation)
          .subspan(static_cast<std::size_t>(j), static_cast<std::size_t>(length));
  return count_greedy_matches(model_, s.kv, *logits_reader_, plan, vocabulary_, inputs, targets,
                              n - 1 + j, logits_);
}

DraftMatch MatchnessEvaluator::evaluate(const LayerPlan& plan) {
  DraftMatch total;
  for (std::size_t k = 0; k < set_.size(); ++k) {
    CalibrationSequence& s = set_[k];
    const auto g = static_cast<std::int64_t>(s.continuation.size());
    const std::int64_t windows = (g + window_ - 1) / window_;
    for (std::int64_t w = windows - 1; w >= 0; --w) {
      const std::int64_t j = w * window_;
      const DraftMatch c = score_window(s, plan, j, std::min<std::int64_t>(window_, g - j));
      total.matches += c.matches;
      total.positions += c.positions;
    }
    restore_kv_rows(model_.backend(), s.kv, saved_[k]);
  }
  return total;
}

}  // namespace selfspec
