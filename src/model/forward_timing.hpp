// Timing forwards, for cost models and benchmarks: batches of forwards of T tokens at a fixed KV
// length, each rolled back, so every forward sees the same context; and v(γ), what verifying γ
// drafted tokens costs against one decode step (Draft & Verify §3.3, SWIFT §3: the speedup of a
// self-speculative step is bounded by its verification cost), measured in interleaved rounds so
// drift and other load touch every γ alike.
//
// Collective: every rank runs the same forwards; times are rank 0's clock between barriers.
#pragma once

#include "model/kv_cache.hpp"
#include "model/layer_plan.hpp"
#include "model/llama_model.hpp"

#include <cstdint>
#include <vector>

namespace selfspec {

// A deterministic sequence of n ids below `vocab` (costs do not depend on which tokens they are).
std::vector<std::int32_t> filler_tokens(std::int64_t n, std::int64_t vocab);

// Fills `kv` (empty) with `context` filler tokens by one full-plan forward.
void prefill_filler(LlamaModel& model, KvCache& kv, std::int64_t context);

// Seconds per forward of `forwards` forwards of `t` tokens under `plan` with `rows` logit rows
// (the last ones), at KV length `context`, each rolled back to it.
double time_forward_batch(LlamaModel& model, KvCache& kv, const LayerPlan& plan,
                          std::int64_t context, int t, int rows, int forwards);

struct VerifyCostOptions {
  std::int64_t context = 64;  // KV length the forwards attend over
  int max_draft = 8;          // v(γ) for γ = 0 … max_draft
  int forwards = 8;           // forwards per timed batch
  int rounds = 5;             // interleaved rounds; medians count
};

struct VerifyCost {
  std::vector<double> forward_s;  // seconds of a full-plan forward of γ + 1 tokens, γ = 0 … K
  std::vector<double> v;          // forward_s[γ] / forward_s[0]
};

// v(γ) of the model on this machine (collective; see above). Needs a KV cache capacity of
// context + max_draft + 1.
VerifyCost measure_verify_cost(LlamaModel& model, const VerifyCostOptions& options);

double median_of(std::vector<double> values);

}  // namespace selfspec
