#include "launch/rank_plan.hpp"

#include "kernels/cpu/ggml_dequantize.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/gguf_file.hpp"
#include "model_io/gguf_tensor_source.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <memory>
#include <set>

namespace selfspec::launch {

WeightPlan plan_weights(const ModelSource& source, std::optional<DType> requested, DType fallback,
                        std::optional<WeightFormat> synthetic_format) {
  if (synthetic_format && source.synthetic) {
    const WeightFormat quantized = *synthetic_format;
    const WeightFormat dense = dense_format(fallback);
    const std::int64_t block = ggml_block_elements(kernels::cpu::ggml_type_of(quantized));
    auto shapes = std::make_shared<std::map<std::string, std::vector<std::int64_t>>>();
    for (const ExpectedTensor& expected : expected_tensors(source.config)) {
      (*shapes)[expected.name] = expected.shape;
    }
    WeightPlan plan;
    plan.format_of = [shapes, quantized, dense, block](const std::string& name) {
      const auto it = shapes->find(name);
      const bool whole =
          it != shapes->end() && it->second.size() == 2 && it->second[1] % block == 0;
      return whole ? quantized : dense;
    };
    plan.intermediate_unit = 32;
    plan.label = fmt::format("{} (synthetic)", weight_format_name(quantized));
    plan.native = true;
    return plan;
  }
  if (requested || !source.gguf) {
    const DType dtype = requested.value_or(fallback);
    return {uniform_format(dtype), 1, std::string(dtype_name(dtype)), false};
  }
  const GgufFile file(source.model_path);
  const GgufTensorSource tensors(file, source.config);
  auto formats = std::make_shared<std::map<std::string, WeightFormat>>();
  std::set<std::string> names;
  bool quantized = false;
  for (const ExpectedTensor& expected : expected_tensors(source.config)) {
    if (expected.shape.size() != 2 || !file.contains(gguf_tensor_name(expected.name))) continue;
    WeightFormat format = dense_format(tensors.dtype(expected.name));
    if (const std::optional<WeightFormat> q = tensors.quantized_format(expected.name)) {
      format = *q;
      quantized = true;
    } else if (tensors.dequantized_only_type(expected.name)) {
      format = WeightFormat::kBF16;
    }
    (*formats)[expected.name] = format;
    names.insert(std::string(weight_format_name(format)));
  }
  WeightPlan plan;
  plan.format_of = [formats](const std::string& name) {
    const auto it = formats->find(name);
    return it == formats->end() ? WeightFormat::kF32 : it->second;
  };
  plan.intermediate_unit = quantized ? 32 : 1;
  plan.label = fmt::format("{}", fmt::join(names, "+"));
  plan.native = quantized;
  return plan;
}

std::vector<RankPlan> plan_ranks(const ModelConfig& config, int tp, const WeightFormatOf& weights,
                                 std::int64_t context, std::optional<ForwardShape> forward,
                                 std::int64_t intermediate_unit,
                                 std::optional<WeightFormat> draft_weights, DType kv_dtype) {
  std::vector<RankPlan> ranks;
  for (int r = 0; r < tp; ++r) {
    RankPlan plan;
    plan.shard = ShardPlan::make(config, tp, r, intermediate_unit);
    plan.memory = plan_rank_memory(config, plan.shard, weights, context, kv_dtype);
    if (draft_weights) {
      plan.draft_weight_bytes = plan_draft_weight_bytes(config, plan.shard, *draft_weights);
    }
    if (forward) {
      plan.workspace_bytes =
          plan_workspace_bytes(config, plan.shard, forward->tokens, forward->logit_rows);
    }
    ranks.push_back(std::move(plan));
  }
  return ranks;
}

}  // namespace selfspec::launch
