// The decode cost model (formulas and the collectives it counts: launch/plan/comm_cost_model.hpp).
// E[tokens per round]: Leviathan et al., ICML 2023, §3.3, Eq. (1); the round: Draft & Verify
// (Zhang et al., ACL 2024) §3.2, Algorithm 2.
#include "launch/plan/comm_cost_model.hpp"

#include "backend/logit_statistics.hpp"
#include "core/error.hpp"
#include "decode/control_message.hpp"

#include <algorithm>
#include <cmath>

namespace selfspec::launch {
namespace {

constexpr std::uint64_t kActivationBytes = sizeof(float);  // all-reduces carry f32 activations

std::uint64_t to_bytes(std::int64_t n) {
  return static_cast<std::uint64_t>(n);
}

// The table's op for `op`: itself when listed, else all_reduce (which every table has).
std::string priced_as(const CommTable& table, Collective op) {
  const std::string_view name = collective_name(op);
  return table.has(name) ? std::string(name) : std::string(collective_name(Collective::kAllReduce));
}

}  // namespace

std::string_view collective_name(Collective op) {
  switch (op) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kGather:
      return "gather";
    case Collective::kAllGather:
      return "all_gather";
  }
  return "unknown";
}

std::vector<CollectiveCalls> forward_collectives(const ModelConfig& config, int tp,
                                                 const LayerPlan& plan, std::int64_t tokens) {
  SELFSPEC_CHECK(plan.num_layers() == config.num_layers,
                 "cost model: a plan of {} layers for a model of {}", plan.num_layers(),
                 config.num_layers);
  if (tp <= 1) return {};
  std::int64_t count = 1;  // the embedding's
  for (int l = 0; l < plan.num_layers(); ++l) {
    count += (plan.runs_attention(l) ? 1 : 0) + (plan.runs_mlp(l) ? 1 : 0);
  }
  return {
      {Collective::kAllReduce, to_bytes(tokens * config.hidden_size) * kActivationBytes, count}};
}

std::vector<CollectiveCalls> logits_collectives(LogitsMode mode, int tp, std::int64_t rows,
                                                std::int64_t vocab_shard) {
  if (tp <= 1) return {};
  const std::uint64_t bytes = mode == LogitsMode::kLocal
                                  ? to_bytes(rows) * sizeof(ShardStats)
                                  : to_bytes(rows * vocab_shard) * sizeof(float);
  return {{Collective::kGather, bytes, 1}};
}

std::vector<CollectiveCalls> control_collectives(int tp) {
  if (tp <= 1) return {};
  return {{Collective::kBroadcast, sizeof(ControlMessage), 1}};
}

std::vector<CollectiveCalls> step_collectives(const ModelConfig& config, int tp,
                                              const LayerPlan& plan, std::int64_t tokens,
                                              LogitsMode mode, std::int64_t vocab_shard) {
  std::vector<CollectiveCalls> calls = forward_collectives(config, tp, plan, tokens);
  for (const CollectiveCalls& c : logits_collectives(mode, tp, tokens, vocab_shard))
    calls.push_back(c);
  for (const CollectiveCalls& c : control_collectives(tp)) calls.push_back(c);
  return calls;
}

DecodeGeometry decode_geometry(const ModelConfig& config, const std::vector<RankPlan>& ranks,
                               const WeightFormatOf& weights,
                               std::optional<WeightFormat> draft_weights) {
  SELFSPEC_CHECK(!ranks.empty(), "cost model: no ranks");
  const RankPlan& slowest =
      *std::max_element(ranks.begin(), ranks.end(), [](const RankPlan& a, const RankPlan& b) {
        return a.memory.decode_weight_bytes < b.memory.decode_weight_bytes;
      });
  DecodeGeometry geometry;
  geometry.config = config;
  geometry.tp = static_cast<int>(ranks.size());
  geometry.forward_weight_bytes = slowest.memory.decode_weight_bytes;
  geometry.layers = plan_layer_weight_bytes(config, slowest.shard, weights);
  if (draft_weights) {
    geometry.draft_layers = plan_draft_layer_weight_bytes(config, slowest.shard, *draft_weights);
    geometry.draft_forward_weight_bytes =
        plan_draft_weight_bytes(config, slowest.shard, *draft_weights);
  }
  for (const RankPlan& rank : ranks)
    geometry.vocab_shard = std::max(geometry.vocab_shard, rank.shard.vocab.size());
  return geometry;
}

