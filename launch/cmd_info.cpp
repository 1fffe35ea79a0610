// `selfspec info`: architecture summary, parameter count, per-rank memory for weights and KV
// cache, and whether a tensor-parallel degree is valid (with the reason when it is not).
// Reads config.json and, when present, the checkpoint headers (validated) — never the weights.
#include "core/error.hpp"
#include "launch/commands.hpp"
#include "launch/human_units.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "model/memory_plan.hpp"
#include "model/shard_plan.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/model_config.hpp"
#include "model_io/safetensors.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <memory>

namespace selfspec::launch {
namespace {

struct InfoOptions {
  std::string model_dir;
  int tp = 1;
  std::int64_t ctx_size = 0;
  std::string weights_dtype = "auto";
  bool json = false;
};

std::string rope_scaling_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kLlama3:
      return "llama3";
  }
  return "?";
}

int run_info(const InfoOptions& options) {
  const std::filesystem::path dir(options.model_dir);
  const ModelConfig config = ModelConfig::from_file(dir / "config.json");
  const std::int64_t context =
      options.ctx_size > 0 ? options.ctx_size : config.max_position_embeddings;

  // The weight dtype: requested, else what the checkpoint stores, else config's torch_dtype.
  std::optional<DType> dtype = parse_weights_dtype(options.weights_dtype);
  nlohmann::json checkpoint_json = nullptr;
  const bool has_checkpoint = std::filesystem::exists(dir / "model.safetensors") ||
                              std::filesystem::exists(dir / "model.safetensors.index.json");
  if (has_checkpoint) {
    const Checkpoint checkpoint = Checkpoint::open(dir);
    validate_checkpoint(checkpoint, config);
    std::map<std::string, int> dtypes;
    for (const std::string& name : checkpoint.tensor_names()) {
      ++dtypes[std::string(dtype_name(checkpoint.tensor(name).dtype))];
    }
    const DType stored = checkpoint.tensor("model.embed_tokens.weight").dtype;
    if (!dtype) dtype = stored;
    checkpoint_json = {{"files", checkpoint.file_count()},
                       {"bytes", checkpoint.total_bytes()},
                       {"tensors", checkpoint.tensor_names().size()},
                       {"dtypes", dtypes},
                       {"valid", true}};
  }
  if (!dtype) dtype = config.torch_dtype.value_or(DType::kBF16);

  const std::optional<std::string> tp_problem = ShardPlan::check(config, options.tp);
  nlohmann::json ranks = nlohmann::json::array();
  if (!tp_problem) {
    for (int r = 0; r < options.tp; ++r) {
      const ShardPlan shard = ShardPlan::make(config, options.tp, r);
      const RankMemory memory = plan_rank_memory(config, shard, *dtype, context);
      ranks.push_back({{"rank", r},
                       {"q_heads", {shard.q_heads.begin, shard.q_heads.end}},
                       {"kv_heads", {shard.kv_heads.begin, shard.kv_heads.end}},
                       {"intermediate", {shard.intermediate.begin, shard.intermediate.end}},
                       {"vocab", {shard.vocab.begin, shard.vocab.end}},
                       {"weight_bytes", memory.weight_bytes},
                       {"kv_cache_bytes", memory.kv_cache_bytes}});
    }
  }
  const bool replicated = !tp_problem && ShardPlan::make(config, options.tp, 0).kv_replicated;

  nlohmann::json out;
  out["model"] = options.model_dir;
  out["architecture"] = {
      {"model_type", config.model_type},
      {"layers", config.num_layers},
      {"hidden_size", config.hidden_size},
      {"intermediate_size", config.intermediate_size},
      {"attention_heads", config.num_heads},
      {"kv_heads", config.num_kv_heads},
      {"head_dim", config.head_dim},
      {"vocab_size", config.vocab_size},
      {"max_position_embeddings", config.max_position_embeddings},
      {"rope_theta", config.rope_theta},
      {"rope_scaling", rope_scaling_name(config.rope_scaling.type)},
      {"attention_bias", config.attention_bias},
      {"tie_word_embeddings", config.tie_word_embeddings},
      {"attention", config.num_kv_heads == config.num_heads ? "multi-head" : "grouped-query"}};
  out["parameters"] = config.parameter_count();
  out["weight_dtype"] = dtype_name(*dtype);
  out["context"] = context;
  out["checkpoint"] = checkpoint_json;
  out["tp"] = options.tp;
  out["tp_valid"] = !tp_problem.has_value();
  out["tp_reason"] = tp_problem ? nlohmann::json(*tp_problem) : nlohmann::json(nullptr);
  out["kv_heads_replicated"] = replicated;
  out["ranks"] = ranks;

  if (options.json) {
    fmt::print("{}\n", out.dump());
    return tp_problem ? 2 : 0;
  }
  fmt::print("model        {}\n", options.model_dir);
  fmt::print("architecture {} ({}), {} layers, hidden {}, intermediate {}, vocab {}\n",
             config.model_type, out["architecture"]["attention"].get<std::string>(),
             config.num_layers, config.hidden_size, config.intermediate_size, config.vocab_size);
  fmt::print("attention    {} query heads, {} KV heads, head_dim {}, bias {}\n", config.num_heads,
             config.num_kv_heads, config.head_dim, config.attention_bias ? "yes" : "no");
  fmt::print("rope         theta {}, scaling {}, context {}\n", config.rope_theta,
             rope_scaling_name(config.rope_scaling.type), config.max_position_embeddings);
  fmt::print("parameters   {} ({:.3f} B), weights {}, tied embeddings {}\n",
             config.parameter_count(), static_cast<double>(config.parameter_count()) / 1e9,
             dtype_name(*dtype), config.tie_word_embeddings ? "yes" : "no");
  if (has_checkpoint) {
    fmt::print("checkpoint   {} file(s), {}, valid\n", checkpoint_json["files"].get<int>(),
               human_bytes(checkpoint_json["bytes"].get<std::uint64_t>()));
  }
  if (tp_problem) {
    fmt::print("tp {}         INVALID: {}\n", options.tp, *tp_problem);
    return 2;
  }
  fmt::print("tp {}         valid{}; per rank at context {}:\n", options.tp,
             replicated ? " (KV heads replicated)" : "", context);
  for (const auto& rank : ranks) {
    fmt::print("  rank {}: weights {}, KV cache {}\n", rank["rank"].get<int>(),
               human_bytes(rank["weight_bytes"].get<std::uint64_t>()),
               human_bytes(rank["kv_cache_bytes"].get<std::uint64_t>()));
  }
  return 0;
}

}  // namespace

void add_info_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* command =
      app.add_subcommand("info", "architecture, parameters, per-rank memory, TP validity");
  add_config_option(*command);
  command->add_option("--model", options->model_dir, "model directory (config.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  command->add_option("--tp", options->tp, "tensor-parallel degree to check")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--ctx-size", options->ctx_size,
                   "context for the KV-cache size (default: max_position_embeddings)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--weights-dtype", options->weights_dtype, "dtype for the weight sizes")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}))
      ->capture_default_str();
  command->add_flag("--json", options->json, "print one JSON object");
  command->callback([options, &run] {
    run = [options] { return run_without_job([&] { return run_info(*options); }); };
  });
}

}  // namespace selfspec::launch
