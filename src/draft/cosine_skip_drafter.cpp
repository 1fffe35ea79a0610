#include "draft/cosine_skip_drafter.hpp"

#include "core/error.hpp"

#include <nlohmann/json.hpp>

namespace selfspec {

CosineSkipDrafter::CosineSkipDrafter(int num_layers, AsdParams params)
    : num_layers_(num_layers), params_(params) {
  SELFSPEC_CHECK(num_layers_ >= 1 && num_layers_ <= LayerPlan::kMaxLayers,
                 "asd drafter: {} layers is outside [1, {}]", num_layers_, LayerPlan::kMaxLayers);
  params_.validate(num_layers_);
}

const ForwardObserver* CosineSkipDrafter::begin_request(std::int64_t prompt_tokens) {
  (void)prompt_tokens;
  accumulator_.reset(num_layers_);
  acs_.clear();
  skips_.reset();
  observer_ = [this](std::string_view name, int layer, std::span<const float> data,
                     std::int64_t n_tokens) { accumulator_.observe(name, layer, data, n_tokens); };
  return &observer_;
}

DraftPlan CosineSkipDrafter::next_plan() {
  if (!skips_) {
    acs_ = accumulator_.averages();  // throws when no prompt was observed
    skips_ = adaptive_draft_skip_set(acs_, params_);
    plan_ = skips_->plan(num_layers_);
  }
  return {plan_};
}

nlohmann::json CosineSkipDrafter::state() const {
  if (!skips_) return nullptr;
  return {{"alpha", params_.alpha},
          {"m", params_.m},
          {"n", params_.n},
          {"prompt_tokens", accumulator_.tokens()},
          {"acs", acs_},
          {"skip_set", nlohmann::json::parse(skips_->describe())},
          {"skipped_sublayers", plan_.skipped_count()}};
}

}  // namespace selfspec
