// ModelConfig: parsing HF config.json files of the supported families, defaults, every rejection
// path (with the key and file named), generation_config.json merging and the to_json round trip.
#include "model_io/model_config.hpp"

#include "core/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/model_io/raw_safetensors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace selfspec {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

const char* const kLlama2_7b = R"({
  "architectures": ["LlamaForCausalLM"],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 11008,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 32,
  "pad_token_id": 0,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.31.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

const char* const kLlama31_8b = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "use_cache": true,
  "vocab_size": 128256
})";

const char* const kQwen2_0_5b = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 131072,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

const char* const kMistral_7b_v03 = R"({
  "architectures": ["MistralForCausalLM"],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "vocab_size": 32768
})";

// A small valid llama config for mutation tests.
json small_config() {
  return json{{"model_type", "llama"},    {"hidden_size", 64},
              {"intermediate_size", 160}, {"num_hidden_layers", 2},
              {"num_attention_heads", 4}, {"num_key_value_heads", 2},
              {"vocab_size", 100},        {"max_position_embeddings", 256},
              {"rms_norm_eps", 1e-6},     {"bos_token_id", 1},
              {"eos_token_id", 2}};
}

TEST(ModelConfig, Llama2_7b) {
  const ModelConfig c = ModelConfig::from_json(json::parse(kLlama2_7b), "llama2/config.json");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 11008);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kNone);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.o_proj_bias());
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(2));
  EXPECT_EQ(c.torch_dtype, DType::kF16);
  EXPECT_EQ(c.q_dim(), 4096);
  EXPECT_EQ(c.kv_dim(), 4096);
  EXPECT_EQ(c.parameter_count(), 6'738'415'616);  // the published LLaMA-2-7B count
}

TEST(ModelConfig, Llama31_8bWithLlama3RopeScalingAndEosList) {
  const ModelConfig c = ModelConfig::from_json(json::parse(kLlama31_8b), "llama3/config.json");
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(128001, 128008, 128009));
  EXPECT_EQ(c.torch_dtype, DType::kBF16);
  EXPECT_EQ(c.parameter_count(), 8'030'261'248);  // the published LLaMA-3-8B count
}

TEST(ModelConfig, Qwen2HasImplicitQkvBiasAndTiedEmbeddings) {
  const ModelConfig c = ModelConfig::from_json(json::parse(kQwen2_0_5b), "qwen2/config.json");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.o_proj_bias());
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(151643));
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.parameter_count(), 494'032'768);  // the published Qwen2-0.5B count

  json no_bias = json::parse(kQwen2_0_5b);
  no_bias["attention_bias"] = false;
  EXPECT_FALSE(ModelConfig::from_json(no_bias, "qwen2/config.json").attention_bias);
}

TEST(ModelConfig, MistralWithoutSlidingWindow) {
  const ModelConfig c = ModelConfig::from_json(json::parse(kMistral_7b_v03), "mistral/config.json");
  EXPECT_EQ(c.model_type, "mistral");
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.vocab_size, 32768);
}

TEST(ModelConfig, DefaultsForOptionalKeys) {
  json j = small_config();
  j.erase("num_key_value_heads");
  j.erase("max_position_embeddings");
  j.erase("rms_norm_eps");
  j.erase("bos_token_id");
  j.erase("eos_token_id");
  const ModelConfig c = ModelConfig::from_json(j, "defaults.json");
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_FALSE(c.torch_dtype.has_value());
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);

  // null is the same as absent for the optional keys.
  for (const char* key : {"num_key_value_heads", "head_dim", "bos_token_id", "eos_token_id",
                          "rope_scaling", "torch_dtype", "rope_theta"}) {
    json with_null = small_config();
    with_null[key] = nullptr;
    EXPECT_NO_THROW(ModelConfig::from_json(with_null, "nulls.json")) << key;
  }
}

