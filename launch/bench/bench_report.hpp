// bench's part of the report layer (launch/report.hpp): the JSON of the structs only bench
// reports — its totals and figures, the per-prompt and per-task records of --prompts-file, and the
// --out-jsonl run records. Keys are part of the interface: rename nothing.
#pragma once

#include "launch/bench/bench_stats.hpp"
#include "launch/bench/suite_figures.hpp"
#include "launch/prompt_suite.hpp"
#include "launch/report.hpp"

#include <nlohmann/json.hpp>

#include <optional>

namespace selfspec::launch {

// {measured_copy_all_ranks, peak_all_ranks} (GB/s)
nlohmann::json to_json(const DeviceBandwidthTotals& bandwidth);

// {"bytes_per_decode_token": {rank0_weights, rank0_kv_cache, all_ranks},
//  "effective_bandwidth_gbps": {rank0, all_ranks}}
nlohmann::json to_json(const DecodeTraffic& traffic);

// {decode_tokens_per_s, forward_ms, tokens}
nlohmann::json to_json(const ArTotals& totals);

// One entry of bench's "speculative" list: the configuration, its figures against the
// autoregressive runs, its statistics, (greedy) how many prompts were token-identical and, for a
// drafter that decides per prompt (asd), "drafter_state_last_prompt": its last decision — in a
// --prompts-file per-prompt record, that prompt's (the skip set and the cosines behind it).
nlohmann::json to_json(const SpecTotals& totals, const SpecFigures& figures, bool greedy);

// bench --prompts-file: one configuration's medians over a task or all prompts: {prompts,
// measured_prompts, autoregressive_tokens_per_s, speculative_tokens_per_s, speedup,
// acceptance_rate, mean_accepted_length, cost_ratio_c, verify_cost_ratio, expected_speedup_eq6,
// efficiency} and, greedy, lossless_prompts.
nlohmann::json to_json(const GroupFigures& figures, bool greedy);

// bench --prompts-file: one prompt's record: {id, task, split, source, prompt_tokens,
// generated_tokens, stopped_on_eos, autoregressive (as ArTotals), speculative (one entry per
// configuration, as bench's "speculative" list, over this prompt alone)}.
nlohmann::json to_json(const SuitePrompt& prompt, const PromptRuns& runs, bool greedy);

// bench --out-jsonl: one finished autoregressive run.
nlohmann::json autoregressive_run_record(int run, const GenerationTimings& timings, int tp);

// bench --out-jsonl: one finished speculative run, against the same prompt's autoregressive run;
// `lossless` is null for sampled runs.
nlohmann::json speculative_run_record(int run, const SpecTotals& config,
                                      const GenerationTimings& timings, const DecodingStats& stats,
                                      const GenerationTimings& autoregressive,
                                      std::optional<bool> lossless, int tp);

}  // namespace selfspec::launch
