#include "model_io/model_config.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

namespace selfspec {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 3> kModelTypes = {"llama", "mistral", "qwen2"};
// HF's MistralConfig default when config.json has no sliding_window key.
constexpr std::int64_t kMistralDefaultSlidingWindow = 4096;

std::string describe(const json& value) {
  if (value.is_null()) return "null";
  std::string text = value.dump();
  constexpr std::size_t kMaxText = 60;
  if (text.size() > kMaxText) text = text.substr(0, kMaxText) + "...";
  return fmt::format("{} {}", value.type_name(), text);
}

// Typed access to the keys of one JSON object; every error names the file and the key.
class Reader {
 public:
  Reader(const json& object, std::string source, std::string prefix = {})
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // The value of a key, or nullptr when absent or null.
  const json* find(std::string_view key) const {
    const auto found = object_.find(key);
    if (found == object_.end() || found->is_null()) return nullptr;
    return &*found;
  }
  std::string name(std::string_view key) const { return prefix_ + std::string(key); }

  [[noreturn]] void type_error(std::string_view key, std::string_view expected,
                               const json& found) const {
    fail("{}: key '{}' must be {}, found {}", source_, name(key), expected, describe(found));
  }

  std::optional<std::int64_t> optional_int(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    return to_int(key, *value);
  }
  std::int64_t required_int(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) fail("{}: missing required key '{}' (an integer)", source_, name(key));
    return to_int(key, *value);
  }
  std::int64_t to_int(std::string_view key, const json& value) const {
    if (value.is_number_unsigned()) {
      const auto unsigned_value = value.get<std::uint64_t>();
      if (unsigned_value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        type_error(key, "an integer within int64", value);
      }
      return static_cast<std::int64_t>(unsigned_value);
    }
    if (value.is_number_integer()) return value.get<std::int64_t>();
    type_error(key, "an integer", value);
  }

  std::optional<double> optional_number(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_number()) type_error(key, "a number", *value);
    return value->get<double>();
  }
  double required_number(std::string_view key) const {
    const std::optional<double> value = optional_number(key);
    if (!value) fail("{}: missing required key '{}' (a number)", source_, name(key));
    return *value;
  }

  std::optional<bool> optional_bool(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_boolean()) type_error(key, "true or false", *value);
    return value->get<bool>();
  }

  std::optional<std::string> optional_string(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_string()) type_error(key, "a string", *value);
    return value->get<std::string>();
  }

  // eos_token_id: an integer or a list of integers (absent/null: none).
  std::vector<std::int64_t> int_or_int_list(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) return {};
    if (value->is_number_integer()) return {to_int(key, *value)};
    if (!value->is_array()) type_error(key, "an integer or a list of integers", *value);
    std::vector<std::int64_t> ids;
    for (std::size_t i = 0; i < value->size(); ++i) {
      const json& item = (*value)[i];
      if (!item.is_number_integer()) {
        fail("{}: key '{}' must be an integer or a list of integers, found {} at index {}", source_,
             name(key), describe(item), i);
      }
      ids.push_back(to_int(key, item));
    }
    return ids;
  }

  const std::string& source() const { return source_; }

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
};

json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open for reading", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return json::parse(std::move(text).str());
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", path.string(), e.what());
  }
}

std::optional<DType> parse_torch_dtype(std::string_view text) {
  if (text == "float32") return DType::kF32;
  if (text == "bfloat16") return DType::kBF16;
  if (text == "float16") return DType::kF16;
  return std::nullopt;
}

std::string_view torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float32";
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
  }
  return "float32";
}

std::string_view architecture_of(std::string_view model_type) {
  if (model_type == "mistral") return "MistralForCausalLM";
  if (model_type == "qwen2") return "Qwen2ForCausalLM";
  return "LlamaForCausalLM";
}

std::int32_t token_id(std::int64_t id, std::string_view key, const std::string& source) {
  if (id < std::numeric_limits<std::int32_t>::min() ||
      id > std::numeric_limits<std::int32_t>::max()) {
    fail("{}: key '{}': token id {} is out of the int32 range", source, key, id);
  }
  return static_cast<std::int32_t>(id);
}

