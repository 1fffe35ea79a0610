// The report of `selfspec bench-serving`: its measured runs (one per round × concurrency × mode),
// their summaries per concurrency × mode over the rounds, the speedups over plain decoding at the
// same concurrency, and how they read as JSON and as the table. Keys are part of the interface
// (tests read them): rename nothing.
#pragma once

#include "decode/speculative_batch.hpp"
#include "launch/bench/serving_stats.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace selfspec::launch {

// One measured run of the batched loop.
struct ServingRun {
  int round = 0;
  std::int64_t concurrency = 0;  // the batch's slots
  std::string mode;              // plain, fixed or goodput
  std::vector<RequestRecord> requests;
  SpeculativeBatchStats batch;
  ServingFigures figures;
  // Aggregate tokens/s ÷ plain's at the same concurrency and round (none without a plain run).
  std::optional<double> speedup_vs_plain;
};

// Sets each run's speedup_vs_plain.
void compare_with_plain(std::vector<ServingRun>& runs);

// The runs of one concurrency × mode over the rounds.
struct ServingSummary {
  std::int64_t concurrency = 0;
  std::string mode;
  int rounds = 0;
  ServingFigures figures;                  // all their requests, over their summed wall time
  SpeculativeBatchStats batch;             // summed (max_sequences: the largest)
  std::optional<double> speedup_vs_plain;  // the median of the rounds'
};

// One summary per concurrency × mode, in the order of their first runs.
std::vector<ServingSummary> summarize(std::span<const ServingRun> runs);

// {passes, draft_passes, tokens, max_sequences, seconds}
nlohmann::json to_json(const SpeculativeBatchStats& stats);
// {p50, p99, mean, count}
nlohmann::json to_json(const Distribution& distribution);
// {requests, generated_tokens, wall_s, tokens_per_s, mean_request_tokens_per_s, ttft_s, itl_s,
// e2e_s, mean_acceptance_rate, mean_accepted_length}
nlohmann::json to_json(const ServingFigures& figures);
// {request, prompt, prompt_tokens, arrival_s, first_token_s, end_s, ttft_s, e2e_s, tokens_per_s,
// generated_tokens, acceptance_rate, mean_accepted_length, drafted, accepted, verify_forwards,
// stopped_on_eos, itl_s} and, with `tokens`, the generated tokens.
nlohmann::json to_json(const RequestRecord& record, bool tokens);
// {round, concurrency, mode, batch, speedup_vs_plain (null without plain), requests: [...]} and
// the run's figures.
nlohmann::json to_json(const ServingRun& run, bool tokens);
// {concurrency, mode, rounds, batch, speedup_vs_plain} and the figures.
nlohmann::json to_json(const ServingSummary& summary);

// The table: one line per summary.
void print_serving_table(std::FILE* to, std::span<const ServingSummary> summaries);

}  // namespace selfspec::launch
