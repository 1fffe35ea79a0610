// SWIFT's matchness for one window: see greedy_matches.hpp.
#include "verify/greedy_matches.hpp"

#include "core/error.hpp"

#include <numeric>

namespace selfspec {

DraftMatch count_greedy_matches(LlamaModel& model, KvCache& kv, ShardedLogits& reader,
                                const LayerPlan& plan, const DraftVocabulary* vocabulary,
                                std::span<const std::int32_t> inputs,
                                std::span<const std::int32_t> targets, std::int64_t first_position,
                                std::vector<float>& logits) {
  SELFSPEC_CHECK(inputs.size() == targets.size(), "a window of {} inputs has {} targets",
                 inputs.size(), targets.size());
  const auto w = static_cast<std::int64_t>(inputs.size());
  std::vector<std::int32_t> positions(inputs.size());
  std::iota(positions.begin(), positions.end(), static_cast<std::int32_t>(first_position));
  std::vector<std::int32_t> rows(inputs.size());
  std::iota(rows.begin(), rows.end(), 0);
  kv.truncate(first_position);
  ForwardArgs args;
  args.tokens = inputs;
  args.positions = positions;
  args.draft.plan = &plan;
  args.logit_rows = rows;
  args.draft.vocabulary = vocabulary;
  model.forward(args, kv, logits);
  reader.set_rows(logits, w);
  const std::vector<std::int32_t> argmax = reader.row_argmax();
  DraftMatch match;
  if (!model.comm().is_root()) return match;
  match.positions = w;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (argmax[i] == targets[i]) ++match.matches;
  }
  return match;
}

}  // namespace selfspec
