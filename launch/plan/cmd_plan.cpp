// `selfspec plan`: can this model run at this tensor-parallel degree, and does it fit? From the
// config alone — an architecture file or a model directory's config.json, never the weights — it
// validates the split (query heads, KV heads, intermediate, vocabulary), and prints per-rank bytes
// of weights, KV cache and forward workspace against an optional --gpu-memory budget.
// With --comm-table it also predicts the per-token decode latency, plain and self-speculative,
// from a comm table (launch/plan/plan_cost.hpp, launch/plan/comm_cost_model.hpp).
// Exit status: 0 fits (or no budget given), 2 cannot be sharded, 3 exceeds the budget.
#include "core/error.hpp"
#include "core/human_units.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "launch/plan/plan_cost.hpp"
#include "launch/rank_plan.hpp"
#include "launch/report.hpp"
#include "launch/speculative_cli.hpp"
#include "model/shard_plan.hpp"
#include "model_io/model_source.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace selfspec::launch {
namespace {

constexpr int kExitCannotShard = 2;
constexpr int kExitOverBudget = 3;

struct PlanOptions {
  std::string model_path;
  std::string architecture;
  std::int64_t layers = 0;
  int tp = 1;
  std::string weights_dtype = "auto";
  std::string kv_dtype = "auto";
  std::int64_t ctx_size = 0;
  std::int64_t prefill_chunk = 512;
  int max_draft = 12;
  std::string draft_weights = "none";
  double gpu_memory_gb = 0.0;
  double overhead_gb = 2.0;
  int gpus_per_node = 8;
  bool json = false;
  PlanCostOptions cost;
};

// The configuration the options name (no weights read).
ModelSource plan_source(const PlanOptions& options) {
  ModelSourceOptions source_options;
  source_options.model_path = options.model_path;
  source_options.architecture_file = options.architecture;
  source_options.layers = options.layers;
  // --layers applies to synthetic models; planning reads no weights either way.
  source_options.synthetic_weights = options.layers > 0;
  return resolve_model_source(source_options);
}

// The rank that needs the most memory (the first of equals); `ranks` must not be empty.
const RankPlan& largest_rank(const std::vector<RankPlan>& ranks) {
  return *std::max_element(ranks.begin(), ranks.end(), [](const RankPlan& a, const RankPlan& b) {
    return a.total_bytes() < b.total_bytes();
  });
}

// Everything `plan` reports, in its JSON form (the text output reads it too).
struct Plan {
  nlohmann::json json;
  std::vector<RankPlan> ranks;
  std::optional<std::string> problem;
  bool budget = false;
  bool fits = true;
  std::optional<PlanCost> cost;  // with --comm-table, for a valid split
};

Plan make_plan(const PlanOptions& options, const ModelSource& source) {
  const ModelConfig& config = source.config;
  const std::int64_t context =
      options.ctx_size > 0 ? options.ctx_size : config.max_position_embeddings;
  const WeightPlan weights = plan_weights(source, parse_weights_dtype(options.weights_dtype),
                                          config.torch_dtype.value_or(DType::kBF16),
                                          parse_quantized_weights_format(options.weights_dtype));
  // A forward holds the prefill chunk or a verification of K drafts + 1 bonus token; logits for
  // the verified rows (prefill keeps only the last position's).
  const ForwardShape forward{std::max<std::int64_t>(options.prefill_chunk, options.max_draft + 1),
                             options.max_draft + 1};
  // A quantized draft copy cuts the intermediate dimension at 32-feature groups, as the engine
  // does (EngineOptions::quantized_draft_weights).
  const std::optional<WeightFormat> draft = parse_weight_format(options.draft_weights);
  const std::int64_t unit =
      draft && is_quantized(*draft) ? std::int64_t{32} : weights.intermediate_unit;
  // auto: what a GPU run uses (EngineOptions::kv_dtype), since plan sizes GPU memory.
  const DType kv_dtype = parse_kv_dtype(options.kv_dtype).value_or(DType::kBF16);
  Plan plan;
  plan.problem = ShardPlan::check(config, options.tp, unit);
  if (!plan.problem) {
    plan.ranks =
        plan_ranks(config, options.tp, weights.format_of, context, forward, unit, draft, kv_dtype);
  }
  const std::uint64_t largest_bytes =
      plan.ranks.empty() ? 0 : largest_rank(plan.ranks).total_bytes();
  plan.budget = options.gpu_memory_gb > 0.0;
  const auto budget_bytes = static_cast<std::uint64_t>(options.gpu_memory_gb * 1e9);
  const auto overhead_bytes = static_cast<std::uint64_t>(options.overhead_gb * 1e9);
  plan.fits = !plan.budget || largest_bytes + overhead_bytes <= budget_bytes;

  nlohmann::json& out = plan.json;
  out["model"] = source.name;
  out["source"] = source.description;
  out["architecture"] = geometry_json(config);
  out["parameters"] = config.parameter_count();
  out["weight_dtype"] = weights.label;
  // The whole model's weights as held (one rank's worth at TP 1).
  const RankMemory whole = plan_rank_memory(
      config, ShardPlan::make(config, 1, 0, weights.intermediate_unit), weights.format_of, context);
  out["weights_total_bytes"] = whole.weight_bytes;
  out["weight_bytes_by_format"] = whole.weight_bytes_by_format;
  out["context"] = context;
  out["kv_dtype"] = std::string(dtype_name(kv_dtype));
  out["forward_tokens"] = forward.tokens;
  out["draft_weights"] = options.draft_weights;
  out["tp"] = options.tp;
  out["nodes"] = (options.tp + options.gpus_per_node - 1) / options.gpus_per_node;
  out["tp_valid"] = !plan.problem.has_value();
  out["tp_reason"] = plan.problem ? nlohmann::json(*plan.problem) : nlohmann::json(nullptr);
  out["kv_heads_replicated"] = !plan.ranks.empty() && plan.ranks.back().shard.kv_replicated;
  out["ranks"] = nlohmann::json::array();
  for (const RankPlan& rank : plan.ranks) out["ranks"].push_back(to_json(rank));
  out["max_rank_bytes"] = largest_bytes;
  out["gpu_memory_bytes"] = plan.budget ? nlohmann::json(budget_bytes) : nlohmann::json(nullptr);
  out["overhead_bytes"] = overhead_bytes;
  out["fits"] = plan.problem ? nlohmann::json(nullptr) : nlohmann::json(plan.fits);
  if (plan.budget && !plan.problem) {
    out["headroom_bytes"] = static_cast<std::int64_t>(budget_bytes) -
                            static_cast<std::int64_t>(largest_bytes + overhead_bytes);
  }
  if (!options.cost.comm_table.empty()) {
    if (!plan.problem) {
      plan.cost = plan_cost(options.cost, config, plan.ranks, weights.format_of,
                            parse_weight_format(options.draft_weights));
    }
    out["cost_model"] = plan.cost ? plan_cost_json(*plan.cost) : nlohmann::json(nullptr);
  }
  return plan;
}

void print_plan(const PlanOptions& options, const ModelSource& source, const Plan& plan) {
  const ModelConfig& config = source.config;
  const nlohmann::json& out = plan.json;
  fmt::print("model       {} ({})\n", source.name,
             options.architecture.empty() ? options.model_path : options.architecture);
  fmt::print(
      "            {} layers, hidden {}, {} query / {} KV heads (head_dim {}), "
      "intermediate {}, vocab {}\n",
      config.num_layers, config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim,
      config.intermediate_size, config.vocab_size);
  fmt::print("parameters  {:.2f} B; {} weights {} in all\n",
             static_cast<double>(config.parameter_count()) / 1e9,
             out["weight_dtype"].get<std::string>(),
             human_bytes(out["weights_total_bytes"].get<std::uint64_t>()));
  if (plan.problem) {
    fmt::print("tp {}        CANNOT SHARD: {}\n", options.tp, *plan.problem);
    return;
  }
  fmt::print("tp {}        valid{}; {} node(s) of {} GPUs\n", options.tp,
             out["kv_heads_replicated"].get<bool>()
                 ? " (KV heads replicated: more ranks than KV heads)"
                 : "",
             out["nodes"].get<int>(), options.gpus_per_node);
  const RankPlan& largest = largest_rank(plan.ranks);  // a valid split has ranks
  fmt::print(
      "per rank    weights {}{} + KV cache {} ({} tokens, {}) + workspace {} ({}-token "
      "forwards) = {}\n",
      human_bytes(largest.memory.weight_bytes),
      largest.draft_weight_bytes > 0 ? fmt::format(" + {} draft copy {}", options.draft_weights,
                                                   human_bytes(largest.draft_weight_bytes))
                                     : std::string(),
      human_bytes(largest.memory.kv_cache_bytes), out["context"].get<std::int64_t>(),
      out["kv_dtype"].get<std::string>(), human_bytes(largest.workspace_bytes.value_or(0)),
      out["forward_tokens"].get<std::int64_t>(), human_bytes(largest.total_bytes()));
  if (plan.budget) {
    const double headroom = static_cast<double>(out["headroom_bytes"].get<std::int64_t>()) / 1e9;
    fmt::print("budget      {:.2f} GB per GPU, {:.2f} GB runtime overhead: {} ({:+.2f} GB)\n",
               options.gpu_memory_gb, options.overhead_gb, plan.fits ? "fits" : "DOES NOT FIT",
               headroom);
  }
}

int run_plan(const PlanOptions& options) {
  const ModelSource source = plan_source(options);
  const Plan plan = make_plan(options, source);
  const int status = plan.problem ? kExitCannotShard : (plan.fits ? 0 : kExitOverBudget);
  if (options.json) {
    print_json_line(plan.json);
  } else {
    print_plan(options, source, plan);
    if (plan.cost) print_plan_cost(*plan.cost, options.tp);
  }
  return status;
}

}  // namespace

