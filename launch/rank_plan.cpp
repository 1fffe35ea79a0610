#include "launch/rank_plan.hpp"

namespace selfspec::launch {

std::vector<RankPlan> plan_ranks(const ModelConfig& config, int tp, DType weights,
                                 std::int64_t context, std::optional<ForwardShape> forward) {
  std::vector<RankPlan> ranks;
  for (int r = 0; r < tp; ++r) {
    RankPlan plan;
    plan.shard = ShardPlan::make(config, tp, r);
    plan.memory = plan_rank_memory(config, plan.shard, weights, context);
    if (forward) {
      plan.workspace_bytes =
          plan_workspace_bytes(config, plan.shard, forward->tokens, forward->logit_rows);
    }
    ranks.push_back(std::move(plan));
  }
  return ranks;
}

}  // namespace selfspec::launch
