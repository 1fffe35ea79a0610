// Architecture files and synthetic weights:
//  * every file in configs/models/ loads, with the published numbers of its model;
//  * LLaMA-2-70B at TP 8 in bf16 holds about 17.2 GB of weights per rank (the plan's figure);
//  * YAML typing, bare config.json files, and errors that name the file and key;
//  * synthetic weights served in memory equal, bit for bit, the checkpoint make-model writes with
//    the same seed, for any slice.
#include "model_io/architecture_file.hpp"
#include "core/error.hpp"
#include "model/memory_plan.hpp"
#include "model/shard_plan.hpp"
#include "model_io/safetensors.hpp"
#include "model_io/synthetic_model.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/model_io/raw_safetensors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kModels = std::filesystem::path(SELFSPEC_SOURCE_DIR) / "configs/models";

struct Published {
  const char* file;
  std::int64_t layers, hidden, heads, kv_heads, intermediate, vocab, context;
  double rope_theta;
  double billions;  // parameter count, as the model's name rounds it
};

TEST(ArchitectureFiles, EveryShippedModelLoadsWithItsPublishedNumbers) {
  const std::vector<Published> models = {
      {"llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 1e4, 6.74},
      {"llama-2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 1e4, 13.0},
      {"llama-2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 1e4, 69.0},
      {"codellama-13b", 40, 5120, 40, 40, 13824, 32016, 16384, 1e6, 13.0},
      {"codellama-34b", 48, 8192, 64, 8, 22016, 32000, 16384, 1e6, 33.7},
      {"llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 5e5, 8.03},
      {"llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 5e5, 70.6},
      {"llama-3.1-70b", 80, 8192, 64, 8, 28672, 128256, 131072, 5e5, 70.6},
      {"qwen2.5-coder-1.5b", 28, 1536, 12, 2, 8960, 151936, 32768, 1e6, 1.54},
  };
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kModels)) {
    files += entry.path().extension() == ".yaml" ? 1 : 0;
  }
  EXPECT_EQ(files, models.size()) << "a model file without a test row (or the reverse)";
  for (const Published& m : models) {
    SCOPED_TRACE(m.file);
    const ArchitectureFile file = load_architecture_file(kModels / (std::string(m.file) + ".yaml"));
    const ModelConfig& c = file.config;
    EXPECT_EQ(file.name, m.file);
    EXPECT_THAT(file.source, HasSubstr("huggingface.co"));
    EXPECT_EQ(c.num_layers, m.layers);
    EXPECT_EQ(c.hidden_size, m.hidden);
    EXPECT_EQ(c.num_heads, m.heads);
    EXPECT_EQ(c.num_kv_heads, m.kv_heads);
    EXPECT_EQ(c.intermediate_size, m.intermediate);
    EXPECT_EQ(c.vocab_size, m.vocab);
    EXPECT_EQ(c.max_position_embeddings, m.context);
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_DOUBLE_EQ(c.rope_theta, m.rope_theta);
    EXPECT_NEAR(static_cast<double>(c.parameter_count()) / 1e9, m.billions, 0.05 * m.billions);
  }
  const ModelConfig llama31 = load_architecture_file(kModels / "llama-3.1-70b.yaml").config;
  EXPECT_EQ(llama31.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(llama31.rope_scaling.factor, 8.0);
  EXPECT_EQ(llama31.rope_scaling.original_max_position_embeddings, 8192);
}

TEST(ArchitectureFiles, Llama2_70bAtTp8HoldsAbout17GbOfBf16WeightsPerRank) {
  const ModelConfig config = load_architecture_file(kModels / "llama-2-70b.yaml").config;
  for (int rank = 0; rank < 8; ++rank) {
    const RankMemory memory = plan_rank_memory(config, ShardPlan::make(config, 8, rank),
                                               uniform_format(DType::kBF16), 4096);
    EXPECT_NEAR(static_cast<double>(memory.weight_bytes) / 1e9, 17.2, 0.1) << rank;
  }
  // LLaMA-3-70B at TP 16: more ranks than KV heads, so each KV head lives on two ranks.
  const ModelConfig llama3 = load_architecture_file(kModels / "llama-3-70b.yaml").config;
  EXPECT_FALSE(ShardPlan::check(llama3, 16).has_value());
  EXPECT_TRUE(ShardPlan::make(llama3, 16, 3).kv_replicated);
  // 40 heads do not split 16 ways: the reason names the heads.
  const ModelConfig llama13 = load_architecture_file(kModels / "llama-2-13b.yaml").config;
  ASSERT_TRUE(ShardPlan::check(llama13, 16).has_value());
  EXPECT_THAT(*ShardPlan::check(llama13, 16), HasSubstr("num_attention_heads = 40"));
}

TEST(ArchitectureFiles, YamlTypesBareConfigJsonAndErrorsThatNameTheFileAndKey) {
  const TempDir dir("architecture-files");
  const auto write = [&](const std::string& name, const std::string& text) {
    write_file(dir / name, text);
    return dir / name;
  };
  const std::string geometry =
      "  model_type: llama\n  hidden_size: 64\n  intermediate_size: 96\n  num_hidden_layers: 2\n"
      "  num_attention_heads: 4\n  num_key_value_heads: 2\n  vocab_size: 100\n";
  const ArchitectureFile file =
      load_architecture_file(write("a.yaml", "name: tiny\nconfig:\n" + geometry +
                                                 "  rope_theta: 5e5\n  tie_word_embeddings: true\n"
                                                 "  eos_token_id: [2, 7]\n"));
  EXPECT_EQ(file.name, "tiny");
  EXPECT_DOUBLE_EQ(file.config.rope_theta, 5e5);
  EXPECT_TRUE(file.config.tie_word_embeddings);
  EXPECT_EQ(file.config.eos_token_ids, (std::vector<std::int32_t>{2, 7}));

  // A bare config.json is an architecture file too; its name is the file's stem.
  const ArchitectureFile bare = load_architecture_file(write(
      "config.json",
      R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100})"));
  EXPECT_EQ(bare.name, "config");
  EXPECT_EQ(bare.config.num_layers, 2);

  const auto expect_error = [&](const std::filesystem::path& path, const std::string& text) {
    try {
      load_architecture_file(path);
      ADD_FAILURE() << "accepted " << path;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr(path.string()));
      EXPECT_THAT(error.what(), HasSubstr(text));
    }
  };
  expect_error(write("typo.yaml", "nmae: x\nconfig:\n" + geometry), "unknown key 'nmae'");
  expect_error(write("quoted.yaml", "config:\n" + geometry + "  max_position_embeddings: '4096'\n"),
               "max_position_embeddings");
  expect_error(write("missing.yaml", "config:\n  model_type: llama\n  hidden_size: 64\n"),
               "missing required key 'intermediate_size'");
  expect_error(write("broken.yaml", "config: [unclosed\n"), "not valid YAML");
  expect_error(dir / "absent.yaml", "no such file");
}

TEST(SyntheticWeights, InMemorySlicesEqualTheCheckpointOfTheSameSeed) {
  const TempDir dir("synthetic-weights");
  SyntheticModelSpec spec;
  spec.config = make_synthetic_config(2, 64, 4, 2, 96, 130);
  spec.dtype = DType::kBF16;
  spec.seed = 1234;
  write_synthetic_model(spec, dir.path());
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  const SyntheticSource source(spec);
  for (const char* name :
       {"model.embed_tokens.weight", "model.layers.1.self_attn.k_proj.weight",
        "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"}) {
    SCOPED_TRACE(name);
    const TensorInfo& info = checkpoint.tensor(name);
    const bool matrix = info.shape.size() == 2;
    // The whole tensor, and an inner block (rows and columns) as a tensor-parallel rank reads it.
    for (const TensorSlice slice :
         {TensorSlice{0, info.shape[0], 0, matrix ? info.shape[1] : 0},
          TensorSlice{1, info.shape[0] / 2, matrix ? 3 : 0, matrix ? info.shape[1] - 5 : 0}}) {
      const std::size_t count =
          static_cast<std::size_t>(slice.row_end - slice.row_begin) *
          static_cast<std::size_t>(matrix ? slice.col_end - slice.col_begin : 1);
      for (DType dst : {DType::kBF16, DType::kF32}) {
        std::vector<std::byte> from_file(count * dtype_size(dst));
        std::vector<std::byte> from_memory(count * dtype_size(dst));
        checkpoint.read(info, slice, dst, from_file.data());
        source.read(name, slice, dst, from_memory.data());
        EXPECT_EQ(std::memcmp(from_file.data(), from_memory.data(), from_file.size()), 0);
      }
    }
  }
  // Different seeds give different weights; the values have unit-scale spread.
  SyntheticModelSpec other = spec;
  other.seed = 1235;
  std::vector<float> a(64 * 130), b(64 * 130);
  SyntheticSource(spec).read("model.embed_tokens.weight", {0, 130, 0, 64}, DType::kF32, a.data());
  SyntheticSource(other).read("model.embed_tokens.weight", {0, 130, 0, 64}, DType::kF32, b.data());
  EXPECT_NE(a, b);
  double sum = 0.0, squares = 0.0;
  for (float v : a) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double mean = sum / static_cast<double>(a.size());
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(squares / static_cast<double>(a.size()) - mean * mean, 1.0, 0.05);
}

}  // namespace
}  // namespace selfspec::testing
