// What each tensor-parallel rank holds, from the config alone (no weights read): its shard of the
// heads, the intermediate features and the vocabulary, its weight and KV-cache bytes, and (for
// `plan`) its forward workspace. Shared by `info` and `plan`.
#pragma once

#include "core/dtype.hpp"
#include "model/memory_plan.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_config.hpp"
#include "model_io/model_source.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace selfspec::launch {

// The largest forward a rank runs: the tokens of one forward and the rows it keeps logits for.
struct ForwardShape {
  std::int64_t tokens = 0;
  std::int64_t logit_rows = 0;
};

// How a model's weights will be held, for planning: each matrix's format, the intermediate unit
// of the split, and a label ("bf16", or "q4_k+q6_k" for a GGUF run as stored).
struct WeightPlan {
  WeightFormatOf format_of;
  std::int64_t intermediate_unit = 1;
  std::string label;
  bool native = false;  // a GGUF's quantized tensors kept as stored
};

// `requested` (--weights-dtype) for every matrix; nullopt: a GGUF's tensors as the CPU backend
// holds them (quantized types it runs as stored, other quantized types bf16, float types as
// stored; the file is read for its tensor types), any other source `fallback` for every matrix.
// `synthetic_format` (--weights-dtype q4_k with synthetic weights): the matrices in that format
// where their columns are whole blocks of it (as SyntheticSource stores them), `fallback` else.
WeightPlan plan_weights(const ModelSource& source, std::optional<DType> requested, DType fallback,
                        std::optional<WeightFormat> synthetic_format = std::nullopt);

struct RankPlan {
  ShardPlan shard;
  RankMemory memory;
  std::optional<std::uint64_t> workspace_bytes;  // set when planned with a ForwardShape
  std::uint64_t draft_weight_bytes = 0;          // a --draft-weights copy (0: none)

  int rank() const { return shard.rank; }
  // Weights (and a draft copy of them) + KV cache + workspace.
  std::uint64_t total_bytes() const {
    return memory.weight_bytes + draft_weight_bytes + memory.kv_cache_bytes +
           workspace_bytes.value_or(0);
  }
};

// Every rank of a tp-way split (which must be valid: ShardPlan::check) with its weights in
// `weights` at `context` tokens of KV cache; with `forward`, also each rank's workspace for such
// forwards. `intermediate_unit`: ShardPlan::make's (32 for quantized weights run as stored).
// `draft_weights`: the format of a --draft-weights copy each rank also holds. `kv_dtype`: the KV
// cache's element type.
std::vector<RankPlan> plan_ranks(const ModelConfig& config, int tp, const WeightFormatOf& weights,
                                 std::int64_t context,
                                 std::optional<ForwardShape> forward = std::nullopt,
                                 std::int64_t intermediate_unit = 1,
                                 std::optional<WeightFormat> draft_weights = std::nullopt,
                                 DType kv_dtype = DType::kF32);

}  // namespace selfspec::launch
