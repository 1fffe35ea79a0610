// The report layer: the JSON of every struct the commands report, one function each, so that a
// field list lives in one place. Keys are part of the interface (tests, scripts/demo.sh,
// scripts/slurm and tests/slurm read them): rename nothing. nlohmann::json sorts keys, so
// callers may merge these objects (update) without changing the output.
#pragma once

#include "backend/memory_bandwidth.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/generation_options.hpp"
#include "decode/generation_result.hpp"
#include "launch/bench/bench_stats.hpp"
#include "launch/bench/suite_figures.hpp"
#include "launch/prompt_suite.hpp"
#include "launch/rank_plan.hpp"
#include "model_io/model_config.hpp"
#include "verify/sampler.hpp"

#include <nlohmann/json.hpp>

#include <optional>

namespace selfspec::launch {

// {temperature, top_k, top_p, seed}
nlohmann::json to_json(const SamplingParams& sampling);

// {prefill_s, decode_s, prefill_tokens_per_s, decode_tokens_per_s, decode_forwards, comm_s}
nlohmann::json to_json(const GenerationTimings& timings);

// One self-speculative round, as a line of generate --trace: {"round", "drafted", "accepted",
// "emitted", "draft_tokens", "parents", "accepted_nodes", "confidences", "next_token",
// "controller", "plan"}.
nlohmann::json to_json(const RoundReport& round);

// How phase times are named: `generate` reports "phases": {"draft_s", ...}, `bench`
// "phases_s": {"draft", ...}.
enum class PhaseKeys { kSuffixed, kBare };

// {draft, verify, control, comm} (seconds), with or without an "_s" suffix.
nlohmann::json to_json(const PhaseTimes& phases, PhaseKeys keys);

// {acceptance_rate, mean_accepted_length, drafted, accepted, draft_forwards, verify_forwards} and
// the phase times ("phases" or "phases_s", after `keys`).
nlohmann::json to_json(const DecodingStats& stats, PhaseKeys keys);

// {read_per_rank, read_all_ranks, copy_all_ranks, buffer_bytes_per_rank} (GB/s, bytes)
nlohmann::json to_json(const MemoryBandwidth& bandwidth);

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

// The draft-length controllers' parameters: {max_draft, threshold, gamma0, epsilon, beta1, beta2,
// target_acceptance, prior_alpha, prior_beta, cali_sigma_m, cali_sigma_s, cali_theta0} (the kind
// is reported per configuration; cali_sigma_m is the predictor's when not given, -1 without one).
nlohmann::json to_json(const ControllerOptions& controller);

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

// A rank's row of info/plan: {rank, q_heads, kv_heads, intermediate, vocab ([begin, end]),
// weight_bytes, kv_cache_bytes} and, when planned with a workspace, workspace_bytes and
// total_bytes.
nlohmann::json to_json(const RankPlan& rank);

// The geometry info and plan both report: {layers, hidden_size, intermediate_size,
// attention_heads, kv_heads, head_dim, vocab_size, max_position_embeddings}.
nlohmann::json geometry_json(const ModelConfig& config);

}  // namespace selfspec::launch