std::uint64_t forward_weight_bytes(const DecodeGeometry& geometry, const LayerPlan& plan,
                                   bool draft) {
  const bool copy = draft && !geometry.draft_layers.empty();
  const std::vector<LayerWeightBytes>& layers = copy ? geometry.draft_layers : geometry.layers;
  const std::uint64_t full =
      copy ? geometry.draft_forward_weight_bytes : geometry.forward_weight_bytes;
  std::uint64_t skipped = 0;
  for (int l = 0; l < plan.num_layers(); ++l) {
    const LayerWeightBytes& layer = layers.at(static_cast<std::size_t>(l));
    if (!plan.runs_attention(l)) skipped += layer.attention;
    if (!plan.runs_mlp(l)) skipped += layer.mlp;
  }
  SELFSPEC_CHECK(skipped <= full, "cost model: the plan skips {} bytes of a forward's {}", skipped,
                 full);
  return full - skipped;
}

double expected_tokens_per_round(double alpha, int draft_len) {
  SELFSPEC_CHECK(alpha >= 0.0 && alpha <= 1.0,
                 "cost model: acceptance rate α = {} is outside [0, 1]", alpha);
  SELFSPEC_CHECK(draft_len >= 0, "cost model: draft length K = {} is negative", draft_len);
  if (alpha == 1.0) return draft_len + 1.0;
  return (1.0 - std::pow(alpha, draft_len + 1)) / (1.0 - alpha);
}

StepCost price_step(std::string kind, const DecodeGeometry& geometry, const LayerPlan& plan,
                    std::int64_t tokens, LogitsMode mode, const CommTable& table,
                    double memory_bytes_per_s, bool draft) {
  SELFSPEC_CHECK(memory_bytes_per_s > 0.0, "cost model: memory bandwidth {} B/s is not positive",
                 memory_bytes_per_s);
  StepCost step;
  step.kind = std::move(kind);
  step.tokens = tokens;
  step.weight_bytes = forward_weight_bytes(geometry, plan, draft);
  step.weight_s = static_cast<double>(step.weight_bytes) / memory_bytes_per_s;
  for (const CollectiveCalls& calls :
       step_collectives(geometry.config, geometry.tp, plan, tokens, mode, geometry.vocab_shard)) {
    PricedCollectives priced{calls, priced_as(table, calls.op), 0.0};
    priced.seconds_each = table.time_s(priced.priced_as, static_cast<double>(calls.bytes));
    step.comm_s += priced.seconds_each * static_cast<double>(calls.count);
    step.collectives.push_back(std::move(priced));
  }
  return step;
}

CostPrediction predict_decode_cost(const DecodeGeometry& geometry, const CommTable& table,
                                   const CostModelOptions& options) {
  SELFSPEC_CHECK(options.draft_len >= 1, "cost model: draft length K = {} must be at least 1",
                 options.draft_len);
  const int layers = static_cast<int>(geometry.config.num_layers);
  const LayerPlan full = LayerPlan::full(layers);
  const double bandwidth = options.memory_bytes_per_s;
  CostPrediction p;
  p.plain = price_step("plain", geometry, full, 1, options.logits, table, bandwidth);
  p.draft = price_step("draft", geometry, options.draft_plan, 1, options.logits, table, bandwidth,
                       /*draft=*/true);
  p.verify =
      price_step("verify", geometry, full, options.draft_len + 1, options.logits, table, bandwidth);
  p.expected_tokens = expected_tokens_per_round(options.alpha, options.draft_len);

  const double k = options.draft_len;
  const double round_s = k * p.draft.total_s() + p.verify.total_s();
  const double round_comm_s = k * p.draft.comm_s + p.verify.comm_s;
  p.plain_per_token_s = p.plain.total_s();
  p.spec_per_token_s = round_s / p.expected_tokens;
  p.speedup = p.plain_per_token_s / p.spec_per_token_s;
  p.plain_comm_fraction = p.plain.comm_s / p.plain.total_s();
  p.spec_comm_fraction = round_comm_s / round_s;
  return p;
}

}  // namespace selfspec::launch
