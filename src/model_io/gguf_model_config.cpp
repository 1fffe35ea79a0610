// model_config_from_gguf (see gguf_model_config.hpp). Key names follow llama.cpp's
// gguf-py/gguf/constants.py (Keys.LLM.*, Keys.Attention.*, Keys.Rope.*, Keys.Tokenizer.*).
#include "model_io/gguf_model_config.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace selfspec {
namespace {

constexpr std::array<std::string_view, 2> kArchitectures = {"llama", "qwen2"};

// Reads `<arch>.<suffix>` keys and names them in errors.
class ArchKeys {
 public:
  ArchKeys(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}
  std::string key(std::string_view suffix) const { return fmt::format("{}.{}", arch_, suffix); }
  std::int64_t positive(std::string_view suffix) const {
    const std::int64_t value = file_.get_int(key(suffix));
    SELFSPEC_CHECK(value > 0, "{}: metadata key '{}' must be positive, found {}", file_.source(),
                   key(suffix), value);
    return value;
  }
  std::optional<std::int64_t> optional_int(std::string_view suffix) const {
    return file_.find_int(key(suffix));
  }
  std::optional<double> optional_float(std::string_view suffix) const {
    return file_.find_float(key(suffix));
  }
  std::optional<std::string> optional_string(std::string_view suffix) const {
    return file_.find_string(key(suffix));
  }

 private:
  const GgufFile& file_;
  std::string arch_;
};

std::string architecture_of(const GgufFile& file) {
  const std::string arch = file.get_string("general.architecture");
  SELFSPEC_CHECK(
      std::find(kArchitectures.begin(), kArchitectures.end(), arch) != kArchitectures.end(),
      "{}: general.architecture '{}' is not supported (expected one of {})", file.source(), arch,
      fmt::join(kArchitectures, ", "));
  return arch;
}

void read_geometry(const GgufFile& file, const ArchKeys& keys, ModelConfig& config) {
  config.num_layers = keys.positive("block_count");
  config.hidden_size = keys.positive("embedding_length");
  config.intermediate_size = keys.positive("feed_forward_length");
  config.num_heads = keys.positive("attention.head_count");
  config.num_kv_heads = keys.optional_int("attention.head_count_kv").value_or(config.num_heads);
  config.head_dim = keys.optional_int("attention.key_length")
                        .value_or(config.num_heads > 0 ? config.hidden_size / config.num_heads : 0);
  if (const std::optional<std::int64_t> value_length =
          keys.optional_int("attention.value_length")) {
    SELFSPEC_CHECK(*value_length == config.head_dim,
                   "{}: {} = {} differs from the key length {}: not supported", file.source(),
                   keys.key("attention.value_length"), *value_length, config.head_dim);
  }
  config.max_position_embeddings = keys.positive("context_length");
  config.rms_norm_eps = file.get_float(keys.key("attention.layer_norm_rms_epsilon"));
  // The vocabulary: <arch>.vocab_size, else the embedding's row count.
  if (const std::optional<std::int64_t> vocab = keys.optional_int("vocab_size")) {
    config.vocab_size = *vocab;
  } else {
    config.vocab_size = file.tensor("token_embd.weight").rows();
  }
}

void read_rope(const GgufFile& file, const ArchKeys& keys, ModelConfig& config) {
  config.rope_theta = keys.optional_float("rope.freq_base").value_or(10000.0);
  if (const std::optional<std::int64_t> dims = keys.optional_int("rope.dimension_count")) {
    SELFSPEC_CHECK(*dims == config.head_dim,
                   "{}: {} = {} rotates part of each head (head size {}): partial rotary "
                   "embeddings are not supported",
                   file.source(), keys.key("rope.dimension_count"), *dims, config.head_dim);
  }
  SELFSPEC_CHECK(
      !file.contains("rope_freqs.weight"),
      "{}: tensor 'rope_freqs.weight' (LLaMA-3.1 style rope scaling factors) is not "
      "supported in GGUF files; use the HuggingFace checkpoint (config.json rope_scaling)",
      file.source());
  const std::string type = keys.optional_string("rope.scaling.type").value_or("none");
  if (type == "linear") {
    config.rope_scaling.type = RopeScalingType::kLinear;
    config.rope_scaling.factor = file.get_float(keys.key("rope.scaling.factor"));
  } else if (type != "none") {
    fail("{}: {} = '{}' is not supported (expected none or linear)", file.source(),
         keys.key("rope.scaling.type"), type);
  }
}

std::int32_t token_id(const GgufFile& file, std::string_view key, std::int64_t vocab_size) {
  const std::int64_t id = file.get_int(key);
  SELFSPEC_CHECK(id >= 0 && id < vocab_size,
                 "{}: metadata key '{}' = {} is outside the vocabulary [0, {})", file.source(), key,
                 id, vocab_size);
  return static_cast<std::int32_t>(id);
}

// BOS and the ids that end generation: EOS, and end-of-turn / end-of-message when present.
void read_special_tokens(const GgufFile& file, ModelConfig& config) {
  if (file.has("tokenizer.ggml.bos_token_id")) {
    config.bos_token_id = token_id(file, "tokenizer.ggml.bos_token_id", config.vocab_size);
  }
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    if (!file.has(key)) continue;
    const std::int32_t id = token_id(file, key, config.vocab_size);
    if (std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), id) ==
        config.eos_token_ids.end()) {
      config.eos_token_ids.push_back(id);
    }
  }
}

}  // namespace

ModelConfig model_config_from_gguf(const GgufFile& file) {
  ModelConfig config;
  const std::string arch = architecture_of(file);
  const ArchKeys keys(file, arch);
  config.model_type = arch;
  read_geometry(file, keys, config);
  read_rope(file, keys, config);
  config.attention_bias = file.contains("blk.0.attn_q.bias");
  SELFSPEC_CHECK(arch == "qwen2" || !file.contains("blk.0.attn_q.bias") ||
                     file.contains("blk.0.attn_output.bias"),
                 "{}: a llama model with q/k/v bias but no output bias is not supported",
                 file.source());
  config.tie_word_embeddings = !file.contains("output.weight");
  read_special_tokens(file, config);
  config.validate(file.source());
  return config;
}

}  // namespace selfspec
