// The report of `selfspec bench-serving`: see serving_report.hpp.
#include "launch/bench/serving_report.hpp"

#include "launch/bench/bench_stats.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace selfspec::launch {

void compare_with_plain(std::vector<ServingRun>& runs) {
  for (ServingRun& run : runs) {
    const auto plain = std::find_if(runs.begin(), runs.end(), [&](const ServingRun& other) {
      return other.mode == "plain" && other.round == run.round &&
             other.concurrency == run.concurrency;
    });
    if (plain == runs.end() || plain->figures.tokens_per_s <= 0.0) continue;
    run.speedup_vs_plain = run.figures.tokens_per_s / plain->figures.tokens_per_s;
  }
}

namespace {

void add_batch_stats(SpeculativeBatchStats& total, const SpeculativeBatchStats& run) {
  total.passes += run.passes;
  total.draft_passes += run.draft_passes;
  total.tokens += run.tokens;
  total.max_sequences = std::max(total.max_sequences, run.max_sequences);
  total.seconds += run.seconds;
}

ServingSummary summarize_one(std::span<const ServingRun> runs, std::int64_t concurrency,
                             const std::string& mode) {
  ServingSummary summary;
  summary.concurrency = concurrency;
  summary.mode = mode;
  std::vector<RequestRecord> requests;
  std::vector<double> speedups;
  double wall_s = 0.0;
  for (const ServingRun& run : runs) {
    if (run.concurrency != concurrency || run.mode != mode) continue;
    ++summary.rounds;
    requests.insert(requests.end(), run.requests.begin(), run.requests.end());
    wall_s += run.figures.wall_s;
    add_batch_stats(summary.batch, run.batch);
    if (run.speedup_vs_plain) speedups.push_back(*run.speedup_vs_plain);
  }
  summary.figures = serving_figures(requests, wall_s);
  if (!speedups.empty()) summary.speedup_vs_plain = median(speedups);
  return summary;
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

std::vector<ServingSummary> summarize(std::span<const ServingRun> runs) {
  std::vector<ServingSummary> summaries;
  for (const ServingRun& run : runs) {
    const bool known = std::any_of(summaries.begin(), summaries.end(), [&](const auto& s) {
      return s.concurrency == run.concurrency && s.mode == run.mode;
    });
    if (!known) summaries.push_back(summarize_one(runs, run.concurrency, run.mode));
  }
  return summaries;
}

nlohmann::json to_json(const SpeculativeBatchStats& stats) {
  return {{"passes", stats.passes},
          {"draft_passes", stats.draft_passes},
          {"tokens", stats.tokens},
          {"max_sequences", stats.max_sequences},
          {"seconds", stats.seconds}};
}

nlohmann::json to_json(const Distribution& distribution) {
  return {{"p50", distribution.p50},
          {"p99", distribution.p99},
          {"mean", distribution.mean},
          {"count", distribution.count}};
}

nlohmann::json to_json(const ServingFigures& figures) {
  return {{"requests", figures.requests},
          {"generated_tokens", figures.generated_tokens},
          {"wall_s", figures.wall_s},
          {"tokens_per_s", figures.tokens_per_s},
          {"mean_request_tokens_per_s", figures.mean_request_tokens_per_s},
          {"ttft_s", to_json(figures.ttft_s)},
          {"itl_s", to_json(figures.itl_s)},
          {"e2e_s", to_json(figures.e2e_s)},
          {"mean_acceptance_rate", figures.mean_acceptance_rate},
          {"mean_accepted_length", figures.mean_accepted_length}};
}

nlohmann::json to_json(const RequestRecord& record, bool tokens) {
  const RequestFigures figures = request_figures(record);
  nlohmann::json out = {
      {"request", record.request},
      {"prompt", record.prompt},
      {"prompt_tokens", record.prompt_tokens},
      {"arrival_s", record.arrival_s},
      {"first_token_s", record.token_s.empty() ? record.end_s : record.token_s.front()},
      {"end_s", record.end_s},
      {"ttft_s", figures.ttft_s},
      {"e2e_s", figures.e2e_s},
      {"tokens_per_s", figures.tokens_per_s},
      {"generated_tokens", record.tokens.size()},
      {"acceptance_rate", record.stats.acceptance_rate()},
      {"mean_accepted_length", record.stats.mean_accepted_length()},
      {"drafted", record.stats.drafted},
      {"accepted", record.stats.accepted},
      {"verify_forwards", record.stats.verify_forwards},
      {"stopped_on_eos", record.stopped_on_eos},
      {"itl_s", figures.itl_s}};
  if (tokens) out["tokens"] = record.tokens;
  return out;
}

nlohmann::json to_json(const ServingRun& run, bool tokens) {
  nlohmann::json out = to_json(run.figures);
  out["round"] = run.round;
  out["concurrency"] = run.concurrency;
  out["mode"] = run.mode;
  out["batch"] = to_json(run.batch);
  out["speedup_vs_plain"] = optional_json(run.speedup_vs_plain);
  out["requests"] = nlohmann::json::array();
  for (const RequestRecord& record : run.requests)
    out["requests"].push_back(to_json(record, tokens));
  return out;
}

nlohmann::json to_json(const ServingSummary& summary) {
  nlohmann::json out = to_json(summary.figures);
  out["concurrency"] = summary.concurrency;
  out["mode"] = summary.mode;
  out["rounds"] = summary.rounds;
  out["batch"] = to_json(summary.batch);
  out["speedup_vs_plain"] = optional_json(summary.speedup_vs_plain);
  return out;
}

void print_serving_table(std::FILE* to, std::span<const ServingSummary> summaries) {
  fmt::print(to, "  {:>4} {:>7} {:>9} {:>8} {:>9} {:>17} {:>15} {:>15} {:>6} {:>5} {:>7}\n", "conc",
             "mode", "tok/s", "vs plain", "req tok/s", "TTFT p50/p99 ms", "ITL p50/p99 ms",
             "e2e p50/p99 s", "alpha", "M", "passes");
  for (const ServingSummary& s : summaries) {
    const ServingFigures& f = s.figures;
    const std::string speedup =
        s.speedup_vs_plain ? fmt::format("{:.2f}x", *s.speedup_vs_plain) : std::string("n/a");
    fmt::print(to,
               "  {:>4} {:>7} {:>9.2f} {:>8} {:>9.2f} {:>8.1f}/{:<8.1f} {:>7.2f}/{:<7.2f} "
               "{:>7.3f}/{:<7.3f} {:>6.3f} {:>5.2f} {:>7}\n",
               s.concurrency, s.mode, f.tokens_per_s, speedup, f.mean_request_tokens_per_s,
               1e3 * f.ttft_s.p50, 1e3 * f.ttft_s.p99, 1e3 * f.itl_s.p50, 1e3 * f.itl_s.p99,
               f.e2e_s.p50, f.e2e_s.p99, f.mean_acceptance_rate, f.mean_accepted_length,
               s.batch.passes);
  }
}

}  // namespace selfspec::launch
