// Matchness of a candidate draft plan: see matchness.hpp.
#include "search/matchness.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <numeric>

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

MatchCount MatchnessEvaluator::score_window(CalibrationSequence& s, const LayerPlan& plan,
                                            std::int64_t j, std::int64_t length) {
  const auto n = static_cast<std::int64_t>(s.prompt.size());
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(length));
  std::vector<std::int32_t> positions(static_cast<std::size_t>(length));
  for (std::int64_t i = 0; i < length; ++i) {
    const std::int64_t target = j + i;  // continuation index this row predicts
    tokens[static_cast<std::size_t>(i)] =
        target == 0 ? s.prompt.back() : s.continuation[static_cast<std::size_t>(target - 1)];
    positions[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(n - 1 + target);
  }
  std::vector<std::int32_t> rows(static_cast<std::size_t>(length));
  std::iota(rows.begin(), rows.end(), 0);
  s.kv.truncate(n - 1 + j);
  ForwardArgs args;
  args.tokens = tokens;
  args.positions = positions;
  args.plan = &plan;
  args.logit_rows = rows;
  args.draft_vocabulary = vocabulary_;
  model_.forward(args, s.kv, logits_);
  logits_reader_->set_rows(logits_, length);
  const std::vector<RowStats> stats = logits_reader_->row_stats(1.0);
  MatchCount count;
  if (comm_.rank() != 0) return count;
  for (std::int64_t i = 0; i < length; ++i) {
    count.positions += 1;
    if (stats[static_cast<std::size_t>(i)].argmax ==
        s.continuation[static_cast<std::size_t>(j + i)]) {
      count.matches += 1;
    }
  }
  return count;
}

MatchCount MatchnessEvaluator::evaluate(const LayerPlan& plan) {
  MatchCount total;
  for (std::size_t k = 0; k < set_.size(); ++k) {
    CalibrationSequence& s = set_[k];
    const auto g = static_cast<std::int64_t>(s.continuation.size());
    const std::int64_t windows = (g + window_ - 1) / window_;
    for (std::int64_t w = windows - 1; w >= 0; --w) {
      const std::int64_t j = w * window_;
      const MatchCount c = score_window(s, plan, j, std::min<std::int64_t>(window_, g - j));
      total.matches += c.matches;
      total.positions += c.positions;
    }
    restore_kv_rows(model_.backend(), s.kv, saved_[k]);
  }
  return total;
}

}  // namespace selfspec
