#include "model/shard_plan.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

namespace selfspec {

IndexRange split_range(std::int64_t total, int parts, int part) {
  return {total * part / parts, total * (part + 1) / parts};
}

std::int64_t ShardPlan::effective_unit(const ModelConfig& config, std::int64_t requested) {
  return requested > 1 && config.intermediate_size % requested == 0 ? requested : 1;
}

std::optional<std::string> ShardPlan::check(const ModelConfig& config, int tp,
                                            std::int64_t intermediate_unit) {
  if (tp < 1) return fmt::format("the tensor-parallel degree must be >= 1 (got {})", tp);
  const std::int64_t heads = config.num_heads;
  const std::int64_t kv = config.num_kv_heads;
  if (heads % tp != 0) {
    return fmt::format("num_attention_heads = {} is not divisible by tp = {}", heads, tp);
  }
  if (kv % tp != 0 && tp % kv != 0) {
    return fmt::format(
        "num_key_value_heads = {} and tp = {}: KV heads can be split only when one divides the "
        "other (split when tp divides {}, replicated when {} divides tp)",
        kv, tp, kv, kv);
  }
  const std::int64_t unit = effective_unit(config, intermediate_unit);
  if (config.intermediate_size / unit < tp) {
    return unit == 1 ? fmt::format("intermediate_size = {} is smaller than tp = {}",
                                   config.intermediate_size, tp)
                     : fmt::format(
                           "intermediate_size = {} has fewer than tp = {} units of {} "
                           "features (the quantized blocks' column groups)",
                           config.intermediate_size, tp, unit);
  }
  if (config.vocab_size < tp) {
    return fmt::format("vocab_size = {} is smaller than tp = {}", config.vocab_size, tp);
  }
  return std::nullopt;
}

ShardPlan ShardPlan::make(const ModelConfig& config, int tp, int rank,
                          std::int64_t intermediate_unit) {
  if (auto reason = check(config, tp, intermediate_unit)) {
    fail("cannot shard the model over {} tensor-parallel ranks: {}", tp, *reason);
  }
  SELFSPEC_CHECK(rank >= 0 && rank < tp, "rank {} is outside [0, {})", rank, tp);
  ShardPlan plan;
  plan.tp = tp;
  plan.rank = rank;
  const std::int64_t heads_per_rank = config.num_heads / tp;
  plan.q_heads = {heads_per_rank * rank, heads_per_rank * (rank + 1)};
  const std::int64_t group = config.num_heads / config.num_kv_heads;  // query heads per KV head
  if (config.num_kv_heads % tp == 0) {
    const std::int64_t kv_per_rank = config.num_kv_heads / tp;
    plan.kv_heads = {kv_per_rank * rank, kv_per_rank * (rank + 1)};
  } else {
    // tp % n_kv == 0: this rank's query heads all belong to one KV head, which it replicates.
    const std::int64_t kv_head = plan.q_heads.begin / group;
    plan.kv_heads = {kv_head, kv_head + 1};
    plan.kv_replicated = true;
  }
  plan.intermediate_unit = effective_unit(config, intermediate_unit);
  const IndexRange units = split_range(config.intermediate_size / plan.intermediate_unit, tp, rank);
  plan.intermediate = {units.begin * plan.intermediate_unit, units.end * plan.intermediate_unit};
  plan.vocab = split_range(config.vocab_size, tp, rank);
  for (int r = 0; r < tp; ++r)
    plan.vocab_counts.push_back(split_range(config.vocab_size, tp, r).size());
  return plan;
}

}  // namespace selfspec
