// `selfspec info`: architecture summary, parameter count, per-rank memory for weights and KV
// cache, and whether a tensor-parallel degree is valid (with the reason when it is not).
// Reads config.json and, when present, the checkpoint headers (validated), or a GGUF file's
// metadata and tensor infos — never the weights.
#include "core/error.hpp"
#include "core/human_units.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "launch/rank_plan.hpp"
#include "launch/report.hpp"
#include "model/shard_plan.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/gguf_file.hpp"
#include "model_io/gguf_tensor_source.hpp"
#include "model_io/model_config.hpp"
#include "model_io/model_source.hpp"
#include "model_io/safetensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace selfspec::launch {
namespace {

struct InfoOptions {
  std::string model_path;
  int tp = 1;
  std::int64_t ctx_size = 0;
  std::string weights_dtype = "auto";
  std::string kv_dtype = "auto";
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

// "Q4_K x 84, F32 x 61".
std::string dtype_counts(const nlohmann::json& counts) {
  std::vector<std::string> parts;
  for (const auto& [name, count] : counts.items()) {
    parts.push_back(fmt::format("{} x {}", name, count.get<int>()));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string attention_kind(const ModelConfig& config) {
  return config.num_kv_heads == config.num_heads ? "multi-head" : "grouped-query";
}

// The summary of a safetensors checkpoint validated against the config, and its stored dtype;
// null when the directory has no weights (a config.json alone).
nlohmann::json safetensors_summary(const std::filesystem::path& dir, const ModelConfig& config,
                                   std::optional<DType>& stored) {
  const bool has_checkpoint = std::filesystem::exists(dir / "model.safetensors") ||
                              std::filesystem::exists(dir / "model.safetensors.index.json");
  if (!has_checkpoint) return nullptr;
  const Checkpoint opened = Checkpoint::open(dir);
  validate_checkpoint(opened, config);
  std::map<std::string, int> dtypes;
  for (const std::string& name : opened.tensor_names()) {
    ++dtypes[std::string(dtype_name(opened.tensor(name).dtype))];
  }
  stored = opened.tensor("model.embed_tokens.weight").dtype;
  return {{"format", "safetensors"},
          {"files", opened.file_count()},
          {"bytes", opened.total_bytes()},
          {"tensors", opened.tensor_names().size()},
          {"dtypes", dtypes},
          {"valid", true}};
}

// The summary of a GGUF file validated against the config (tensor types by count).
nlohmann::json gguf_summary(const std::filesystem::path& path, const ModelConfig& config) {
  const GgufFile file(path);
  GgufTensorSource(file, config).validate(config);
  std::map<std::string, int> types;
  for (const GgufTensorInfo& info : file.tensors()) ++types[std::string(ggml_type_name(info.type))];
  return {{"format", "gguf"},
          {"version", file.version()},
          {"files", 1},
          {"bytes", file.bytes().size()},
          {"tensors", file.tensors().size()},
          {"dtypes", types},
          {"name", file.find_string("general.name").value_or("")},
          {"valid", true}};
}

// How the weights will be held: the requested dtype, else a GGUF's tensors as the CPU backend
// holds them (quantized ones as stored), else what a safetensors checkpoint stores, else
// config's torch_dtype, else bf16. `checkpoint` becomes the JSON summary of the weights when there
// are any.
WeightPlan weight_plan(const InfoOptions& options, const ModelSource& source,
                       nlohmann::json& checkpoint) {
  std::optional<DType> stored;
  checkpoint = source.gguf ? gguf_summary(source.model_path, source.config)
                           : safetensors_summary(source.model_path, source.config, stored);
  return plan_weights(source, parse_weights_dtype(options.weights_dtype),
                      stored.value_or(source.config.torch_dtype.value_or(DType::kBF16)),
                      parse_quantized_weights_format(options.weights_dtype));
}

// "q4_k 757.8 MB, q6_k 354.0 MB, f32 579.6 kB": a rank's weights by format, largest first.
std::string bytes_by_format_text(const std::map<std::string, std::uint64_t>& by_format) {
  std::vector<std::pair<std::string, std::uint64_t>> sorted(by_format.begin(), by_format.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> parts;
  for (const auto& [format, bytes] : sorted) {
    parts.push_back(fmt::format("{} {}", format, human_bytes(bytes)));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

nlohmann::json architecture_json(const ModelConfig& config) {
  nlohmann::json out = geometry_json(config);
  out.update({{"model_type", config.model_type},
              {"rope_theta", config.rope_theta},
              {"rope_scaling", rope_scaling_name(config.rope_scaling.type)},
              {"attention_bias", config.attention_bias},
              {"tie_word_embeddings", config.tie_word_embeddings},
              {"attention", attention_kind(config)}});
  return out;
}

void print_info(const InfoOptions& options, const ModelConfig& config, const std::string& weights,
                const nlohmann::json& checkpoint, std::int64_t context,
                const std::vector<RankPlan>& ranks) {
  fmt::print("model        {}\n", options.model_path);
  fmt::print("architecture {} ({}), {} layers, hidden {}, intermediate {}, vocab {}\n",
             config.model_type, attention_kind(config), config.num_layers, config.hidden_size,
             config.intermediate_size, config.vocab_size);
  fmt::print("attention    {} query heads, {} KV heads, head_dim {}, bias {}\n", config.num_heads,
             config.num_kv_heads, config.head_dim, config.attention_bias ? "yes" : "no");
  fmt::print("rope         theta {}, scaling {}, context {}\n", config.rope_theta,
             rope_scaling_name(config.rope_scaling.type), config.max_position_embeddings);
  fmt::print("parameters   {} ({:.3f} B), weights {}, tied embeddings {}\n",
             config.parameter_count(), static_cast<double>(config.parameter_count()) / 1e9, weights,
             config.tie_word_embeddings ? "yes" : "no");
  if (!checkpoint.is_null()) {
    fmt::print("checkpoint   {} {} file(s), {}, {} tensors ({}), valid\n",
               checkpoint["format"].get<std::string>(), checkpoint["files"].get<int>(),
               human_bytes(checkpoint["bytes"].get<std::uint64_t>()),
               checkpoint["tensors"].get<std::size_t>(), dtype_counts(checkpoint["dtypes"]));
  }
  if (ranks.empty()) return;
  fmt::print("tp {}         valid{}; per rank at context {}:\n", options.tp,
             ranks.front().shard.kv_replicated ? " (KV heads replicated)" : "", context);
  for (const RankPlan& rank : ranks) {
    fmt::print("  rank {}: weights {} ({}), KV cache {}\n", rank.rank(),
               human_bytes(rank.memory.weight_bytes),
               bytes_by_format_text(rank.memory.weight_bytes_by_format),
               human_bytes(rank.memory.kv_cache_bytes));
  }
}

int run_info(const InfoOptions& options) {
  ModelSourceOptions source_options;
  source_options.model_path = options.model_path;
  const ModelSource source = resolve_model_source(source_options);
  const ModelConfig& config = source.config;
  const std::int64_t context =
      options.ctx_size > 0 ? options.ctx_size : config.max_position_embeddings;
  nlohmann::json checkpoint = nullptr;
  const WeightPlan weights = weight_plan(options, source, checkpoint);
  std::optional<std::string> tp_problem =
      ShardPlan::check(config, options.tp, weights.intermediate_unit);
  // auto: what the CPU backend uses, as the weights are described (EngineOptions::kv_dtype).
  const DType kv_dtype = parse_kv_dtype(options.kv_dtype).value_or(DType::kF32);
  std::vector<RankPlan> ranks;
  if (!tp_problem) {
    ranks = plan_ranks(config, options.tp, weights.format_of, context, std::nullopt,
                       weights.intermediate_unit, std::nullopt, kv_dtype);
  }

  if (options.json) {
    nlohmann::json out;
    out["model"] = options.model_path;
    out["architecture"] = architecture_json(config);
    out["parameters"] = config.parameter_count();
    out["weight_dtype"] = weights.label;
    out["context"] = context;
    out["kv_dtype"] = std::string(dtype_name(kv_dtype));
    out["checkpoint"] = checkpoint;
    out["tp"] = options.tp;
    out["tp_valid"] = !tp_problem.has_value();
    out["tp_reason"] = tp_problem ? nlohmann::json(*tp_problem) : nlohmann::json(nullptr);
    out["kv_heads_replicated"] = !ranks.empty() && ranks.front().shard.kv_replicated;
    out["ranks"] = nlohmann::json::array();
    for (const RankPlan& rank : ranks) out["ranks"].push_back(to_json(rank));
    print_json_line(out);
    return tp_problem ? 2 : 0;
  }
  print_info(options, config, weights.label, checkpoint, context, ranks);
  if (tp_problem) {
    fmt::print("tp {}         INVALID: {}\n", options.tp, *tp_problem);
    return 2;
  }
  return 0;
}

}  // namespace

void add_info_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* command =
      app.add_subcommand("info", "architecture, parameters, per-rank memory, TP validity");
  add_config_option(*command);
  command
      ->add_option("--model", options->model_path,
                   "model directory (config.json) or GGUF file (or a directory holding one)")
      ->required()
      ->check(CLI::ExistingPath);
  add_tp_option(*command, options->tp, "to check");
  add_ctx_size_option(*command, options->ctx_size, "of the KV cache");
  add_kv_dtype_option(*command, options->kv_dtype, "f32, as the CPU backend");
  add_weights_dtype_option(
      *command, options->weights_dtype,
      "as the checkpoint stores them (a GGUF's: as the CPU backend holds them, quantized types "
      "as stored), else the config's torch_dtype, else bf16");
  add_json_flag(*command, options->json, "the summary");
  command->callback([options, &run] {
    run = [options] { return run_without_job([&] { return run_info(*options); }); };
  });
}

}  // namespace selfspec::launch
