// Forward timing: see forward_timing.hpp.
#include "model/forward_timing.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>

namespace selfspec {

double median_of(std::vector<double> values) {
  SELFSPEC_CHECK(!values.empty(), "median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::vector<std::int32_t> filler_tokens(std::int64_t n, std::int64_t vocab) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    ids[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7919 + 13) % vocab);
  return ids;
}

void prefill_filler(LlamaModel& model, KvCache& kv, std::int64_t context) {
  const std::vector<std::int32_t> tokens = filler_tokens(context, model.config().vocab_size);
  std::vector<std::int32_t> positions(tokens.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<float> logits;
  ForwardArgs args;
  args.tokens = tokens;
  args.positions = positions;
  model.forward(args, kv, logits);
}

double time_forward_batch(LlamaModel& model, KvCache& kv, const LayerPlan& plan,
                          std::int64_t context, int t, int rows, int forwards) {
  const std::vector<std::int32_t> tokens = filler_tokens(t, model.config().vocab_size);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(t));
  std::iota(positions.begin(), positions.end(), static_cast<std::int32_t>(context));
  std::vector<std::int32_t> logit_rows(static_cast<std::size_t>(rows));
  std::iota(logit_rows.begin(), logit_rows.end(), t - rows);
  std::vector<float> logits;
  ForwardArgs args;
  args.tokens = tokens;
  args.positions = positions;
  args.draft.plan = &plan;
  args.logit_rows = logit_rows;
  model.comm().barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int f = 0; f < forwards; ++f) {
    model.forward(args, kv, logits);
    kv.truncate(context);
  }
  model.comm().barrier();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / forwards;
}

VerifyCost measure_verify_cost(LlamaModel& model, const VerifyCostOptions& options) {
  SELFSPEC_CHECK(options.forwards >= 1 && options.rounds >= 1 && options.max_draft >= 1 &&
                     options.context >= 1,
                 "verification cost options must be positive");
  KvCache kv = model.make_kv_cache(options.context + options.max_draft + 1);
  prefill_filler(model, kv, options.context);
  const LayerPlan full = LayerPlan::full(static_cast<int>(model.config().num_layers));
  std::vector<std::vector<double>> samples(static_cast<std::size_t>(options.max_draft) + 1);
  log::Progress progress("timing verification forwards v(gamma) (rounds)", options.rounds);
  for (int round = 0; round < options.rounds; ++round) {
    for (int g = 0; g <= options.max_draft; ++g) {
      samples[static_cast<std::size_t>(g)].push_back(
          time_forward_batch(model, kv, full, options.context, g + 1, g + 1, options.forwards));
    }
    progress.update(round + 1);
  }
  progress.finish();
  VerifyCost cost;
  for (const std::vector<double>& s : samples) cost.forward_s.push_back(median_of(s));
  for (const double s : cost.forward_s) cost.v.push_back(s / cost.forward_s[0]);
  return cost;
}

}  // namespace selfspec
