#include "launch/options.hpp"

#include "core/error.hpp"

namespace selfspec::launch {

std::optional<DType> parse_weights_dtype(const std::string& text) {
  if (text == "auto") return std::nullopt;
  const std::optional<DType> dtype = parse_dtype(text);
  SELFSPEC_CHECK(dtype.has_value(), "--weights-dtype: unknown dtype '{}' (auto, f32, bf16, f16)",
                 text);
  return dtype;
}

void add_config_option(CLI::App& command) {
  command.add_option_function<std::string>(
      "--config", [](const std::string&) {},
      "run config (YAML, configs/runs/): its keys are this command's options without the "
      "dashes; options given on the command line win");
}

void EngineCliOptions::add_to(CLI::App& command) {
  add_config_option(command);
  command
      .add_option("--model", model_dir, "HuggingFace model directory (config.json + safetensors)")
      ->check(CLI::ExistingDirectory);
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
  command
      .add_option("--tp", tp,
                  "tensor-parallel degree the run expects; must equal the number of ranks "
                  "(mpirun -np / srun -n)")
      ->check(CLI::PositiveNumber);
  command
      .add_option("--tokenizer", tokenizer,
                  "tokenizer.json or tokenizer.model (default: the one in --model)")
      ->check(CLI::ExistingFile);
  command
      .add_option("--weights-dtype", weights_dtype,
                  "keep weights as stored (auto) or convert once at load")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}))
      ->capture_default_str();
  command
      .add_option("--ctx-size", ctx_size, "context length limit (default: max_position_embeddings)")
      ->check(CLI::NonNegativeNumber);
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
}

EngineOptions EngineCliOptions::engine_options() const {
  EngineOptions options;
  options.source.model_dir = model_dir;
  options.source.architecture_file = architecture;
  options.source.synthetic_weights = synthetic_weights;
  options.source.synthetic_seed = synthetic_seed;
  options.source.layers = layers;
  options.expected_tp = tp;
  options.tokenizer_path = tokenizer;
  options.weights_dtype = parse_weights_dtype(weights_dtype);
  options.ctx_size = ctx_size;
  options.device = device;
  options.cuda_graphs = cuda_graphs == "on";
  return options;
}

}  // namespace selfspec::launch
