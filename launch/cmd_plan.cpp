// `selfspec plan`: can this model run at this tensor-parallel degree, and does it fit? From the
// config alone — an architecture file or a model directory's config.json, never the weights — it
// validates the split (query heads, KV heads, intermediate, vocabulary), and prints per-rank bytes
// of weights, KV cache and forward workspace against an optional --gpu-memory budget.
// Exit status: 0 fits (or no budget given), 2 cannot be sharded, 3 exceeds the budget.
#include "core/error.hpp"
#include "launch/commands.hpp"
#include "launch/human_units.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "model/memory_plan.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_source.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <memory>

namespace selfspec::launch {
namespace {

constexpr int kExitCannotShard = 2;
constexpr int kExitOverBudget = 3;

struct PlanOptions {
  std::string model_dir;
  std::string architecture;
  std::int64_t layers = 0;
  int tp = 1;
  std::string weights_dtype = "auto";
  std::int64_t ctx_size = 0;
  std::int64_t prefill_chunk = 512;
  int max_draft = 12;
  double gpu_memory_gb = 0.0;
  double overhead_gb = 2.0;
  int gpus_per_node = 8;
  bool json = false;
};

int run_plan(const PlanOptions& options) {
  ModelSourceOptions source_options;
  source_options.model_dir = options.model_dir;
  source_options.architecture_file = options.architecture;
  source_options.layers = options.layers;
  // --layers applies to synthetic models; planning reads no weights either way.
  source_options.synthetic_weights = options.layers > 0;
  const ModelSource source = resolve_model_source(source_options);
  const ModelConfig& config = source.config;
  const std::int64_t context =
      options.ctx_size > 0 ? options.ctx_size : config.max_position_embeddings;
  const DType dtype = parse_weights_dtype(options.weights_dtype)
                          .value_or(config.torch_dtype.value_or(DType::kBF16));
  // A forward holds the prefill chunk or a verification of K drafts + 1 bonus token; logits for
  // the verified rows (prefill keeps only the last position's).
  const std::int64_t forward_tokens =
      std::max<std::int64_t>(options.prefill_chunk, options.max_draft + 1);
  const std::int64_t logit_rows = options.max_draft + 1;

  nlohmann::json out;
  out["model"] = source.name;
  out["source"] = source.description;
  out["architecture"] = {{"layers", config.num_layers},
                         {"hidden_size", config.hidden_size},
                         {"intermediate_size", config.intermediate_size},
                         {"attention_heads", config.num_heads},
                         {"kv_heads", config.num_kv_heads},
                         {"head_dim", config.head_dim},
                         {"vocab_size", config.vocab_size},
                         {"max_position_embeddings", config.max_position_embeddings}};
  out["parameters"] = config.parameter_count();
  out["weight_dtype"] = dtype_name(dtype);
  out["weights_total_bytes"] =
      static_cast<std::uint64_t>(config.parameter_count()) * dtype_size(dtype);
  out["context"] = context;
  out["forward_tokens"] = forward_tokens;
  out["tp"] = options.tp;
  out["nodes"] = (options.tp + options.gpus_per_node - 1) / options.gpus_per_node;

  const std::optional<std::string> problem = ShardPlan::check(config, options.tp);
  out["tp_valid"] = !problem.has_value();
  out["tp_reason"] = problem ? nlohmann::json(*problem) : nlohmann::json(nullptr);
  std::uint64_t largest = 0;
  RankMemory largest_rank;
  std::uint64_t largest_workspace = 0;
  bool replicated = false;
  nlohmann::json ranks = nlohmann::json::array();
  if (!problem) {
    for (int r = 0; r < options.tp; ++r) {
      const ShardPlan shard = ShardPlan::make(config, options.tp, r);
      replicated = shard.kv_replicated;
      const RankMemory memory = plan_rank_memory(config, shard, dtype, context);
      const std::uint64_t workspace =
          plan_workspace_bytes(config, shard, forward_tokens, logit_rows);
      const std::uint64_t total = memory.weight_bytes + memory.kv_cache_bytes + workspace;
      ranks.push_back({{"rank", r},
                       {"q_heads", {shard.q_heads.begin, shard.q_heads.end}},
                       {"kv_heads", {shard.kv_heads.begin, shard.kv_heads.end}},
                       {"intermediate", {shard.intermediate.begin, shard.intermediate.end}},
                       {"vocab", {shard.vocab.begin, shard.vocab.end}},
                       {"weight_bytes", memory.weight_bytes},
                       {"kv_cache_bytes", memory.kv_cache_bytes},
                       {"workspace_bytes", workspace},
                       {"total_bytes", total}});
      if (total > largest) {
        largest = total;
        largest_rank = memory;
        largest_workspace = workspace;
      }
    }
  }
  out["kv_heads_replicated"] = replicated;
  out["ranks"] = ranks;
  out["max_rank_bytes"] = largest;
  const bool budget = options.gpu_memory_gb > 0.0;
  const auto budget_bytes = static_cast<std::uint64_t>(options.gpu_memory_gb * 1e9);
  const auto overhead_bytes = static_cast<std::uint64_t>(options.overhead_gb * 1e9);
  const bool fits = !budget || largest + overhead_bytes <= budget_bytes;
  out["gpu_memory_bytes"] = budget ? nlohmann::json(budget_bytes) : nlohmann::json(nullptr);
  out["overhead_bytes"] = overhead_bytes;
  out["fits"] = problem ? nlohmann::json(nullptr) : nlohmann::json(fits);
  if (budget && !problem) {
    out["headroom_bytes"] = static_cast<std::int64_t>(budget_bytes) -
                            static_cast<std::int64_t>(largest + overhead_bytes);
  }

  const int status = problem ? kExitCannotShard : (fits ? 0 : kExitOverBudget);
  if (options.json) {
    fmt::print("{}\n", out.dump());
    return status;
  }
  fmt::print("model       {} ({})\n", source.name,
             options.architecture.empty() ? options.model_dir : options.architecture);
  fmt::print(
      "            {} layers, hidden {}, {} query / {} KV heads (head_dim {}), "
      "intermediate {}, vocab {}\n",
      config.num_layers, config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim,
      config.intermediate_size, config.vocab_size);
  fmt::print("parameters  {:.2f} B; {} weights {} in all\n",
             static_cast<double>(config.parameter_count()) / 1e9, dtype_name(dtype),
             human_bytes(out["weights_total_bytes"].get<std::uint64_t>()));
  if (problem) {
    fmt::print("tp {}        CANNOT SHARD: {}\n", options.tp, *problem);
    return status;
  }
  fmt::print("tp {}        valid{}; {} node(s) of {} GPUs\n", options.tp,
             replicated ? " (KV heads replicated: more ranks than KV heads)" : "",
             out["nodes"].get<int>(), options.gpus_per_node);
  fmt::print(
      "per rank    weights {} + KV cache {} ({} tokens, f32) + workspace {} ({}-token "
      "forwards) = {}\n",
      human_bytes(largest_rank.weight_bytes), human_bytes(largest_rank.kv_cache_bytes), context,
      human_bytes(largest_workspace), forward_tokens, human_bytes(largest));
  if (budget) {
    const double headroom = static_cast<double>(out["headroom_bytes"].get<std::int64_t>()) / 1e9;
    fmt::print("budget      {:.2f} GB per GPU, {:.2f} GB runtime overhead: {} ({:+.2f} GB)\n",
               options.gpu_memory_gb, options.overhead_gb, fits ? "fits" : "DOES NOT FIT",
               headroom);
  }
  return status;
}

}  // namespace

void add_plan_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* command = app.add_subcommand(
      "plan", "validate a tensor-parallel split and size per-rank memory (no weights read)");
  add_config_option(*command);
  command->add_option("--model", options->model_dir, "model directory (its config.json)")
      ->check(CLI::ExistingDirectory);
  command
      ->add_option("--architecture", options->architecture,
                   "architecture file (configs/models/*.yaml or a config.json)")
      ->check(CLI::ExistingFile);
  command->add_option("--layers", options->layers, "override the layer count")
      ->check(CLI::PositiveNumber);
  command->add_option("--tp", options->tp, "tensor-parallel degree")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--weights-dtype", options->weights_dtype,
                   "weight dtype (auto: the config's torch_dtype, else bf16)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}))
      ->capture_default_str();
  command
      ->add_option("--ctx-size", options->ctx_size,
                   "context of the KV cache (default: max_position_embeddings)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--prefill-chunk", options->prefill_chunk, "prompt tokens per forward")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--max-draft", options->max_draft, "drafts per verification (K)")
      ->check(CLI::Range(0, 63))
      ->capture_default_str();
  command
      ->add_option("--gpu-memory", options->gpu_memory_gb,
                   "memory per GPU in GB (10^9 bytes); exit 3 when a rank would not fit")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--overhead-gb", options->overhead_gb,
                   "memory per GPU kept for the CUDA context, cuBLAS and NCCL buffers")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--gpus-per-node", options->gpus_per_node, "GPUs per node")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_flag("--json", options->json, "print one JSON object");
  command->callback([options, &run] {
    run = [options] { return run_without_job([&] { return run_plan(*options); }); };
  });
}

}  // namespace selfspec::launch
