// What `selfspec bench` accumulates and derives: per-run autoregressive samples (medians), totals
// of the autoregressive runs and of each speculative configuration, the figures that compare a
// configuration with the autoregressive baseline (SWIFT App. B.3 eq. 6), and the bytes a decode
// step reads against the measured bandwidth. Plain arithmetic: report.hpp turns them into JSON.
#pragma once

#include "decode/generation_result.hpp"
#include "verify/sharded_logits.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace selfspec::launch {

double median(std::vector<double> values);
// a / b, 0 when b is not positive.
double ratio(double a, double b);

// One sample per autoregressive run.
struct ArSamples {
  std::vector<double> prefill_tps;
  std::vector<double> decode_tps;
  std::vector<double> decode_ms;  // per token
  void add(const GenerationTimings& timings);
};

// Totals of autoregressive runs.
struct ArTotals {
  std::int64_t tokens = 0;  // decoded after the first token
  double seconds = 0.0;
  DecodingStats stats;  // one verification of one token per decode step
  void add(const GenerationResult& result);
  double tokens_per_second() const { return ratio(static_cast<double>(tokens), seconds); }
  double seconds_per_forward() const { return stats.seconds_per_verify_forward(); }
};

// Totals of one speculative configuration (controller x logits mode x draft vocabulary) over all
// prompts.
struct SpecTotals {
  std::string controller;
  LogitsMode logits = LogitsMode::kLocal;
  std::int64_t draft_vocab = 0;  // V' of the draft forwards' LM head; 0: the full head
  std::int64_t tokens = 0;
  double seconds = 0.0;
  DecodingStats stats;
  int lossless_prompts = 0;
  int prompts = 0;
  nlohmann::json last_controller_state;
  nlohmann::json last_drafter_state;  // what the drafter decided or learned (asd, swift), or null

  void add(const GenerationResult& result);
  // Adds the totals of other runs of this configuration (e.g. one prompt's); their controller
  // and drafter states become the last ones.
  void add(const SpecTotals& other);
  double tokens_per_second() const { return ratio(static_cast<double>(tokens), seconds); }
};

// "full" for the full LM head (V' = 0), else V'.
std::string draft_vocab_name(std::int64_t draft_vocab);

// A configuration against the autoregressive runs of the same prompts.
struct SpecFigures {
  double speedup = 0.0;               // measured tokens/s ratio
  double acceptance_rate = 0.0;       // α
  double mean_accepted_length = 0.0;  // M
  double cost_ratio = 0.0;            // c: mean draft forward ÷ mean autoregressive forward
  double verify_cost_ratio = 0.0;     // mean verification forward ÷ mean autoregressive forward
  double expected_speedup = 0.0;      // eq. 6: Mα / ((M − 1)c + α)
  double efficiency = 0.0;            // measured ÷ expected
};
SpecFigures compare_with_autoregressive(const SpecTotals& spec, const ArTotals& ar);

// Bytes one decode step reads (weights + the KV cache at the average context) and the bandwidth
// that amounts to at the measured ms/token.
struct DecodeTraffic {
  std::uint64_t rank_weight_bytes = 0;  // this rank (rank 0 in reports)
  double rank_kv_bytes = 0.0;
  double all_rank_bytes = 0.0;  // weights + KV cache of every rank
  double seconds_per_token = 0.0;
  double effective_rank_gbps() const {
    return ratio(static_cast<double>(rank_weight_bytes) + rank_kv_bytes, seconds_per_token) * 1e-9;
  }
  double effective_all_gbps() const { return ratio(all_rank_bytes, seconds_per_token) * 1e-9; }
};

// Device (GPU) bandwidth summed over all ranks.
struct DeviceBandwidthTotals {
  double copy_all_gbps = 0.0;
  double peak_all_gbps = 0.0;
};

}  // namespace selfspec::launch
