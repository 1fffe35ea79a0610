// The latency statistics of `selfspec bench-serving`: see serving_stats.hpp.
#include "launch/bench/serving_stats.hpp"

#include <algorithm>
#include <cmath>

namespace selfspec::launch {

RequestFigures request_figures(const RequestRecord& record) {
  RequestFigures figures;
  const double first = record.token_s.empty() ? record.end_s : record.token_s.front();
  figures.ttft_s = first - record.arrival_s;
  figures.e2e_s = record.end_s - record.arrival_s;
  const double decoding = record.end_s - first;
  // The tokens chosen after the first, over the time after it (1 / time per output token, as
  // `bench`'s decode tokens/s counts them).
  const auto after_first = static_cast<double>(std::max<std::size_t>(record.tokens.size(), 1) - 1);
  figures.tokens_per_s = decoding > 0.0 ? after_first / decoding : 0.0;
  for (std::size_t i = 1; i < record.token_s.size(); ++i) {
    figures.itl_s.push_back(record.token_s[i] - record.token_s[i - 1]);
  }
  return figures;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

Distribution distribution(const std::vector<double>& values) {
  Distribution d;
  d.count = static_cast<std::int64_t>(values.size());
  if (values.empty()) return d;
  d.p50 = percentile(values, 50.0);
  d.p99 = percentile(values, 99.0);
  double sum = 0.0;
  for (const double v : values) sum += v;
  d.mean = sum / static_cast<double>(values.size());
  return d;
}

ServingFigures serving_figures(std::span<const RequestRecord> requests, double wall_s) {
  ServingFigures f;
  f.requests = static_cast<std::int64_t>(requests.size());
  f.wall_s = wall_s;
  std::vector<double> ttft, itl, e2e;
  double request_tps = 0.0, alpha = 0.0, m = 0.0;
  for (const RequestRecord& record : requests) {
    const RequestFigures r = request_figures(record);
    f.generated_tokens += static_cast<std::int64_t>(record.tokens.size());
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    request_tps += r.tokens_per_s;
    alpha += record.stats.acceptance_rate();
    m += record.stats.mean_accepted_length();
  }
  f.tokens_per_s = wall_s > 0.0 ? static_cast<double>(f.generated_tokens) / wall_s : 0.0;
  f.ttft_s = distribution(ttft);
  f.itl_s = distribution(itl);
  f.e2e_s = distribution(e2e);
  if (!requests.empty()) {
    const auto n = static_cast<double>(requests.size());
    f.mean_request_tokens_per_s = request_tps / n;
    f.mean_acceptance_rate = alpha / n;
    f.mean_accepted_length = m / n;
  }
  return f;
}

}  // namespace selfspec::launch
