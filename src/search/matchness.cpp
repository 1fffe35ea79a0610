// Matchness of a candidate draft plan: see matchness.hpp.
#include "search/matchness.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <numeric>

namespace selfspec {

MatchnessEvaluator::MatchnessEvaluator(LlamaModel& model, Communicator& comm,
                                       std::span<CalibrationSequence> set, int window)
    : model_(model),
      comm_(comm),
      set_(set),
      window_(window),
      logits_reader_(make_sharded_logits(LogitsMode::kLocal, comm, model.shard())) {
  SELFSPEC_CHECK(window >= 1, "the matchness window must be at least 1 token, not {}", window);
  for (const CalibrationSequence& s : set_) {
    positions_ += static_cast<std::int64_t>(s.continuation.size());
    saved_.push_back(snapshot(s));
  }
}

// Rows [n − 1, n − 1 + g) of every layer's K and V: the inputs' slots of the continuation.
MatchnessEvaluator::KvRows MatchnessEvaluator::snapshot(const CalibrationSequence& s) const {
  const KvCache& kv = s.kv;
  KvRows rows;
  rows.begin = static_cast<std::int64_t>(s.prompt.size()) - 1;
  rows.count = static_cast<std::int64_t>(s.continuation.size());
  SELFSPEC_CHECK(kv.length() == rows.begin + rows.count,
                 "calibration KV holds {} tokens, "
                 "expected {}",
                 kv.length(), rows.begin + rows.count);
  const std::int64_t block = rows.count * kv.head_dim();
  rows.data.resize(static_cast<std::size_t>(kv.num_layers() * 2 * kv.kv_heads() * block));
  float* out = rows.data.data();
  for (std::int64_t l = 0; l < kv.num_layers(); ++l) {
    for (const float* tensor : {kv.keys(l), kv.values(l)}) {
      for (std::int64_t h = 0; h < kv.kv_heads(); ++h) {
        const float* src = tensor + (h * kv.capacity() + rows.begin) * kv.head_dim();
        model_.backend().download(out, src, static_cast<std::size_t>(block) * sizeof(float));
        out += block;
      }
    }
  }
  return rows;
}

void MatchnessEvaluator::restore(CalibrationSequence& s, const KvRows& rows) const {
  KvCache& kv = s.kv;
  const std::int64_t block = rows.count * kv.head_dim();
  const float* in = rows.data.data();
  for (std::int64_t l = 0; l < kv.num_layers(); ++l) {
    for (float* tensor : {kv.keys(l), kv.values(l)}) {
      for (std::int64_t h = 0; h < kv.kv_heads(); ++h) {
        float* dst = tensor + (h * kv.capacity() + rows.begin) * kv.head_dim();
        model_.backend().upload(dst, in, static_cast<std::size_t>(block) * sizeof(float));
        in += block;
      }
    }
  }
  kv.truncate(rows.begin);
  kv.extend(rows.count);
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
    restore(s, saved_[k]);
  }
  return total;
}

}  // namespace selfspec