void add_unique(std::vector<std::int32_t>& ids, std::int32_t id) {
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

RopeScaling parse_rope_scaling(const json& value, const std::string& source) {
  RopeScaling scaling;
  if (value.is_null()) return scaling;
  if (!value.is_object()) {
    fail("{}: key 'rope_scaling' must be null or an object, found {}", source, describe(value));
  }
  const Reader reader(value, source, "rope_scaling.");
  std::optional<std::string> type = reader.optional_string("rope_type");
  if (!type) type = reader.optional_string("type");
  if (!type) {
    fail(
        "{}: key 'rope_scaling' has neither 'rope_type' nor 'type' (expected \"linear\", "
        "\"llama3\" or \"default\")",
        source);
  }
  if (*type == "default") return scaling;
  if (*type == "linear") {
    scaling.type = RopeScalingType::kLinear;
    scaling.factor = reader.required_number("factor");
    return scaling;
  }
  if (*type == "llama3") {
    scaling.type = RopeScalingType::kLlama3;
    scaling.factor = reader.required_number("factor");
    scaling.low_freq_factor = reader.required_number("low_freq_factor");
    scaling.high_freq_factor = reader.required_number("high_freq_factor");
    scaling.original_max_position_embeddings =
        reader.required_int("original_max_position_embeddings");
    return scaling;
  }
  fail(
      "{}: key 'rope_scaling': rope type '{}' is not supported (supported: linear, llama3, "
      "default)",
      source, *type);
}

bool known_model_type(std::string_view model_type) {
  return std::find(kModelTypes.begin(), kModelTypes.end(), model_type) != kModelTypes.end();
}

// int64 arithmetic that remembers an overflow instead of committing one (undefined behaviour).
class CheckedInt {
 public:
  // Implicit, so that plain int64 operands mix in.
  CheckedInt(std::int64_t value) : value_(value) {}
  friend CheckedInt operator+(CheckedInt a, CheckedInt b) {
    CheckedInt sum(0);
    sum.overflow_ =
        a.overflow_ || b.overflow_ || __builtin_add_overflow(a.value_, b.value_, &sum.value_);
    return sum;
  }
  friend CheckedInt operator*(CheckedInt a, CheckedInt b) {
    CheckedInt product(0);
    product.overflow_ =
        a.overflow_ || b.overflow_ || __builtin_mul_overflow(a.value_, b.value_, &product.value_);
    return product;
  }
  std::optional<std::int64_t> value() const {
    return overflow_ ? std::nullopt : std::optional(value_);
  }

 private:
  std::int64_t value_;
  bool overflow_ = false;
};

// The parameter count (embedding, layers, final norm, and lm_head unless tied); nullopt when the
// sizes make it overflow int64.
std::optional<std::int64_t> checked_parameter_count(const ModelConfig& config) {
  const CheckedInt hidden = config.hidden_size;
  const CheckedInt q_dim = CheckedInt(config.num_heads) * config.head_dim;
  const CheckedInt kv_dim = CheckedInt(config.num_kv_heads) * config.head_dim;
  const CheckedInt embedding = CheckedInt(config.vocab_size) * hidden;
  CheckedInt attention = hidden * q_dim + CheckedInt(2) * hidden * kv_dim + q_dim * hidden;
  if (config.attention_bias) {
    attention = attention + q_dim + CheckedInt(2) * kv_dim;
    if (config.o_proj_bias()) attention = attention + hidden;
  }
  const CheckedInt mlp = CheckedInt(3) * hidden * config.intermediate_size;
  const CheckedInt norms = CheckedInt(2) * hidden;
  const CheckedInt layers = CheckedInt(config.num_layers) * (attention + mlp + norms);
  const CheckedInt lm_head = config.tie_word_embeddings ? CheckedInt(0) : embedding;
  return (embedding + layers + hidden + lm_head).value();
}

}  // namespace

