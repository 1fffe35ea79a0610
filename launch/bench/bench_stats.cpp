#include "launch/bench/bench_stats.hpp"

#include <algorithm>

namespace selfspec::launch {

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

double ratio(double a, double b) {
  return b > 0.0 ? a / b : 0.0;
}

std::string draft_vocab_name(std::int64_t draft_vocab) {
  return draft_vocab > 0 ? std::to_string(draft_vocab) : std::string("full");
}

void ArSamples::add(const GenerationTimings& timings) {
  prefill_tps.push_back(timings.prefill_tokens_per_second());
  decode_tps.push_back(timings.decode_tokens_per_second());
  decode_ms.push_back(
      ratio(1e3 * timings.decode_seconds, static_cast<double>(timings.decode_forwards)));
}

void ArTotals::add(const GenerationResult& result) {
  tokens += result.timings.decode_forwards;
  seconds += result.timings.decode_seconds;
  stats += result.stats;
}

void SpecTotals::add(const GenerationResult& result) {
  tokens += result.timings.decode_forwards;
  seconds += result.timings.decode_seconds;
  stats += result.stats;
}

void SpecTotals::add(const SpecTotals& other) {
  tokens += other.tokens;
  seconds += other.seconds;
  stats += other.stats;
  lossless_prompts += other.lossless_prompts;
  prompts += other.prompts;
  last_controller_state = other.last_controller_state;
  last_drafter_state = other.last_drafter_state;
}

SpecFigures compare_with_autoregressive(const SpecTotals& spec, const ArTotals& ar) {
  const DecodingStats& s = spec.stats;
  const double ar_forward = ar.seconds_per_forward();
  SpecFigures f;
  f.speedup = ratio(spec.tokens_per_second(), ar.tokens_per_second());
  f.acceptance_rate = s.acceptance_rate();
  f.mean_accepted_length = s.mean_accepted_length();
  f.cost_ratio = ratio(s.seconds_per_draft_forward(), ar_forward);
  f.verify_cost_ratio = ratio(s.seconds_per_verify_forward(), ar_forward);
  const double m = f.mean_accepted_length;
  const double alpha = f.acceptance_rate;
  f.expected_speedup = ratio(m * alpha, (m - 1.0) * f.cost_ratio + alpha);
  f.efficiency = ratio(f.speedup, f.expected_speedup);
  return f;
}

}  // namespace selfspec::launch