TEST(ModelConfig, ExplicitHeadDim) {
  json j = small_config();
  j["head_dim"] = 32;  // q_dim 128 != hidden_size 64
  const ModelConfig c = ModelConfig::from_json(j, "head_dim.json");
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.q_dim(), 128);
  EXPECT_EQ(c.kv_dim(), 64);
  // hidden_size not divisible by the heads is fine when head_dim is given.
  j["hidden_size"] = 66;
  EXPECT_EQ(ModelConfig::from_json(j, "head_dim.json").hidden_size, 66);
}

TEST(ModelConfig, TiedAndUntiedEmbeddings) {
  json j = small_config();
  j["tie_word_embeddings"] = false;
  const ModelConfig untied = ModelConfig::from_json(j, "untied.json");
  j["tie_word_embeddings"] = true;
  const ModelConfig tied = ModelConfig::from_json(j, "tied.json");
  EXPECT_FALSE(untied.tie_word_embeddings);
  EXPECT_TRUE(tied.tie_word_embeddings);
  EXPECT_EQ(untied.parameter_count() - tied.parameter_count(), 100 * 64);
  // embedding + 2 layers × (attention + mlp + 2 norms) + final norm + lm_head
  const std::int64_t layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 160 + 2 * 64;
  EXPECT_EQ(untied.parameter_count(), 100 * 64 + 2 * layer + 64 + 100 * 64);
}

TEST(ModelConfig, LlamaAttentionBiasIncludesOProj) {
  json j = small_config();
  j["attention_bias"] = true;
  const ModelConfig c = ModelConfig::from_json(j, "bias.json");
  EXPECT_TRUE(c.o_proj_bias());
  j["attention_bias"] = false;
  const ModelConfig no_bias = ModelConfig::from_json(j, "bias.json");
  EXPECT_EQ(c.parameter_count() - no_bias.parameter_count(), 2 * (64 + 2 * 32 + 64));
}

TEST(ModelConfig, RopeScalingForms) {
  json j = small_config();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4}};  // legacy key, integer factor
  ModelConfig c = ModelConfig::from_json(j, "rope.json");
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);

  j["rope_scaling"] = {{"rope_type", "linear"}, {"type", "dynamic"}, {"factor", 2.0}};
  c = ModelConfig::from_json(j, "rope.json");  // rope_type wins over the legacy key
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);

  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(ModelConfig::from_json(j, "rope.json").rope_scaling.type, RopeScalingType::kNone);
}

TEST(ModelConfig, DtypeAliasAndHiddenAct) {
  json j = small_config();
  j["dtype"] = "float32";  // newer transformers
  EXPECT_EQ(ModelConfig::from_json(j, "dtype.json").torch_dtype, DType::kF32);
  j["torch_dtype"] = "bfloat16";  // torch_dtype wins when both are present
  EXPECT_EQ(ModelConfig::from_json(j, "dtype.json").torch_dtype, DType::kBF16);
  j["hidden_act"] = "silu";
  j["mlp_bias"] = false;
  EXPECT_NO_THROW(ModelConfig::from_json(j, "dtype.json"));
}

