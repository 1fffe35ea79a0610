// The report layer: the JSON of every struct the commands report, one function each, so that a
// field list lives in one place (bench's own structs: launch/bench/bench_report.hpp). Keys are part
// of the interface (tests, scripts/demo.sh, scripts/slurm and tests/slurm read them): rename
// nothing. nlohmann::json sorts keys, so callers may merge these objects (update) without changing
// the output.
#pragma once

#include "backend/memory_bandwidth.hpp"
#include "control/draft_length_controller.hpp"
#include "decode/generation_options.hpp"
#include "decode/generation_result.hpp"
#include "launch/rank_plan.hpp"
#include "model/llama_weights.hpp"
#include "model_io/model_config.hpp"
#include "verify/sampler.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace selfspec::launch {

// The format holding most of this rank's weight bytes ("q4_k", "bf16"); reports' "weight_dtype".
std::string main_weight_format(const LlamaWeights& weights);

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

// The draft-length controllers' parameters: {max_draft, threshold, gamma0, epsilon, beta1, beta2,
// target_acceptance, prior_alpha, prior_beta, cali_sigma_m, cali_sigma_s, cali_theta0} (the kind
// is reported per configuration; cali_sigma_m is the predictor's when not given, -1 without one).
nlohmann::json to_json(const ControllerOptions& controller);

// A rank's row of info/plan: {rank, q_heads, kv_heads, intermediate, vocab ([begin, end]),
// weight_bytes, kv_cache_bytes} and, when planned with a workspace, workspace_bytes and
// total_bytes.
nlohmann::json to_json(const RankPlan& rank);

// The geometry info and plan both report: {layers, hidden_size, intermediate_size,
// attention_heads, kv_heads, head_dim, vocab_size, max_position_embeddings}.
nlohmann::json geometry_json(const ModelConfig& config);

}  // namespace selfspec::launch
