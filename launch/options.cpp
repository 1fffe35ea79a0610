#include "launch/options.hpp"

#include "comm/mpi_runtime.hpp"
#include "core/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <vector>

namespace selfspec::launch {

namespace {

// auto, native, the dense dtypes, and the quantized formats (synthetic weights stored quantized).
std::vector<std::string> weights_dtype_choices() {
  std::vector<std::string> choices = {"auto", "native", "f32", "bf16", "f16"};
  for (const WeightFormat format : kQuantizedFormats) {
    choices.emplace_back(weight_format_name(format));
  }
  return choices;
}

}  // namespace

std::optional<DType> parse_weights_dtype(const std::string& text) {
  if (text == "auto" || text == "native" || parse_quantized_weights_format(text)) {
    return std::nullopt;
  }
  const std::optional<DType> dtype = parse_dtype(text);
  SELFSPEC_CHECK(dtype.has_value(), "--weights-dtype: unknown dtype '{}' ({})", text,
                 fmt::join(weights_dtype_choices(), ", "));
  return dtype;
}

std::optional<WeightFormat> parse_quantized_weights_format(const std::string& text) {
  for (const WeightFormat format : kQuantizedFormats) {
    if (text == weight_format_name(format)) return format;
  }
  return std::nullopt;
}

void add_config_option(CLI::App& command) {
  command.add_option_function<std::string>(
      "--config", [](const std::string&) {},
      "run config (YAML, configs/runs/): its keys are this command's options without the "
      "dashes; options given on the command line win");
}

CLI::Option* add_tp_option(CLI::App& command, int& tp, std::string_view purpose) {
  CLI::Option* option =
      command.add_option("--tp", tp, fmt::format("tensor-parallel degree {}", purpose))
          ->check(CLI::PositiveNumber);
  if (tp > 0) option->capture_default_str();
  return option;
}

std::optional<std::string> tp_unavailable_reason(int tp, bool mpi_built) {
  if (tp <= 1 || mpi_built) return std::nullopt;
  return fmt::format(
      "--tp {}: this selfspec was built without MPI (SELFSPEC_MPI=OFF, or CMake found no MPI) and "
      "runs a single rank; tensor parallelism needs {} MPI ranks. Rebuild with MPI (Debian: "
      "libopenmpi-dev openmpi-bin) and launch with mpirun -np {} / srun -n {}, or use --tp 1",
      tp, tp, tp, tp);
}

CLI::Option* add_ctx_size_option(CLI::App& command, std::int64_t& ctx_size,
                                 std::string_view purpose) {
  return command
      .add_option("--ctx-size", ctx_size,
                  fmt::format("context length {} (default: max_position_embeddings)", purpose))
      ->check(CLI::NonNegativeNumber);
}

CLI::Option* add_weights_dtype_option(CLI::App& command, std::string& dtype,
                                      std::string_view auto_means) {
  return command
      .add_option("--weights-dtype", dtype,
                  fmt::format("weight dtype (auto: {}; a quantized format: synthetic weights "
                              "stored in it)",
                              auto_means))
      ->check(CLI::IsMember(weights_dtype_choices()))
      ->capture_default_str();
}

CLI::Option* add_kv_dtype_option(CLI::App& command, std::string& dtype,
                                 std::string_view auto_means) {
  return command
      .add_option("--kv-dtype", dtype,
                  fmt::format("KV cache element type: f32 (exact), bf16 (half the bytes; each K/V "
                              "value rounded to nearest even) or auto ({})",
                              auto_means))
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->capture_default_str();
}

std::optional<DType> parse_kv_dtype(const std::string& text) {
  if (text == "auto") return std::nullopt;
  if (text == "f32") return DType::kF32;
  if (text == "bf16") return DType::kBF16;
  fail("--kv-dtype: unknown KV cache type '{}' (auto, f32, bf16)", text);
}

CLI::Option* add_prefill_chunk_option(CLI::App& command, std::int64_t& chunk) {
  return command.add_option("--prefill-chunk", chunk, "prompt tokens per forward")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void add_prompt_selection_options(CLI::App& command, std::vector<std::string>& files,
                                  PromptSelection& selection, std::string_view split_help) {
  command
      .add_option("--prompts-file", files,
                  "prompt suites: JSON Lines files (id, task, split, prompt; "
                  "bench/prompts/README.md), comma-separated")
      ->required()
      ->check(CLI::ExistingFile)
      ->delimiter(',');
  command.add_option("--split", selection.split, std::string(split_help))
      ->check(CLI::IsMember(kPromptSplitChoices))
      ->capture_default_str();
  command.add_option("--tasks", selection.tasks, "only these tasks' prompts (comma-separated)")
      ->check(CLI::IsMember(known_prompt_tasks()))
      ->delimiter(',');
  command
      .add_option("--max-prompts-per-task", selection.max_per_task,
                  "at most this many prompts of each task (the first in file order)")
      ->check(CLI::PositiveNumber);
}

CLI::Option* add_seed_option(CLI::App& command, std::uint64_t& seed, std::string_view help) {
  return command.add_option("--seed", seed, std::string(help))->capture_default_str();
}

CLI::Option* add_json_flag(CLI::App& command, bool& json, std::string_view instead_of) {
  return command.add_flag(
      "--json", json,
      fmt::format("print the result as one JSON object, the last line of stdout, instead of {}",
                  instead_of));
}

CLI::Option* add_out_jsonl_option(CLI::App& command, std::string& path, std::string_view records) {
  return command.add_option(
      "--out-jsonl", path,
      fmt::format("append {} to this file as JSON Lines, each flushed as it is written (a "
                  "preempted job keeps what it finished)",
                  records));
}

void SamplingCli::add_to(CLI::App& command, std::string_view seed_help) {
  command.add_option("--temperature", temperature, "0 = greedy")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--top-k", top_k, "keep the k most likely tokens (0 = off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--top-p", top_p, "nucleus sampling mass (1 = off)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  add_seed_option(command, seed, seed_help);
}

SamplingParams SamplingCli::params() const {
  const SamplingParams sampling{temperature, top_k, top_p, seed};
  sampling.validate();
  return sampling;
}

void OutputCli::add_to(CLI::App& command, std::string_view json_instead_of,
                       std::string_view jsonl_records) {
  add_json_flag(command, json, json_instead_of);
  add_out_jsonl_option(command, out_jsonl, jsonl_records);
}

std::unique_ptr<JsonlWriter> OutputCli::open_jsonl(bool is_root) const {
  if (!is_root || out_jsonl.empty()) return nullptr;
  return std::make_unique<JsonlWriter>(out_jsonl);
}

CLI::Option* ChatCli::add_to(CLI::App& command, std::string_view prompt_what) {
  CLI::Option* chat_flag = command.add_flag(
      "--chat", chat,
      fmt::format("apply the model's chat template (ChatML, LLaMA-2 or LLaMA-3) to {}, as the "
                  "user message; BOS and the like come from the template",
                  prompt_what));
  system_option_ =
      command.add_option("--system", system, "with --chat: a system message before the prompt")
          ->needs(chat_flag);
  return chat_flag;
}

std::vector<ChatMessage> ChatCli::messages(std::string_view user) const {
  const bool has_system = system_option_ != nullptr && system_option_->count() > 0;
  return single_turn_chat(user, has_system ? std::optional<std::string>(system) : std::nullopt);
}

std::vector<std::int32_t> ChatCli::encode(const Tokenizer& tokenizer, std::string_view user) const {
  return encode_chat(tokenizer, messages(user), true);
}

void print_json_line(const nlohmann::json& record) {
  fmt::print("{}\n", record.dump());
  std::fflush(stdout);
}

void EngineCliOptions::add_to(CLI::App& command) {
  add_config_option(command);
  command
      .add_option("--model", model_path,
                  "HuggingFace model directory (config.json + safetensors), or a GGUF file (or a "
                  "directory holding one)")
      ->check(CLI::ExistingPath);
  command
      .add_option("--architecture", architecture,
                  "architecture file (configs/models/*.yaml or a config.json): run its geometry "
                  "with seeded synthetic weights")
      ->check(CLI::ExistingFile);
  command.add_flag("--synthetic-weights", synthetic_weights,
                   "with --model: use the model's config and tokenizer but seeded random weights");
  command.add_option("--synthetic-seed", synthetic_seed, "seed of the synthetic weights")
      ->capture_default_str();
  command
      .add_option("--layers", layers,
                  "override the layer count of a synthetic model (e.g. 70B geometry, 2 layers)")
      ->check(CLI::PositiveNumber);
  add_tp_option(command, tp,
                mpi_built()
                    ? "the run expects; must equal the number of ranks (mpirun -np / srun -n)"
                    : "the run expects; 1 only: this build has no MPI");
  command
      .add_option("--tokenizer", tokenizer,
                  "tokenizer.json, tokenizer.model or a .gguf file (default: the one of --model)")
      ->check(CLI::ExistingFile);
  add_weights_dtype_option(
      command, weights_dtype,
      "keep the weights as stored; a GGUF's quantized tensors run as stored on the CPU and "
      "dequantize to bf16 on a GPU. native: as stored, and an error on a GPU. The others "
      "convert once at load");
  add_kv_dtype_option(command, kv_dtype, "bf16 on a GPU, f32 on the CPU");
  add_ctx_size_option(command, ctx_size, "limit");
  command
      .add_option("--threads", threads, "worker threads per rank (default: cores / local ranks)")
      ->check(CLI::NonNegativeNumber);
  command
      .add_option("--device", device,
                  "compute backend: cpu, cuda (GPU local_rank % count), or auto (cuda when a GPU "
                  "is usable)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  command
      .add_option("--cuda-graphs", cuda_graphs,
                  "record decode/verification forwards as CUDA graphs and replay them")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  command
      .add_option("--reduction", reduction,
                  "how row-parallel projections add the ranks' partial sums: rank-order (fast), "
                  "tp-invariant (a fixed partition, and rank 0 decides from whole logit "
                  "rows: the same bits and draws at every TP degree; CPU backend) or auto "
                  "(tp-invariant on the CPU backend, rank-order on a GPU)")
      ->check(CLI::IsMember({"rank-order", "tp-invariant", "auto"}))
      ->capture_default_str();
}

EngineOptions EngineCliOptions::engine_options() const {
  if (const std::optional<std::string> reason = tp_unavailable_reason(tp, mpi_built())) {
    fail("{}", *reason);
  }
  EngineOptions options;
  options.source.model_path = model_path;
  options.source.architecture_file = architecture;
  options.source.synthetic_weights = synthetic_weights;
  options.source.synthetic_seed = synthetic_seed;
  options.source.layers = layers;
  options.expected_tp = tp;
  options.tokenizer_path = tokenizer;
  options.weights_dtype = parse_weights_dtype(weights_dtype);
  options.synthetic_matrix_format = parse_quantized_weights_format(weights_dtype);
  options.native_weights_required = weights_dtype == "native";
  options.kv_dtype = parse_kv_dtype(kv_dtype);  // nullopt: auto
  options.ctx_size = ctx_size;
  options.device = device;
  options.cuda_graphs = cuda_graphs == "on";
  options.reduction = parse_reduction_order(reduction);  // nullopt: auto
  return options;
}

}  // namespace selfspec::launch
