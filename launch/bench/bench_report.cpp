#include "launch/bench/bench_report.hpp"

namespace selfspec::launch {

nlohmann::json to_json(const DeviceBandwidthTotals& bandwidth) {
  return {{"measured_copy_all_ranks", bandwidth.copy_all_gbps},
          {"peak_all_ranks", bandwidth.peak_all_gbps}};
}

nlohmann::json to_json(const DecodeTraffic& traffic) {
  return {
      {"bytes_per_decode_token",
       {{"rank0_weights", traffic.rank_weight_bytes},
        {"rank0_kv_cache", traffic.rank_kv_bytes},
        {"all_ranks", traffic.all_rank_bytes}}},
      {"effective_bandwidth_gbps",
       {{"rank0", traffic.effective_rank_gbps()}, {"all_ranks", traffic.effective_all_gbps()}}}};
}

nlohmann::json to_json(const ArTotals& totals) {
  // The time in collectives per decoded token (the sweep report's per-token communication time,
  // and what `plan --comm-table` predicts).
  const double comm_ms_per_token =
      totals.tokens > 0 ? 1e3 * totals.stats.phases.comm_s / static_cast<double>(totals.tokens)
                        : 0.0;
  return {{"decode_tokens_per_s", totals.tokens_per_second()},
          {"forward_ms", totals.seconds_per_forward() * 1e3},
          {"tokens", totals.tokens},
          {"comm_ms_per_token", comm_ms_per_token},
          {"phases_s", to_json(totals.stats.phases, PhaseKeys::kBare)}};
}

nlohmann::json to_json(const SpecTotals& totals, const SpecFigures& figures, bool greedy) {
  nlohmann::json entry = to_json(totals.stats, PhaseKeys::kBare);
  entry.update({{"controller", totals.controller},
                {"logits", logits_mode_name(totals.logits)},
                {"draft_vocab", totals.draft_vocab},
                {"decode_tokens_per_s", totals.tokens_per_second()},
                {"speedup", figures.speedup},
                {"acceptance_rate", figures.acceptance_rate},
                {"mean_accepted_length", figures.mean_accepted_length},
                {"cost_ratio_c", figures.cost_ratio},
                {"verify_cost_ratio", figures.verify_cost_ratio},
                {"expected_speedup_eq6", figures.expected_speedup},
                {"efficiency", figures.efficiency},
                {"controller_state_last_prompt", totals.last_controller_state}});
  if (!totals.last_drafter_state.is_null()) {
    entry["drafter_state_last_prompt"] = totals.last_drafter_state;
  }
  if (greedy) {
    entry["lossless_prompts"] = totals.lossless_prompts;
    entry["lossless"] = totals.lossless_prompts == totals.prompts;
  }
  return entry;
}

nlohmann::json to_json(const GroupFigures& figures, bool greedy) {
  const SpecFigures& m = figures.median;
  nlohmann::json row = {{"prompts", figures.prompts},
                        {"measured_prompts", figures.measured},
                        {"autoregressive_tokens_per_s", figures.ar_tokens_per_s},
                        {"speculative_tokens_per_s", figures.spec_tokens_per_s},
                        {"speedup", m.speedup},
                        {"acceptance_rate", m.acceptance_rate},
                        {"mean_accepted_length", m.mean_accepted_length},
                        {"cost_ratio_c", m.cost_ratio},
                        {"verify_cost_ratio", m.verify_cost_ratio},
                        {"expected_speedup_eq6", m.expected_speedup},
                        {"efficiency", m.efficiency}};
  if (greedy) row["lossless_prompts"] = figures.lossless_prompts;
  return row;
}

nlohmann::json to_json(const SuitePrompt& prompt, const PromptRuns& runs, bool greedy) {
  nlohmann::json record = {{"id", prompt.id},
                           {"task", prompt.task},
                           {"split", prompt_split_name(prompt.split)},
                           {"source", prompt.source},
                           {"prompt_tokens", runs.prompt_tokens},
                           {"generated_tokens", runs.generated_tokens},
                           {"stopped_on_eos", runs.stopped_on_eos},
                           {"autoregressive", to_json(runs.ar)},
                           {"speculative", nlohmann::json::array()}};
  for (std::size_t c = 0; c < runs.specs.size(); ++c) {
    record["speculative"].push_back(to_json(runs.specs[c], runs.figures(c), greedy));
  }
  return record;
}

nlohmann::json autoregressive_run_record(int run, const GenerationTimings& timings, int tp) {
  return {{"record", "run"},
          {"method", "autoregressive"},
          {"run", run},
          {"prefill_tokens_per_s", timings.prefill_tokens_per_second()},
          {"decode_tokens_per_s", timings.decode_tokens_per_second()},
          {"decode_tokens", timings.decode_forwards},
          {"tp", tp}};
}

nlohmann::json speculative_run_record(int run, const SpecTotals& config,
                                      const GenerationTimings& timings, const DecodingStats& stats,
                                      const GenerationTimings& autoregressive,
                                      std::optional<bool> lossless, int tp) {
  return {{"record", "run"},
          {"method", "self-speculative"},
          {"run", run},
          {"controller", config.controller},
          {"logits", logits_mode_name(config.logits)},
          {"draft_vocab", config.draft_vocab},
          {"decode_tokens_per_s", timings.decode_tokens_per_second()},
          {"speedup",
           ratio(timings.decode_tokens_per_second(), autoregressive.decode_tokens_per_second())},
          {"acceptance_rate", stats.acceptance_rate()},
          {"mean_accepted_length", stats.mean_accepted_length()},
          {"lossless", lossless ? nlohmann::json(*lossless) : nlohmann::json(nullptr)},
          {"tp", tp}};
}

}  // namespace selfspec::launch