TEST(ModelConfig, SlidingWindowThatCoversTheContextIsAccepted) {
  json mistral = json::parse(kMistral_7b_v03);
  mistral["sliding_window"] = 32768;  // == max_position_embeddings: full attention
  EXPECT_NO_THROW(ModelConfig::from_json(mistral, "mistral.json"));
  json qwen = json::parse(kQwen2_0_5b);
  qwen["use_sliding_window"] = false;
  qwen["sliding_window"] = 4096;
  EXPECT_NO_THROW(ModelConfig::from_json(qwen, "qwen.json"));
  qwen.erase("use_sliding_window");  // Qwen2Config defaults it to false
  EXPECT_NO_THROW(ModelConfig::from_json(qwen, "qwen.json"));
  json llama = small_config();
  llama["sliding_window"] = 16;  // not a llama key: ignored
  EXPECT_NO_THROW(ModelConfig::from_json(llama, "llama.json"));
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

struct ConfigErrorCase {
  const char* name;
  std::function<json()> config;
  std::vector<std::string> expected;
};
void PrintTo(const ConfigErrorCase& c, std::ostream* os) {
  *os << c.name;
}

json mutated(const std::function<void(json&)>& mutate) {
  json j = small_config();
  mutate(j);
  return j;
}

json mutated_from(const char* base, const std::function<void(json&)>& mutate) {
  json j = json::parse(base);
  mutate(j);
  return j;
}

const ConfigErrorCase kConfigErrors[] = {
    {"not_an_object",
     [] {
       return json::array({1, 2});
     },
     {"must be a JSON object"}},
    {"int_as_string",
     [] { return mutated([](json& j) { j["hidden_size"] = "4096"; }); },
     {"'hidden_size'", "must be an integer", "string \"4096\""}},
    {"int_as_float",
     [] { return mutated([](json& j) { j["num_hidden_layers"] = 2.5; }); },
     {"'num_hidden_layers'", "must be an integer"}},
    {"int_as_bool",
     [] { return mutated([](json& j) { j["vocab_size"] = true; }); },
     {"'vocab_size'", "must be an integer", "boolean"}},
    {"missing_hidden_size",
     [] { return mutated([](json& j) { j.erase("hidden_size"); }); },
     {"missing required key 'hidden_size'"}},
    {"missing_vocab_size",
     [] { return mutated([](json& j) { j.erase("vocab_size"); }); },
     {"missing required key 'vocab_size'"}},
    {"missing_model_type",
     [] { return mutated([](json& j) { j.erase("model_type"); }); },
     {"'model_type'", "llama, mistral, qwen2"}},
    {"unsupported_model_type",
     [] { return mutated([](json& j) { j["model_type"] = "gpt2"; }); },
     {"'model_type'", "'gpt2'", "llama, mistral, qwen2"}},
    {"model_type_not_string",
     [] { return mutated([](json& j) { j["model_type"] = 1; }); },
     {"'model_type'", "must be a string"}},
    {"zero_hidden_size",
     [] { return mutated([](json& j) { j["hidden_size"] = 0; }); },
     {"'hidden_size'", "must be positive"}},
    {"negative_intermediate",
     [] { return mutated([](json& j) { j["intermediate_size"] = -1; }); },
     {"'intermediate_size'", "must be positive", "-1"}},
    {"zero_layers",
     [] { return mutated([](json& j) { j["num_hidden_layers"] = 0; }); },
     {"'num_hidden_layers'", "must be positive"}},
    {"zero_heads",
     [] { return mutated([](json& j) { j["num_attention_heads"] = 0; }); },
     {"'num_attention_heads'", "must be positive"}},
    {"zero_vocab",
     [] { return mutated([](json& j) { j["vocab_size"] = 0; }); },
     {"'vocab_size'", "must be positive"}},
    {"zero_max_positions",
     [] { return mutated([](json& j) { j["max_position_embeddings"] = 0; }); },
     {"'max_position_embeddings'", "must be positive"}},
    {"heads_not_multiple_of_kv",
     [] { return mutated([](json& j) { j["num_key_value_heads"] = 3; }); },
     {"'num_attention_heads' (4)", "'num_key_value_heads' (3)"}},
    {"zero_kv_heads",
     [] { return mutated([](json& j) { j["num_key_value_heads"] = 0; }); },
     {"'num_key_value_heads'", "must be positive"}},
    {"hidden_not_divisible",
     [] { return mutated([](json& j) { j["hidden_size"] = 66; }); },
     {"'hidden_size' (66)", "not divisible", "'head_dim'"}},
    {"odd_head_dim",
     [] { return mutated([](json& j) { j["head_dim"] = 15; }); },
     {"'head_dim'", "even", "15"}},
    {"head_dim_string",
     [] { return mutated([](json& j) { j["head_dim"] = "16"; }); },
     {"'head_dim'", "must be an integer"}},
    {"bos_out_of_vocab",
     [] { return mutated([](json& j) { j["bos_token_id"] = 100; }); },
     {"'bos_token_id' = 100", "[0, 100)"}},
    {"bos_negative",
     [] { return mutated([](json& j) { j["bos_token_id"] = -1; }); },
     {"'bos_token_id' = -1"}},
    {"eos_out_of_vocab",
     [] { return mutated([](json& j) {
            j["eos_token_id"] = json::array({2, 250});
          }); },
     {"'eos_token_id' = 250", "[0, 100)"}},
    {"eos_list_with_string",
     [] { return mutated([](json& j) {
            j["eos_token_id"] = json::array({2, "3"});
          }); },
     {"'eos_token_id'", "list of integers", "index 1"}},
    {"eos_string",
     [] { return mutated([](json& j) { j["eos_token_id"] = "2"; }); },
     {"'eos_token_id'", "an integer or a list of integers"}},
    {"eos_huge",
     [] { return mutated([](json& j) { j["eos_token_id"] = 1LL << 40; }); },
     {"'eos_token_id'", "int32"}},
    {"rms_eps_string",
     [] { return mutated([](json& j) { j["rms_norm_eps"] = "1e-5"; }); },
     {"'rms_norm_eps'", "must be a number"}},
    {"rms_eps_zero",
     [] { return mutated([](json& j) { j["rms_norm_eps"] = 0; }); },
     {"'rms_norm_eps'", "positive"}},
    {"rope_theta_negative",
     [] { return mutated([](json& j) { j["rope_theta"] = -1.0; }); },
     {"'rope_theta'", "positive"}},
    {"rope_scaling_dynamic",
     [] {
       return mutated([](json& j) { j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}}; });
     },
     {"'rope_scaling'", "'dynamic' is not supported"}},
    {"rope_scaling_yarn",
     [] {
       return mutated([](json& j) {
         j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
       });
     },
     {"'rope_scaling'", "'yarn' is not supported", "linear, llama3"}},
    {"rope_scaling_without_type",
     [] { return mutated([](json& j) {
            j["rope_scaling"] = {{"factor", 2.0}};
          }); },
     {"'rope_scaling'", "neither 'rope_type' nor 'type'"}},
    {"rope_scaling_not_object",
     [] { return mutated([](json& j) { j["rope_scaling"] = "linear"; }); },
     {"'rope_scaling'", "null or an object"}},
    {"rope_scaling_type_not_string",
     [] { return mutated([](json& j) {
            j["rope_scaling"] = {{"rope_type", 3}};
          }); },
     {"'rope_scaling.rope_type'", "must be a string"}},
    {"linear_without_factor",
     [] { return mutated([](json& j) {
            j["rope_scaling"] = {{"rope_type", "linear"}};
          }); },
     {"'rope_scaling.factor'", "missing"}},
    {"linear_factor_string",
     [] {
       return mutated([](json& j) {
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", "2"}};
       });
     },
     {"'rope_scaling.factor'", "must be a number"}},
    {"linear_factor_zero",
     [] {
       return mutated([](json& j) {
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0}};
       });
     },
     {"'rope_scaling.factor'", "positive"}},
    {"llama3_missing_low_freq",
     [] {
       return mutated_from(kLlama31_8b,
                           [](json& j) { j["rope_scaling"].erase("low_freq_factor"); });
     },
     {"'rope_scaling.low_freq_factor'", "missing"}},
    {"llama3_missing_original_max",
     [] {
       return mutated_from(kLlama31_8b, [](json& j) {
         j["rope_scaling"].erase("original_max_position_embeddings");
       });
     },
     {"'rope_scaling.original_max_position_embeddings'", "missing"}},
    {"llama3_freq_factors_inverted",
     [] {
       return mutated_from(kLlama31_8b,
                           [](json& j) { j["rope_scaling"]["high_freq_factor"] = 0.5; });
     },
     {"'rope_scaling'", "low_freq_factor < high_freq_factor"}},
    {"hidden_act_gelu",
     [] { return mutated([](json& j) { j["hidden_act"] = "gelu"; }); },
     {"'hidden_act'", "'gelu'", "silu"}},
    {"mlp_bias_true",
     [] { return mutated([](json& j) { j["mlp_bias"] = true; }); },
     {"'mlp_bias'", "not supported"}},
    {"attention_bias_not_bool",
     [] { return mutated([](json& j) { j["attention_bias"] = 1; }); },
     {"'attention_bias'", "true or false"}},
    {"tie_not_bool",
     [] { return mutated([](json& j) { j["tie_word_embeddings"] = "yes"; }); },
     {"'tie_word_embeddings'", "true or false", "string"}},
    {"torch_dtype_float64",
     [] { return mutated([](json& j) { j["torch_dtype"] = "float64"; }); },
     {"'torch_dtype'", "'float64'", "float32, bfloat16 or float16"}},
    {"torch_dtype_short_name",
     [] { return mutated([](json& j) { j["torch_dtype"] = "bf16"; }); },
     {"'torch_dtype'", "'bf16'"}},
    {"mistral_sliding_window",
     [] { return mutated_from(kMistral_7b_v03, [](json& j) { j["sliding_window"] = 4096; }); },
     {"'sliding_window' = 4096", "sliding-window attention is not supported"}},
    {"mistral_default_sliding_window",
     [] { return mutated_from(kMistral_7b_v03, [](json& j) { j.erase("sliding_window"); }); },
     {"'sliding_window' = 4096", "sliding-window attention is not supported"}},
    {"mistral_attention_bias",
     [] { return mutated_from(kMistral_7b_v03, [](json& j) { j["attention_bias"] = true; }); },
     {"'attention_bias'", "MistralForCausalLM"}},
    {"qwen2_sliding_window",
     [] { return mutated_from(kQwen2_0_5b, [](json& j) { j["use_sliding_window"] = true; }); },
     {"'sliding_window' = 32768", "sliding-window attention is not supported"}},
    {"sliding_window_string",
     [] { return mutated_from(kMistral_7b_v03, [](json& j) { j["sliding_window"] = "4k"; }); },
     {"'sliding_window'", "must be an integer"}},
    // Found by fuzzing: the parameter count (what `selfspec info` prints) overflowed int64.
    {"parameter_count_overflow",
     [] {
       return mutated([](json& j) {
         j["hidden_size"] = std::int64_t{1} << 40;
         j["vocab_size"] = std::int64_t{1} << 30;
       });
     },
     {"more than 2^63 parameters", "hidden_size 1099511627776", "vocab_size 1073741824"}},
    {"too_many_layers",
     [] { return mutated([](json& j) { j["num_hidden_layers"] = 257; }); },
     {"'num_hidden_layers' = 257", "more than selfspec runs (256 layers)"}},
    {"head_count_times_head_dim_overflow",
     [] {
       return mutated([](json& j) {
         j["num_attention_heads"] = std::int64_t{1} << 40;
         j["num_key_value_heads"] = 1;
         j["head_dim"] = std::int64_t{1} << 40;
       });
     },
     {"more than 2^63 parameters"}},
};

