// A per-token decode latency model for a tensor-parallel split, priced from a comm table
// (comm/comm_table.hpp): `selfspec plan --comm-table`.
//
// A forward is memory-bound at decode sizes: its time is the weight bytes the slowest rank reads
// divided by that rank's memory bandwidth, plus the time of its collectives, each priced at its
// message size from the table (the Hockney α + n/β model behind the table: comm/latency_fit.hpp):
//
//   t_forward = W / B_mem + Σ_collectives t_op(bytes)
//
// The collectives are those the code issues (counted, not assumed; tests tie them to the code):
//   * LlamaModel::forward (src/model/llama_model.cpp), T tokens: one all-reduce of T × hidden
//     floats (f32 on every backend) after the vocab-parallel embedding, then one after each
//     sublayer that runs (o_proj and down are row-parallel): 1 + (attention run) + (MLP run).
//     A skipped sublayer reads no weights and does no all-reduce (LayerPlan).
//   * TokenPicker (src/verify/token_picker.cpp), greedy: one exchange of the forward's R logit
//     rows — --logits local: a gather of R ShardStats records per rank (local_reduction_logits,
//     shard_reductions.cpp); --logits gather: a gather of R × (largest vocab shard) floats per rank
//     (gathered_logits.cpp). On a device backend the same bytes travel by one all-gather.
//   * Rank0Channel::broadcast (src/decode/rank0_channel.cpp): one ControlMessage per step.
// Nothing crosses ranks at TP 1.
//
// Plain decoding: one step (forward over 1 token) per token. Self-speculative decoding (Draft &
// Verify, Zhang et al., ACL 2024, §3.2 and Algorithm 2): a round of K draft steps (forwards over
// 1 token under the draft plan) and one verification step (a full forward over K + 1 tokens, K + 1
// logit rows), which yields E tokens:
//
//   E = (1 − α^(K+1)) / (1 − α)          (E = K + 1 at α = 1)
//
// the expected number of tokens per run of speculative decoding for an i.i.d. acceptance rate α
// and draft length γ = K (Leviathan, Kalman & Matias, "Fast Inference from Transformers via
// Speculative Decoding", ICML 2023, §3.3, Eq. (1); SWIFT, Xia et al. ICLR 2025, App. B.3, Eq. (6)
// builds its expected speedup on the same analysis). Per generated token:
//
//   t_plain = t_step(plain)          t_spec = (K · t_step(draft) + t_step(verify)) / E
//
// Not modelled: compute (attention over the KV cache, GEMM efficiency), kernel launch gaps,
// prefill, and overlap of communication with compute.
#pragma once

#include "comm/comm_table.hpp"
#include "launch/rank_plan.hpp"
#include "model/layer_plan.hpp"
#include "model/memory_plan.hpp"
#include "model_io/model_config.hpp"
#include "verify/sharded_logits.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec::launch {

// The collectives of a decode step, named as in comm tables.
enum class Collective { kAllReduce, kBroadcast, kGather, kAllGather };
std::string_view collective_name(Collective op);

// `count` calls of one collective with `bytes` each (the buffer of an all-reduce or broadcast, one
// rank's contribution to a gather).
struct CollectiveCalls {
  Collective op = Collective::kAllReduce;
  std::uint64_t bytes = 0;
  std::int64_t count = 0;

  bool operator==(const CollectiveCalls& other) const = default;
};

// The collectives of LlamaModel::forward over `tokens` tokens under `plan` at TP `tp`.
std::vector<CollectiveCalls> forward_collectives(const ModelConfig& config, int tp,
                                                 const LayerPlan& plan, std::int64_t tokens);
// Rank 0 reading `rows` logit rows (greedy TokenPicker), `vocab_shard` the largest vocab shard.
std::vector<CollectiveCalls> logits_collectives(LogitsMode mode, int tp, std::int64_t rows,
                                                std::int64_t vocab_shard);
// The control message after a step.
std::vector<CollectiveCalls> control_collectives(int tp);
// One decode step: the forward, the logits exchange for all its rows, the control broadcast.
std::vector<CollectiveCalls> step_collectives(const ModelConfig& config, int tp,
                                              const LayerPlan& plan, std::int64_t tokens,
                                              LogitsMode mode, std::int64_t vocab_shard);

// What the model needs of a split: the slowest rank's bytes.
struct DecodeGeometry {
  ModelConfig config;
  int tp = 1;
  // A full forward's weight reads (RankMemory::decode_weight_bytes).
  std::uint64_t forward_weight_bytes = 0;
  std::vector<LayerWeightBytes> layers;  // each layer's sublayers, on that rank
  // A --draft-weights copy on that rank, which draft forwards read instead (empty: none): its
  // layers' sublayers and everything a full draft forward reads (layers and output projection).
  std::vector<LayerWeightBytes> draft_layers;
  std::uint64_t draft_forward_weight_bytes = 0;
  std::int64_t vocab_shard = 0;  // the largest vocabulary shard
};

// From `ranks` (plan_ranks: must not be empty), taking the rank that reads the most.
// `draft_weights`: the format of a --draft-weights copy.
DecodeGeometry decode_geometry(const ModelConfig& config, const std::vector<RankPlan>& ranks,
                               const WeightFormatOf& weights,
                               std::optional<WeightFormat> draft_weights = std::nullopt);

// Weight bytes a forward under `plan` reads on the slowest rank (a draft forward: from the draft
// copy when the geometry has one).
std::uint64_t forward_weight_bytes(const DecodeGeometry& geometry, const LayerPlan& plan,
                                   bool draft = false);

struct PricedCollectives {
  CollectiveCalls calls;
  std::string priced_as;  // the table's op used (the op itself, or the fallback: all_reduce)
  double seconds_each = 0.0;
};

struct StepCost {
  std::string kind;  // "plain", "draft", "verify"
  std::int64_t tokens = 0;
  std::uint64_t weight_bytes = 0;
  double weight_s = 0.0;
  std::vector<PricedCollectives> collectives;
  double comm_s = 0.0;
  double total_s() const { return weight_s + comm_s; }
};

struct CostModelOptions {
  double memory_bytes_per_s = 0.0;  // per rank
  double alpha = 0.8;               // acceptance rate, [0, 1]
  int draft_len = 4;                // K >= 1
  LogitsMode logits = LogitsMode::kLocal;
  LayerPlan draft_plan;  // the draft's sublayers
};

struct CostPrediction {
  StepCost plain;
  StepCost draft;
  StepCost verify;
  double expected_tokens = 0.0;  // E per round
  double plain_per_token_s = 0.0;
  double spec_per_token_s = 0.0;
  double speedup = 0.0;  // plain / spec
  double plain_comm_fraction = 0.0;
  double spec_comm_fraction = 0.0;
};

// E = (1 − α^(K+1)) / (1 − α); throws selfspec::Error unless α in [0, 1] and K >= 0.
double expected_tokens_per_round(double alpha, int draft_len);

// One step priced: collectives missing from the table are priced as an all-reduce of the same
// bytes (a hand-written table may list only all_reduce).
StepCost price_step(std::string kind, const DecodeGeometry& geometry, const LayerPlan& plan,
                    std::int64_t tokens, LogitsMode mode, const CommTable& table,
                    double memory_bytes_per_s, bool draft = false);

// Plain and self-speculative per-token latency. Throws selfspec::Error on invalid options.
CostPrediction predict_decode_cost(const DecodeGeometry& geometry, const CommTable& table,
                                   const CostModelOptions& options);

}  // namespace selfspec::launch