ModelConfig ModelConfig::from_file(const std::filesystem::path& config_json) {
  ModelConfig config = from_json(read_json_file(config_json), config_json.string());
  const std::filesystem::path generation = config_json.parent_path() / "generation_config.json";
  std::error_code ec;
  if (std::filesystem::exists(generation, ec)) {
    const std::string source = generation.string();
    const json generation_json = read_json_file(generation);
    if (!generation_json.is_object()) {
      fail("{}: expected a JSON object, found {}", source, describe(generation_json));
    }
    const Reader reader(generation_json, source);
    for (const std::int64_t id : reader.int_or_int_list("eos_token_id")) {
      add_unique(config.eos_token_ids, token_id(id, "eos_token_id", source));
    }
    config.validate(fmt::format("{} (with {})", config_json.string(), source));
  }
  return config;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& json, const std::string& source_name) {
  if (!json.is_object()) {
    fail("{}: config must be a JSON object, found {}", source_name, describe(json));
  }
  const Reader reader(json, source_name);
  ModelConfig config;

  const std::optional<std::string> model_type = reader.optional_string("model_type");
  if (!model_type) {
    fail("{}: missing required key 'model_type' (expected one of {})", source_name,
         fmt::join(kModelTypes, ", "));
  }
  if (!known_model_type(*model_type)) {
    fail("{}: key 'model_type': '{}' is not supported (expected one of {})", source_name,
         *model_type, fmt::join(kModelTypes, ", "));
  }
  config.model_type = *model_type;

  config.hidden_size = reader.required_int("hidden_size");
  config.intermediate_size = reader.required_int("intermediate_size");
  config.num_layers = reader.required_int("num_hidden_layers");
  config.num_heads = reader.required_int("num_attention_heads");
  config.num_kv_heads = reader.optional_int("num_key_value_heads").value_or(config.num_heads);
  config.vocab_size = reader.required_int("vocab_size");
  config.max_position_embeddings =
      reader.optional_int("max_position_embeddings").value_or(config.max_position_embeddings);
  config.rms_norm_eps = reader.optional_number("rms_norm_eps").value_or(config.rms_norm_eps);
  config.rope_theta = reader.optional_number("rope_theta").value_or(config.rope_theta);

  if (const std::optional<std::int64_t> head_dim = reader.optional_int("head_dim")) {
    config.head_dim = *head_dim;
  } else {
    if (config.num_heads <= 0) {
      fail("{}: key 'num_attention_heads' must be positive, found {}", source_name,
           config.num_heads);
    }
    if (config.hidden_size % config.num_heads != 0) {
      fail(
          "{}: key 'hidden_size' ({}) is not divisible by 'num_attention_heads' ({}) and no "
          "'head_dim' is given",
          source_name, config.hidden_size, config.num_heads);
    }
    config.head_dim = config.hidden_size / config.num_heads;
  }

  if (const auto found = json.find("rope_scaling"); found != json.end()) {
    config.rope_scaling = parse_rope_scaling(*found, source_name);
  }

  config.attention_bias =
      reader.optional_bool("attention_bias").value_or(config.model_type == "qwen2");
  if (config.model_type == "mistral" && config.attention_bias) {
    fail("{}: key 'attention_bias' is true but MistralForCausalLM has no attention biases",
         source_name);
  }
  if (reader.optional_bool("mlp_bias").value_or(false)) {
    fail("{}: key 'mlp_bias' is true; MLP biases are not supported", source_name);
  }
  config.tie_word_embeddings = reader.optional_bool("tie_word_embeddings").value_or(false);

  if (const std::optional<std::int64_t> bos = reader.optional_int("bos_token_id")) {
    config.bos_token_id = token_id(*bos, "bos_token_id", source_name);
  }
  for (const std::int64_t id : reader.int_or_int_list("eos_token_id")) {
    add_unique(config.eos_token_ids, token_id(id, "eos_token_id", source_name));
  }

  // Newer transformers write "dtype" instead of "torch_dtype".
  const char* dtype_key = reader.find("torch_dtype") != nullptr ? "torch_dtype" : "dtype";
  if (const std::optional<std::string> dtype = reader.optional_string(dtype_key)) {
    config.torch_dtype = parse_torch_dtype(*dtype);
    if (!config.torch_dtype) {
      fail("{}: key '{}': '{}' is not supported (expected float32, bfloat16 or float16)",
           source_name, dtype_key, *dtype);
    }
  }

  if (const std::optional<std::string> act = reader.optional_string("hidden_act")) {
    if (*act != "silu") {
      fail("{}: key 'hidden_act': '{}' is not supported (expected \"silu\")", source_name, *act);
    }
  }

  // The engine computes full causal attention, so sliding-window models (mistral v0.1, qwen2
  // with use_sliding_window) are refused unless the window covers the whole context, where the
  // two are the same.
  if (config.model_type == "mistral" || config.model_type == "qwen2") {
    std::optional<std::int64_t> window = reader.optional_int("sliding_window");
    if (config.model_type == "mistral" && !json.contains("sliding_window")) {
      window = kMistralDefaultSlidingWindow;  // HF's default when the key is absent
    }
    // Qwen2Config's use_sliding_window defaults to false.
    const bool enabled = config.model_type == "mistral" ||
                         reader.optional_bool("use_sliding_window").value_or(false);
    if (enabled && window && *window < config.max_position_embeddings) {
      fail(
          "{}: key 'sliding_window' = {} < max_position_embeddings {}: sliding-window attention "
          "is not supported",
          source_name, *window, config.max_position_embeddings);
    }
  }

  config.validate(source_name);
  return config;
}

