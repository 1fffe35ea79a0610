// The architecture of a LLaMA-family model as HuggingFace's config.json describes it.
// Supported model_type: llama (LLaMA-1/2/3/3.1, CodeLLaMA), mistral (without sliding window),
// qwen2 (q/k/v bias). Anything the engine cannot run exactly is rejected with the key named.
#pragma once

#include "core/dtype.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace selfspec {

enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  // llama3 only
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  // The most layers selfspec runs: a LayerPlan's skip masks hold that many
  // (src/model/layer_plan.hpp). validate() refuses more, before anything sized by the layer count
  // (the expected tensor names, the weights) is built.
  static constexpr std::int64_t kMaxLayers = 256;

  std::string model_type = "llama";
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;  // hidden_size / num_heads unless config.json says otherwise
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool attention_bias = false;
  bool tie_word_embeddings = false;
  std::optional<std::int32_t> bos_token_id;
  std::vector<std::int32_t> eos_token_ids;
  std::optional<DType> torch_dtype;

  // Parses and validates config.json (and merges eos ids from generation_config.json beside it
  // when present). Errors name the file and the key.
  static ModelConfig from_file(const std::filesystem::path& config_json);
  static ModelConfig from_json(const nlohmann::json& json, const std::string& source_name);
  // Serialises in HF config.json layout (LlamaForCausalLM).
  nlohmann::json to_json() const;
  // Throws selfspec::Error naming `source_name` when the numbers are inconsistent.
  void validate(const std::string& source_name) const;

  std::int64_t q_dim() const { return num_heads * head_dim; }
  std::int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // Whether o_proj carries a bias: LLaMA's attention_bias covers q/k/v/o, Qwen2's only q/k/v.
  bool o_proj_bias() const { return attention_bias && model_type != "qwen2"; }
  // Number of parameters (embedding, layers, final norm, and lm_head unless tied). validate()
  // refuses sizes whose count overflows int64; this throws on them.
  std::int64_t parameter_count() const;
};

}  // namespace selfspec
