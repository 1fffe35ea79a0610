// What each tensor-parallel rank holds, from the config alone (no weights read): its shard of the
// heads, the intermediate features and the vocabulary, its weight and KV-cache bytes, and (for
// `plan`) its forward workspace. Shared by `info` and `plan`.
#pragma once

#include "core/dtype.hpp"
#include "model/memory_plan.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_config.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace selfspec::launch {

// The largest forward a rank runs: the tokens of one forward and the rows it keeps logits for.
struct ForwardShape {
  std::int64_t tokens = 0;
  std::int64_t logit_rows = 0;
};

struct RankPlan {
  ShardPlan shard;
  RankMemory memory;
  std::optional<std::uint64_t> workspace_bytes;  // set when planned with a ForwardShape

  int rank() const { return shard.rank; }
  // Weights + KV cache + workspace.
  std::uint64_t total_bytes() const {
    return memory.weight_bytes + memory.kv_cache_bytes + workspace_bytes.value_or(0);
  }
};

// Every rank of a tp-way split (which must be valid: ShardPlan::check) with `weights` at
// `context` tokens of KV cache; with `forward`, also each rank's workspace for such forwards.
std::vector<RankPlan> plan_ranks(const ModelConfig& config, int tp, DType weights,
                                 std::int64_t context,
                                 std::optional<ForwardShape> forward = std::nullopt);

}  // namespace selfspec::launch
