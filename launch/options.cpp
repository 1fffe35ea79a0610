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

void EngineCliOptions::add_to(CLI::App& command) {
  command
      .add_option("--model", model_dir, "HuggingFace model directory (config.json + safetensors)")
      ->required()
      ->check(CLI::ExistingDirectory);
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
  options.model_dir = model_dir;
  options.tokenizer_path = tokenizer;
  options.weights_dtype = parse_weights_dtype(weights_dtype);
  options.ctx_size = ctx_size;
  options.device = device;
  options.cuda_graphs = cuda_graphs == "on";
  return options;
}

}  // namespace selfspec::launch