void add_plan_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* command = app.add_subcommand(
      "plan", "validate a tensor-parallel split and size per-rank memory (no weights read)");
  add_config_option(*command);
  command
      ->add_option("--model", options->model_path,
                   "model directory (its config.json) or GGUF file (its metadata)")
      ->check(CLI::ExistingPath);
  command
      ->add_option("--architecture", options->architecture,
                   "architecture file (configs/models/*.yaml or a config.json)")
      ->check(CLI::ExistingFile);
  command->add_option("--layers", options->layers, "override the layer count")
      ->check(CLI::PositiveNumber);
  add_tp_option(*command, options->tp, "to plan for");
  add_weights_dtype_option(*command, options->weights_dtype, "the config's torch_dtype, else bf16");
  add_ctx_size_option(*command, options->ctx_size, "of the KV cache");
  add_kv_dtype_option(*command, options->kv_dtype, "bf16, what a GPU run uses");
  add_prefill_chunk_option(*command, options->prefill_chunk);
  add_max_draft_option(*command, options->max_draft);
  add_draft_weights_option(*command, options->draft_weights);
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
  add_plan_cost_options(*command, options->cost);
  add_json_flag(*command, options->json, "the summary");
  command->callback([options, &run] {
    run = [options] { return run_without_job([&] { return run_plan(*options); }); };
  });
}

}  // namespace selfspec::launch
