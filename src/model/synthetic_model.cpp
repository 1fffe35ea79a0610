#include "model/synthetic_model.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "model/llama_weights.hpp"
#include "model/safetensors_writer.hpp"

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

namespace selfspec {
namespace {

std::uint64_t fnv1a(std::string_view text, std::uint64_t seed) {
  std::uint64_t hash = 0xcbf29ce484222325ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// Standard deviation (and constant for norms) of a tensor from its name.
struct Init {
  bool constant = false;
  double value = 0.0;  // constant value, or standard deviation
};

// The layer index in "model.layers.<l>.…", or -1.
int layer_of(const std::string& name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!name.starts_with(kPrefix)) return -1;
  return std::stoi(name.substr(kPrefix.size()));
}

double planted_scale(const std::vector<double>& scales, int layer) {
  return layer >= 0 && static_cast<std::size_t>(layer) < scales.size()
             ? scales[static_cast<std::size_t>(layer)]
             : 1.0;
}

Init init_for(const SyntheticModelSpec& spec, const std::string& name) {
  const ModelConfig& config = spec.config;
  const double layers = static_cast<double>(config.num_layers);
  if (name.ends_with("norm.weight")) return {true, 1.0};
  if (name.ends_with(".bias")) return {false, 0.02};
  if (name == "model.embed_tokens.weight") return {false, 1.0};
  const double hidden = static_cast<double>(config.hidden_size);
  if (name == "lm_head.weight") return {false, spec.lm_head_scale / std::sqrt(hidden)};
  if (name.ends_with("o_proj.weight")) {
    return {false, planted_scale(spec.attention_scale, layer_of(name)) /
                       std::sqrt(static_cast<double>(config.q_dim())) / std::sqrt(2.0 * layers)};
  }
  if (name.ends_with("down_proj.weight")) {
    return {false, planted_scale(spec.mlp_scale, layer_of(name)) /
                       std::sqrt(static_cast<double>(config.intermediate_size)) /
                       std::sqrt(2.0 * layers)};
  }
  return {false, 1.0 / std::sqrt(hidden)};  // q, k, v, gate, up
}

}  // namespace

ModelConfig make_synthetic_config(std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                                  std::int64_t kv_heads, std::int64_t intermediate,
                                  std::int64_t vocab) {
  ModelConfig config;
  config.model_type = "llama";
  config.num_layers = layers;
  config.hidden_size = hidden;
  config.num_heads = heads;
  config.num_kv_heads = kv_heads;
  config.head_dim = heads > 0 ? hidden / heads : 0;
  config.intermediate_size = intermediate;
  config.vocab_size = vocab;
  config.max_position_embeddings = 2048;
  config.rms_norm_eps = 1e-5;
  config.rope_theta = 10000.0;
  config.bos_token_id = vocab > 1 ? std::optional<std::int32_t>(1) : std::nullopt;
  config.eos_token_ids = vocab > 2 ? std::vector<std::int32_t>{2} : std::vector<std::int32_t>{};
  return config;
}

std::vector<float> synthetic_tensor_values(const SyntheticModelSpec& spec, const std::string& name,
                                           std::int64_t numel) {
  std::vector<float> values(static_cast<std::size_t>(numel));
  const Init init = init_for(spec, name);
  if (init.constant) {
    std::fill(values.begin(), values.end(), static_cast<float>(init.value));
    return values;
  }
  boost::random::mt19937_64 engine(fnv1a(name, spec.seed));
  boost::random::normal_distribution<double> normal(0.0, init.value);
  for (float& v : values) v = static_cast<float>(normal(engine));
  return values;
}

std::uint64_t write_synthetic_model(const SyntheticModelSpec& spec,
                                    const std::filesystem::path& dir) {
  spec.config.validate("make-model");
  std::filesystem::create_directories(dir);
  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  writer.set_metadata("generator", "selfspec make-model");
  writer.set_metadata("seed", std::to_string(spec.seed));
  std::uint64_t total = 0;
  const std::vector<ExpectedTensor> tensors = expected_tensors(spec.config);
  for (const ExpectedTensor& tensor : tensors) {
    if (!tensor.required) continue;
    std::int64_t numel = 1;
    for (std::int64_t d : tensor.shape) numel *= d;
    total += static_cast<std::uint64_t>(numel) * dtype_size(spec.dtype);
    writer.add(tensor.name, spec.dtype, tensor.shape,
               [&spec, name = tensor.name, numel](std::span<std::byte> out) {
                 const std::vector<float> values = synthetic_tensor_values(spec, name, numel);
                 convert_dtype(DType::kF32, values.data(), spec.dtype, out.data(), values.size());
               });
  }
  ModelConfig config = spec.config;
  config.torch_dtype = spec.dtype;
  {
    std::ofstream out(dir / "config.json");
    SELFSPEC_CHECK(out.good(), "cannot write {}", (dir / "config.json").string());
    out << config.to_json().dump(2) << "\n";
  }
  writer.write(dir, spec.max_shard_bytes);
  return total;
}

}  // namespace selfspec