class ModelConfigErrors : public ::testing::TestWithParam<ConfigErrorCase> {};

TEST_P(ModelConfigErrors, NameTheKeyAndSource) {
  const ConfigErrorCase& c = GetParam();
  const std::string source = std::string("configs/") + c.name + ".json";
  try {
    ModelConfig::from_json(c.config(), source);
    FAIL() << "expected an error for " << c.name;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(source));
    for (const std::string& part : c.expected) EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

INSTANTIATE_TEST_SUITE_P(Invalid, ModelConfigErrors, ::testing::ValuesIn(kConfigErrors),
                         [](const ::testing::TestParamInfo<ConfigErrorCase>& case_info) {
                           return std::string(case_info.param.name);
                         });

TEST(ModelConfig, LayerCountUpToTheEnginesLimit) {
  json j = small_config();
  j["num_hidden_layers"] = ModelConfig::kMaxLayers;
  EXPECT_EQ(ModelConfig::from_json(j, "deep.json").num_layers, 256);
}

TEST(ModelConfig, ValidateChecksAHandBuiltConfig) {
  ModelConfig c = ModelConfig::from_json(small_config(), "ok.json");
  c.validate("ok.json");
  c.num_kv_heads = 3;
  EXPECT_THROW(c.validate("hand.json"), Error);
  c = ModelConfig::from_json(small_config(), "ok.json");
  c.eos_token_ids.push_back(100);
  try {
    c.validate("hand.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("hand.json"));
    EXPECT_THAT(e.what(), HasSubstr("'eos_token_id' = 100"));
  }
  c = ModelConfig::from_json(small_config(), "ok.json");
  c.model_type = "falcon";
  EXPECT_THROW(c.validate("hand.json"), Error);
}

// ---------------------------------------------------------------------------------------------
// Files: from_file, generation_config.json
// ---------------------------------------------------------------------------------------------

TEST(ModelConfigFile, ReadsConfigAndMergesGenerationConfigEos) {
  TempDir dir;
  testing::write_file(dir / "config.json", kLlama2_7b);
  EXPECT_THAT(ModelConfig::from_file(dir / "config.json").eos_token_ids, ElementsAre(2));

  testing::write_file(
      dir / "generation_config.json",
      R"({"bos_token_id": 1, "eos_token_id": [2, 31999, 5, 31999], "do_sample": true})");
  EXPECT_THAT(ModelConfig::from_file(dir / "config.json").eos_token_ids, ElementsAre(2, 31999, 5));

  testing::write_file(dir / "generation_config.json", R"({"eos_token_id": 7})");
  EXPECT_THAT(ModelConfig::from_file(dir / "config.json").eos_token_ids, ElementsAre(2, 7));

  testing::write_file(dir / "generation_config.json",
                      R"({"temperature": 0.6, "eos_token_id": null})");
  EXPECT_THAT(ModelConfig::from_file(dir / "config.json").eos_token_ids, ElementsAre(2));
}

TEST(ModelConfigFile, Llama3GenerationConfigMergesIntoTheList) {
  TempDir dir;
  json config = json::parse(kLlama31_8b);
  config["eos_token_id"] = 128001;
  testing::write_file(dir / "config.json", config.dump());
  testing::write_file(dir / "generation_config.json",
                      R"({"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})");
  EXPECT_THAT(ModelConfig::from_file(dir / "config.json").eos_token_ids,
              ElementsAre(128001, 128008, 128009));
}

TEST(ModelConfigFile, ErrorsNameTheFile) {
  TempDir dir;
  const std::string config_path = (dir / "config.json").string();
  const std::string generation_path = (dir / "generation_config.json").string();
  auto expect_error = [](const std::filesystem::path& path,
                         const std::vector<std::string>& expected) {
    try {
      ModelConfig::from_file(path);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      for (const std::string& part : expected) EXPECT_THAT(e.what(), HasSubstr(part));
    }
  };
  expect_error(dir / "config.json", {config_path, "cannot open"});
  testing::write_file(dir / "config.json", "{\"model_type\": \"llama\",");
  expect_error(dir / "config.json", {config_path, "invalid JSON"});
  json bad = json::parse(kLlama2_7b);
  bad["intermediate_size"] = "11008";
  testing::write_file(dir / "config.json", bad.dump());
  expect_error(dir / "config.json", {config_path, "'intermediate_size'", "must be an integer"});

  testing::write_file(dir / "config.json", kLlama2_7b);
  testing::write_file(dir / "generation_config.json", R"({"eos_token_id": [2, 32000]})");
  expect_error(dir / "config.json", {generation_path, "'eos_token_id' = 32000", "[0, 32000)"});
  testing::write_file(dir / "generation_config.json", R"({"eos_token_id": "2"})");
  expect_error(dir / "config.json", {generation_path, "'eos_token_id'", "must be an integer"});
  testing::write_file(dir / "generation_config.json", "not json");
  expect_error(dir / "config.json", {generation_path, "invalid JSON"});
  testing::write_file(dir / "generation_config.json", "[1]");
  expect_error(dir / "config.json", {generation_path, "JSON object"});
}

// ---------------------------------------------------------------------------------------------
// to_json
// ---------------------------------------------------------------------------------------------

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.model_type, b.model_type);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);  // exact: JSON doubles round-trip
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_scaling.low_freq_factor, b.rope_scaling.low_freq_factor);
  EXPECT_EQ(a.rope_scaling.high_freq_factor, b.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings,
            b.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
  EXPECT_EQ(a.parameter_count(), b.parameter_count());
}

