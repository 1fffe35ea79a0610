// The canonical arithmetic of softmax over a vocabulary split into contiguous shards (the
// tensor-parallel LM head's vocab shards). Every probability, confidence and sampling walk of the
// verifiers is computed through these functions, shard by shard, in the same order:
//   per shard s:  m_s = max of scaled logits l/T, a_s = first argmax, z_s = Σ exp(l/T − m_s)
//                 (double, ascending ids);
//   combined:     M = max m_s, argmax = a_s of the first shard reaching M,
//                 Z = Σ_s z_s · exp(m_s − M) (ascending s),  p(x) = exp(l_x/T − M) / Z.
// The gathering verifier (rank 0 holds whole rows) evaluates the shards over the shard ranges of
// the full row; the local-reduction verifier evaluates each shard on its own rank and combines
// gathered scalars. Both therefore see bit-identical numbers and make identical decisions.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace selfspec {

struct ShardStats {
  double max = -std::numeric_limits<double>::infinity();
  double sum_exp = 0.0;      // Σ exp(l_x/T − max) over the shard
  std::int32_t argmax = -1;  // global id of the shard's first maximum (-1: empty shard)
  std::int32_t padding = 0;
};

struct RowStats {
  double max = -std::numeric_limits<double>::infinity();
  double sum_exp = 0.0;  // Z
  std::int32_t argmax = -1;
  std::vector<double> shard_mass;  // z_s · exp(m_s − M): each shard's unnormalised share of Z
  std::vector<double> shard_max;   // m_s (the walk inside shard s works relative to it)

  double probability(double scaled_logit) const;  // exp(scaled − M) / Z
  double top_probability() const { return 1.0 / sum_exp; }
};

// What a caller needs of a row: the softmax's statistics, or only its max and argmax (greedy
// decisions; sum_exp and the shard masses are then left 0, and no exponential is computed).
enum class RowNeeds { kSoftmax, kArgmax };

// Statistics of one shard: logits of ids [vocab_begin, vocab_begin + logits.size()). A logit of
// -inf adds exactly nothing to sum_exp and is skipped (the -inf columns of a pruned draft
// vocabulary's rows cost no exponential).
ShardStats shard_stats(std::span<const float> logits, std::int64_t vocab_begin,
                       double inv_temperature, RowNeeds needs = RowNeeds::kSoftmax);
RowStats combine_shards(std::span<const ShardStats> shards);

// The shard holding cumulative mass `target` (in the units of `masses`), and the remaining mass
// inside it. Rounding that leaves target beyond the total picks the last non-empty shard.
struct ShardPick {
  int shard = 0;
  double remainder = 0.0;
};
ShardPick pick_shard(std::span<const double> masses, double target);

// Within one shard: the first id (ascending) whose running Σ exp(l/T − shard_max) exceeds
// `target` (shard-local units: remainder · exp(M − shard_max)); the last id of positive weight
// when rounding leaves target unreached.
std::int32_t walk_softmax(std::span<const float> logits, std::int64_t vocab_begin,
                          double inv_temperature, double shard_max, double target);

// The residual distribution of speculative sampling, norm(max(0, p − q)) (Leviathan et al.,
// 2023; Draft & Verify Alg. 4): the weight of id x is max(0, p(x) − q(x)) with p and q the
// target's and the draft's dense softmax probabilities. One shard's total weight, and the walk.
struct DensePair {
  double p_max = 0.0, p_sum = 1.0;  // the target row's M and Z
  double q_max = 0.0, q_sum = 1.0;  // the draft row's M and Z
  double inv_temperature = 1.0;
};
double residual_mass(std::span<const float> p_logits, std::span<const float> q_logits,
                     const DensePair& pair);
std::int32_t walk_residual(std::span<const float> p_logits, std::span<const float> q_logits,
                           std::int64_t vocab_begin, const DensePair& pair, double target);

}  // namespace selfspec
