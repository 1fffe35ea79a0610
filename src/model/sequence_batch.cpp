#include "model/sequence_batch.hpp"

#include "core/error.hpp"

namespace selfspec {

SequenceBatch::SequenceBatch(const LlamaModel& model, std::int64_t sequences,
                             std::int64_t capacity_per_sequence)
    : kv_([&] {
        SELFSPEC_CHECK(sequences > 0 && capacity_per_sequence > 0,
                       "a sequence batch needs at least one sequence of at least one slot (got {} "
                       "x {})",
                       sequences, capacity_per_sequence);
        return model.make_kv_cache(sequences * capacity_per_sequence);
      }()),
      capacity_(capacity_per_sequence),
      lengths_(static_cast<std::size_t>(sequences), 0) {}

std::int64_t SequenceBatch::length(std::int64_t sequence) const {
  SELFSPEC_CHECK(sequence >= 0 && sequence < size(), "sequence {} is outside the batch [0, {})",
                 sequence, size());
  return lengths_[static_cast<std::size_t>(sequence)];
}

void SequenceBatch::truncate(std::int64_t sequence, std::int64_t length) {
  const std::int64_t current = this->length(sequence);
  SELFSPEC_CHECK(length >= 0 && length <= current,
                 "sequence {}: truncate to {} is outside [0, {}] (its current length)", sequence,
                 length, current);
  lengths_[static_cast<std::size_t>(sequence)] = length;
  if (size() == 1) kv_.truncate(length);
}

LogitRows SequenceBatch::forward(LlamaModel& model, std::span<const Step> steps,
                                 std::vector<float>& logits, const ForwardObserver* observer,
                                 std::span<const std::string_view> observe_only) {
  SELFSPEC_CHECK(!steps.empty(), "a sequence batch's forward needs at least one step");
  tokens_.clear();
  positions_.clear();
  logit_rows_.clear();
  segments_.clear();
  std::vector<bool> seen(lengths_.size(), false);
  for (const Step& step : steps) {
    const std::int64_t past = length(step.sequence);
    auto&& in_pass = seen[static_cast<std::size_t>(step.sequence)];
    SELFSPEC_CHECK(!in_pass, "sequence {} appears twice in one pass", step.sequence);
    in_pass = true;
    const auto n = static_cast<std::int64_t>(step.tokens.size());
    SELFSPEC_CHECK(n > 0, "sequence {}: a step needs at least one token", step.sequence);
    SELFSPEC_CHECK(past + n <= capacity_,
                   "sequence {}: {} cached + {} new tokens exceed its {} slots", step.sequence,
                   past, n, capacity_);
    const auto first = static_cast<std::int64_t>(tokens_.size());
    for (std::int32_t row : step.logit_rows) {
      SELFSPEC_CHECK(row >= 0 && row < n, "sequence {}: logit row {} is outside [0, {})",
                     step.sequence, row, n);
      logit_rows_.push_back(static_cast<std::int32_t>(first + row));
    }
    tokens_.insert(tokens_.end(), step.tokens.begin(), step.tokens.end());
    for (std::int64_t i = 0; i < n; ++i) positions_.push_back(static_cast<std::int32_t>(past + i));
    segments_.push_back({first, n, step.sequence * capacity_, past});
  }
  ForwardArgs args;
  args.tokens = tokens_;
  args.positions = positions_;
  args.logit_rows = logit_rows_;
  args.observer = observer;
  args.observe_only = observe_only;
  // One sequence is a plain forward over the cache, whose length follows the sequence's: it runs
  // on every backend (device backends take no segments).
  if (size() > 1) args.segments = segments_;
  const LogitRows rows = model.forward(args, kv_, logits);
  for (const KvSegment& segment : segments_) {
    lengths_[static_cast<std::size_t>(segment.kv_offset / capacity_)] += segment.n_tokens;
  }
  return rows;
}

}  // namespace selfspec