TEST(ModelConfigJson, RoundTripsEveryFamily) {
  json linear = small_config();
  linear["rope_scaling"] = {{"type", "linear"}, {"factor", 2.5}};
  linear["head_dim"] = 32;
  linear["tie_word_embeddings"] = true;
  linear["attention_bias"] = true;
  linear["bos_token_id"] = nullptr;
  linear["eos_token_id"] = nullptr;
  linear["rms_norm_eps"] = 3.3e-7;
  const std::pair<const char*, json> configs[] = {{"llama2", json::parse(kLlama2_7b)},
                                                  {"llama3", json::parse(kLlama31_8b)},
                                                  {"qwen2", json::parse(kQwen2_0_5b)},
                                                  {"mistral", json::parse(kMistral_7b_v03)},
                                                  {"linear", linear}};
  for (const auto& [label, input] : configs) {
    SCOPED_TRACE(label);
    const ModelConfig original = ModelConfig::from_json(input, label);
    const json written = original.to_json();
    const ModelConfig reread = ModelConfig::from_json(json::parse(written.dump()), "written");
    expect_same(original, reread);
    EXPECT_EQ(written["hidden_act"], "silu");
    EXPECT_EQ(written["mlp_bias"], false);
    EXPECT_EQ(written["model_type"], original.model_type);
    EXPECT_TRUE(written["architectures"].is_array());
  }
}

