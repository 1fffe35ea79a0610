// SWIFT's on-the-fly skip-set search: see swift_drafter.hpp.
#include "draft/swift_drafter.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "draft/skip_set.hpp"

#include <boost/math/special_functions/binomial.hpp>

#include <array>
#include <cmath>

namespace selfspec {

namespace {

// Rank 0's word before each optimisation step.
struct SwiftCommand {
  std::uint32_t search = 0;  // 1: score plan_words; 0: the search is over
  std::uint32_t reason = 0;  // why it ended (index into kStopReasons)
  std::array<std::uint64_t, LayerPlan::kMaskWords> plan_words{};
};

constexpr const char* kStopReasons[] = {"", "stop score reached", "step budget spent",
                                        "no improvement", "every candidate scored"};

BinaryBayesOptions optimizer_options(const SwiftOptions& o, const SkipSearchSpace& space) {
  BinaryBayesOptions b;
  b.dims = space.dims();
  const int ones =
      std::clamp(static_cast<int>(std::lround(o.skip_ratio * 2.0 * space.num_layers())), 1, b.dims);
  b.min_ones = b.max_ones = ones;
  // The uniform set's interior part, topped up or cut to exactly `ones` sublayers.
  const SkipSet uniform = uniform_skip_set(space.num_layers(), o.skip_ratio);
  LayerPlan plan = uniform.plan(space.num_layers());
  for (int l : {0, space.num_layers() - 1}) {
    plan.set_attention(l, true);
    plan.set_mlp(l, true);
  }
  BinaryMask mask = space.mask(plan);
  for (std::size_t i = 0; i < mask.size() && count_ones(mask) < ones; ++i) mask[i] = 1;
  for (std::size_t i = mask.size(); i-- > 0 && count_ones(mask) > ones;) mask[i] = 0;
  b.initial_design = {mask};
  b.initial_random = 0;
  b.bayes_every = o.bayes_every;
  b.noise = 0.05;  // windows move: the same set scores differently from step to step
  b.seed = o.seed;
  return b;
}

}  // namespace

void SwiftOptions::validate() const {
  SELFSPEC_CHECK(skip_ratio > 0.0 && skip_ratio < 1.0, "--swift-ratio {} must be in (0, 1)",
                 skip_ratio);
  SELFSPEC_CHECK(window >= 1, "--swift-window {} must be at least 1", window);
  SELFSPEC_CHECK(bayes_every >= 1, "--swift-bayes-every {} must be at least 1", bayes_every);
  SELFSPEC_CHECK(max_steps >= 0, "--swift-max-steps {} must be non-negative", max_steps);
  SELFSPEC_CHECK(patience >= 1, "--swift-patience {} must be at least 1", patience);
  SELFSPEC_CHECK(stop_matchness > 0.0 && stop_matchness <= 1.0, "--swift-stop {} must be in (0, 1]",
                 stop_matchness);
  SELFSPEC_CHECK(min_window >= 1 && min_window <= window,
                 "--swift-min-window {} must be in [1, --swift-window {}]", min_window, window);
}

SwiftDrafter::SwiftDrafter(int num_layers, SwiftOptions options)
    : options_(options),
      space_(num_layers),
      optimizer_((options_.validate(), optimizer_options(options_, space_))),
      best_plan_(space_.plan(optimizer_.options().initial_design.front())) {}

std::string SwiftDrafter::stop_reason() const {
  if (best_score_ >= options_.stop_matchness) return kStopReasons[1];
  if (static_cast<int>(history_.size()) >= options_.max_steps) return kStopReasons[2];
  if (since_improvement_ >= options_.patience) return kStopReasons[3];
  const BinaryBayesOptions& b = optimizer_.options();
  // C(dims, ones) as a double: exact far beyond any step budget, and it cannot overflow.
  const double sets = boost::math::binomial_coefficient<double>(static_cast<unsigned>(b.dims),
                                                                static_cast<unsigned>(b.max_ones));
  if (static_cast<double>(history_.size()) >= sets) {
    return kStopReasons[4];
  }
  return "";
}

void SwiftDrafter::optimisation_step(DraftContext& context) {
  if (!searching_ || context.generated() < options_.min_window) return;
  SwiftCommand command;
  if (context.is_root()) {
    const std::string reason = stop_reason();
    for (std::uint32_t i = 1; i < std::size(kStopReasons); ++i) {
      if (reason == kStopReasons[i]) command.reason = i;
    }
    command.search = reason.empty() ? 1 : 0;
    if (command.search != 0) space_.plan(optimizer_.propose(history_)).to_mask(command.plan_words);
  }
  context.share(std::as_writable_bytes(std::span(&command, 1)));
  if (command.search == 0) {
    searching_ = false;
    stopped_because_ = kStopReasons[command.reason];
    if (context.is_root()) {
      log::debug("swift: search over after {} steps ({}); best matchness {:.3f}: {}",
                 history_.size(), stopped_because_, best_score_, best_plan_.describe());
    }
    return;
  }
  const LayerPlan candidate = LayerPlan::from_mask(space_.num_layers(), command.plan_words);
  const DraftMatch match = context.score_plan(candidate, options_.window);
  if (!context.is_root()) return;
  const double score = match.rate();
  history_.push_back({space_.mask(candidate), score});
  if (score > best_score_) {
    best_score_ = score;
    best_plan_ = candidate;
    since_improvement_ = 0;
  } else {
    ++since_improvement_;
  }
}

void SwiftDrafter::propose(DraftContext& context, Draft& draft) {
  optimisation_step(context);
  Drafter::propose(context, draft);
}

nlohmann::json SwiftDrafter::state() const {
  return {{"searching", searching_},
          {"steps", history_.size()},
          {"stopped_because", stopped_because_},
          {"best_matchness", best_score_},
          {"skip_ratio", options_.skip_ratio},
          {"best_attention", best_plan_.skipped_attention()},
          {"best_mlp", best_plan_.skipped_mlp()}};
}

}  // namespace selfspec