void ModelConfig::validate(const std::string& source_name) const {
  if (!known_model_type(model_type)) {
    fail("{}: model_type '{}' is not supported (expected one of {})", source_name, model_type,
         fmt::join(kModelTypes, ", "));
  }
  const std::array<std::pair<std::string_view, std::int64_t>, 8> sizes = {{
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_layers},
      {"num_attention_heads", num_heads},
      {"num_key_value_heads", num_kv_heads},
      {"head_dim", head_dim},
      {"vocab_size", vocab_size},
      {"max_position_embeddings", max_position_embeddings},
  }};
  for (const auto& [key, value] : sizes) {
    if (value <= 0) fail("{}: key '{}' must be positive, found {}", source_name, key, value);
  }
  if (num_layers > kMaxLayers) {
    fail("{}: key 'num_hidden_layers' = {} is more than selfspec runs ({} layers)", source_name,
         num_layers, kMaxLayers);
  }
  if (num_heads % num_kv_heads != 0) {
    fail("{}: key 'num_attention_heads' ({}) must be a multiple of 'num_key_value_heads' ({})",
         source_name, num_heads, num_kv_heads);
  }
  if (head_dim % 2 != 0) {
    fail("{}: key 'head_dim' must be even for rotary embeddings, found {}", source_name, head_dim);
  }
  if (!(rms_norm_eps > 0.0) || !std::isfinite(rms_norm_eps)) {
    fail("{}: key 'rms_norm_eps' must be a positive number, found {}", source_name, rms_norm_eps);
  }
  if (!(rope_theta > 0.0) || !std::isfinite(rope_theta)) {
    fail("{}: key 'rope_theta' must be a positive number, found {}", source_name, rope_theta);
  }
  if (rope_scaling.type != RopeScalingType::kNone) {
    if (!(rope_scaling.factor > 0.0) || !std::isfinite(rope_scaling.factor)) {
      fail("{}: key 'rope_scaling.factor' must be a positive number, found {}", source_name,
           rope_scaling.factor);
    }
  }
  if (rope_scaling.type == RopeScalingType::kLlama3) {
    if (!(rope_scaling.low_freq_factor > 0.0) ||
        !(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor) ||
        !std::isfinite(rope_scaling.high_freq_factor)) {
      fail(
          "{}: key 'rope_scaling': llama3 needs 0 < low_freq_factor < high_freq_factor, found "
          "low_freq_factor {} and high_freq_factor {}",
          source_name, rope_scaling.low_freq_factor, rope_scaling.high_freq_factor);
    }
    if (rope_scaling.original_max_position_embeddings <= 0) {
      fail("{}: key 'rope_scaling.original_max_position_embeddings' must be positive, found {}",
           source_name, rope_scaling.original_max_position_embeddings);
    }
  }
  if (bos_token_id && (*bos_token_id < 0 || *bos_token_id >= vocab_size)) {
    fail("{}: key 'bos_token_id' = {} is outside the vocabulary [0, {})", source_name,
         *bos_token_id, vocab_size);
  }
  for (const std::int32_t id : eos_token_ids) {
    if (id < 0 || id >= vocab_size) {
      fail("{}: key 'eos_token_id' = {} is outside the vocabulary [0, {})", source_name, id,
           vocab_size);
    }
  }
  if (!checked_parameter_count(*this)) {
    fail(
        "{}: the sizes give more than 2^63 parameters (hidden_size {}, intermediate_size {}, "
        "num_hidden_layers {}, num_attention_heads {} x head_dim {}, vocab_size {})",
        source_name, hidden_size, intermediate_size, num_layers, num_heads, head_dim, vocab_size);
  }
}