TEST(ModelConfigJson, WritesHfLayout) {
  const json llama3 = ModelConfig::from_json(json::parse(kLlama31_8b), "l3").to_json();
  EXPECT_EQ(llama3["architectures"], json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(llama3["model_type"], "llama");
  EXPECT_EQ(llama3["num_hidden_layers"], 32);
  EXPECT_EQ(llama3["num_attention_heads"], 32);
  EXPECT_EQ(llama3["num_key_value_heads"], 8);
  EXPECT_EQ(llama3["head_dim"], 128);
  EXPECT_EQ(llama3["torch_dtype"], "bfloat16");
  EXPECT_EQ(llama3["rope_scaling"]["rope_type"], "llama3");
  EXPECT_FALSE(llama3["rope_scaling"].contains("type"));
  EXPECT_EQ(llama3["rope_scaling"]["original_max_position_embeddings"], 8192);
  EXPECT_EQ(llama3["eos_token_id"], json::array({128001, 128008, 128009}));
  EXPECT_EQ(llama3["bos_token_id"], 128000);

  const json llama2 = ModelConfig::from_json(json::parse(kLlama2_7b), "l2").to_json();
  EXPECT_TRUE(llama2["rope_scaling"].is_null());
  EXPECT_EQ(llama2["eos_token_id"], 2);
  EXPECT_EQ(llama2["torch_dtype"], "float16");

  json linear = small_config();
  linear["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  const json written = ModelConfig::from_json(linear, "lin").to_json();
  EXPECT_EQ(written["rope_scaling"], (json{{"rope_type", "linear"}, {"factor", 2.0}}));
  EXPECT_FALSE(written.contains("torch_dtype"));

  const json qwen = ModelConfig::from_json(json::parse(kQwen2_0_5b), "q").to_json();
  EXPECT_EQ(qwen["architectures"], json::array({"Qwen2ForCausalLM"}));
  EXPECT_EQ(qwen["use_sliding_window"], false);
  EXPECT_EQ(qwen["tie_word_embeddings"], true);
  const json mistral = ModelConfig::from_json(json::parse(kMistral_7b_v03), "m").to_json();
  EXPECT_EQ(mistral["architectures"], json::array({"MistralForCausalLM"}));
  EXPECT_TRUE(mistral["sliding_window"].is_null());
}

}  // namespace
}  // namespace selfspec
