// The measured cost of a draft: a per-sublayer cost table, timed once on this machine, so the
// skip-set search's objective (expected_speedup.hpp) is a deterministic function of the mask and
// the search never chases timer noise (issue 10; Draft & Verify §3.3 times whole decoding runs
// instead, which is what makes its objective noisy).
//
// Model: a decode forward under plan P costs
//   t(P) = fixed + Σ_{l: attention l runs} attention[l] + Σ_{l: MLP l runs} mlp[l]
// where `fixed` is everything outside the layers (embedding, final norm, LM head, the forward's
// own overhead). Every layer of a LLaMA-family model has the same shapes, so the table is timed
// by sublayer kind: four plans (full; no interior attention; no interior MLP; neither — the first
// and last layers always run) are timed in interleaved rounds, the per-forward medians are fitted
// by least squares to t = fixed + n_attention·a + n_mlp·m, and every layer gets a and m. Timing
// each of the 2L sublayers alone would measure noise: one sublayer is ~1/(2L) of a forward.
// The fit's largest residual is kept as an additivity check.
//
// The table also holds v(γ): a verification forward of γ + 1 tokens under the full plan divided
// by a decode forward (γ = 0 … max_draft), and `head`: the LM head's share of `fixed` (full plan
// with one logit row minus no logit row).
//
// Collective: every rank runs the same forwards; the timings are rank 0's clock.
#pragma once

#include "model/layer_plan.hpp"
#include "model/llama_model.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace selfspec {

struct CostTableOptions {
  std::int64_t context = 256;  // KV length the forwards attend over
  int forwards = 16;           // forwards per timed batch
  int rounds = 7;              // interleaved rounds; the median batch counts
  int max_draft = 12;          // v(γ) for γ = 0 … max_draft
};

struct SublayerCostTable {
  int num_layers = 0;
  double fixed_s = 0.0;
  double head_s = 0.0;
  std::vector<double> attention_s;   // per layer
  std::vector<double> mlp_s;         // per layer
  std::vector<double> verify_ratio;  // v(γ), γ = 0 … max_draft (v(0) = 1)
  double fit_max_residual = 0.0;     // relative to the full forward
  // Provenance: where and how it was timed.
  std::string device;
  int threads = 0;
  int tp = 1;
  std::int64_t context = 0;
  int forwards = 0;
  int rounds = 0;

  double forward_seconds(const LayerPlan& plan) const;
  double full_seconds() const;
  // c: t(plan) / t(full plan). With a pruned draft vocabulary keeping the share `head_kept` of
  // the vocabulary, the draft's LM head costs head_kept · head_s (its scatter is negligible:
  // bench/kernels' scatter runs at memory speed over one row).
  double cost_ratio(const LayerPlan& plan, double head_kept = 1.0) const;
  int max_draft() const { return static_cast<int>(verify_ratio.size()) - 1; }

  nlohmann::json to_json() const;
  // Throws selfspec::Error naming `what` (a file) and the key when a field is missing or invalid.
  static SublayerCostTable from_json(const nlohmann::json& json, const std::string& what);
};

// Times the table (collective; see the top of this file). Throws when the model has fewer than
// three layers (no interior to skip) or the context does not fit `context + max_draft + 1`.
SublayerCostTable measure_cost_table(LlamaModel& model, const CostTableOptions& options);

}  // namespace selfspec