nlohmann::json ModelConfig::to_json() const {
  json out = json::object();
  out["architectures"] = json::array({std::string(architecture_of(model_type))});
  out["model_type"] = model_type;
  out["hidden_size"] = hidden_size;
  out["intermediate_size"] = intermediate_size;
  out["num_hidden_layers"] = num_layers;
  out["num_attention_heads"] = num_heads;
  out["num_key_value_heads"] = num_kv_heads;
  out["head_dim"] = head_dim;
  out["vocab_size"] = vocab_size;
  out["max_position_embeddings"] = max_position_embeddings;
  out["rms_norm_eps"] = rms_norm_eps;
  out["rope_theta"] = rope_theta;
  switch (rope_scaling.type) {
    case RopeScalingType::kNone:
      out["rope_scaling"] = nullptr;
      break;
    case RopeScalingType::kLinear:
      out["rope_scaling"] = {{"rope_type", "linear"}, {"factor", rope_scaling.factor}};
      break;
    case RopeScalingType::kLlama3:
      out["rope_scaling"] = {
          {"rope_type", "llama3"},
          {"factor", rope_scaling.factor},
          {"low_freq_factor", rope_scaling.low_freq_factor},
          {"high_freq_factor", rope_scaling.high_freq_factor},
          {"original_max_position_embeddings", rope_scaling.original_max_position_embeddings}};
      break;
  }
  out["attention_bias"] = attention_bias;
  out["mlp_bias"] = false;
  out["tie_word_embeddings"] = tie_word_embeddings;
  out["hidden_act"] = "silu";
  out["bos_token_id"] = bos_token_id ? json(*bos_token_id) : json(nullptr);
  if (eos_token_ids.empty()) {
    out["eos_token_id"] = nullptr;
  } else if (eos_token_ids.size() == 1) {
    out["eos_token_id"] = eos_token_ids.front();
  } else {
    out["eos_token_id"] = eos_token_ids;
  }
  if (torch_dtype) out["torch_dtype"] = torch_dtype_name(*torch_dtype);
  if (model_type == "mistral" || model_type == "qwen2") out["sliding_window"] = nullptr;
  if (model_type == "qwen2") out["use_sliding_window"] = false;
  return out;
}

std::int64_t ModelConfig::parameter_count() const {
  const std::optional<std::int64_t> count = checked_parameter_count(*this);
  SELFSPEC_CHECK(count.has_value(),
                 "{} config: the parameter count overflows int64 (hidden_size {}, vocab_size {})",
                 model_type, hidden_size, vocab_size);
  return *count;
}

}  // namespace selfspec
