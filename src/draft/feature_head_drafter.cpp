#include "draft/feature_head_drafter.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace selfspec {
namespace {

constexpr std::string_view kFinalResidual = "final_residual";

}  // namespace

FeatureHeadDrafter::FeatureHeadDrafter(int num_layers, std::int64_t hidden_size, std::string head)
    : hidden_(hidden_size), plan_(LayerPlan::full(num_layers)), head_(std::move(head)) {
  SELFSPEC_CHECK(hidden_size > 0, "a feature-head drafter for hidden size {}", hidden_size);
  keep_prompt_ = [this](std::string_view name, int, std::span<const float> data, std::int64_t n) {
    if (name == kFinalResidual) add_pending(data, 0, n);
  };
  keep_verification_ = [this](std::string_view name, int, std::span<const float> data,
                              std::int64_t) {
    if (name == kFinalResidual) verification_.assign(data.begin(), data.end());
  };
  keep_output_ = [this](std::string_view name, int, std::span<const float> data, std::int64_t n) {
    if (name != kFinalResidual || n < 1) return;
    output_.assign(data.end() - hidden_, data.end());
  };
}

const ForwardObserver* FeatureHeadDrafter::begin_request(std::int64_t prompt_tokens) {
  (void)prompt_tokens;
  head_length_ = 0;
  pending_.clear();
  verification_.clear();
  return &keep_prompt_;
}

void FeatureHeadDrafter::add_pending(std::span<const float> rows, std::int64_t first,
                                     std::int64_t count) {
  const auto begin = rows.begin() + first * hidden_;
  SELFSPEC_CHECK(first >= 0 && (first + count) * hidden_ <= static_cast<std::int64_t>(rows.size()),
                 "feature head: rows [{}, {}) of a forward of {} rows", first, first + count,
                 static_cast<std::int64_t>(rows.size()) / hidden_);
  pending_.insert(pending_.end(), begin, begin + count * hidden_);
}

void FeatureHeadDrafter::verified(const Draft& draft, const Verdict& verdict) {
  // Row 0 is the round's root, row 1 + i draft node i: the committed positions, in order.
  SELFSPEC_CHECK(!verification_.empty(),
                 "feature head: a verification without its final residual rows");
  const std::span<const float> rows(verification_);
  add_pending(rows, 0, 1);
  for (const int node : verdict.accepted) {
    SELFSPEC_CHECK(node >= 0 && node < draft.size(), "feature head: accepted node {} of {}", node,
                   draft.size());
    add_pending(rows, 1 + node, 1);
  }
  verification_.clear();
}

int FeatureHeadDrafter::add_step(Draft& draft, const DraftStep& step, int parent) {
  const int drawn = draft.add(step.token, parent, step.confidence);
  for (const std::int32_t alternative : step.alternatives)
    draft.add_alternative(alternative, parent);
  return drawn;
}

void FeatureHeadDrafter::propose(DraftContext& context, Draft& draft) {
  // The committed rows the head has not read: positions [head_length_, n), each with the token
  // after it; the last one's (n - 1's) token is the round's root, so its output drafts.
  context.history(history_);
  const auto n = static_cast<std::int64_t>(history_.size()) - 1;
  const std::int64_t rows = n - head_length_;
  SELFSPEC_CHECK(rows >= 1 && static_cast<std::int64_t>(pending_.size()) == rows * hidden_,
                 "feature head: {} committed positions past the head's {} but {} pending rows", n,
                 head_length_, static_cast<std::int64_t>(pending_.size()) / hidden_);
  tokens_.assign(history_.begin() + head_length_ + 1, history_.end());
  positions_.resize(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    positions_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(head_length_ + i);
  }
  DraftStep step = context.step_rows(
      draft, Draft::kRoot, {tokens_, positions_, {pending_, head_length_}, &keep_output_});
  committed_rows_ += rows;
  ++rounds_;
  head_length_ = n;
  pending_.clear();
  int parent = add_step(draft, step, Draft::kRoot);
  while (step.more) {
    // Depth d + 1 reads (o of depth d, the token drafted at depth d) at position n + d - 1.
    input_ = output_;
    const std::int32_t token = step.token;
    const auto position = static_cast<std::int32_t>(n + draft.depth(parent) - 1);
    step = context.step_rows(draft, parent,
                             {{&token, 1}, {&position, 1}, {input_, position}, &keep_output_});
    parent = add_step(draft, step, parent);
  }
}

nlohmann::json FeatureHeadDrafter::state() const {
  return {{"feature_head", head_}, {"rounds", rounds_}, {"committed_rows", committed_rows_}};
}

}  // namespace selfspec
