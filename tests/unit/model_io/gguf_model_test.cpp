// A model through GGUF: the config from the metadata, the tensors under GGUF names with the llama
// Q/K permutation undone, rank slices (also those that cut a quantization block),
// and the checks of a file against its config. A tiny checkpoint exported to GGUF must read back
// equal to the checkpoint, tensor by tensor and slice by slice.
#include "core/error.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/gguf_export.hpp"
#include "model_io/gguf_file.hpp"
#include "model_io/gguf_model_config.hpp"
#include "model_io/gguf_tensor_source.hpp"
#include "model_io/safetensors.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

namespace selfspec {
namespace {

using ::testing::HasSubstr;

std::vector<float> read(const TensorSource& source, const std::string& name,
                        const TensorSlice& slice, bool matrix) {
  const std::int64_t n =
      (slice.row_end - slice.row_begin) * (matrix ? slice.col_end - slice.col_begin : 1);
  std::vector<float> out(static_cast<std::size_t>(n));
  source.read(name, slice, DType::kF32, out.data());
  return out;
}

// Exports the tiny model of `spec` and checks every tensor (whole, and a middle slice) reads the
// same from the GGUF as from the checkpoint.
void expect_round_trip(const testing::TinyModelSpec& spec) {
  const testing::TempDir dir("gguf-round-trip");
  testing::write_tiny_checkpoint(spec, dir.path());
  const ModelConfig config = testing::tiny_config(spec);
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  const CheckpointSource reference(checkpoint);
  export_gguf(reference, config, dir / "model.gguf");

  const GgufFile file(dir / "model.gguf");
  const ModelConfig read_config = model_config_from_gguf(file);
  EXPECT_EQ(read_config.model_type, config.model_type);
  EXPECT_EQ(read_config.num_layers, config.num_layers);
  EXPECT_EQ(read_config.hidden_size, config.hidden_size);
  EXPECT_EQ(read_config.intermediate_size, config.intermediate_size);
  EXPECT_EQ(read_config.num_heads, config.num_heads);
  EXPECT_EQ(read_config.num_kv_heads, config.num_kv_heads);
  EXPECT_EQ(read_config.head_dim, config.head_dim);
  EXPECT_EQ(read_config.vocab_size, config.vocab_size);
  EXPECT_EQ(read_config.max_position_embeddings, config.max_position_embeddings);
  EXPECT_EQ(read_config.tie_word_embeddings, config.tie_word_embeddings);
  EXPECT_EQ(read_config.attention_bias, config.attention_bias);
  EXPECT_FLOAT_EQ(static_cast<float>(read_config.rms_norm_eps),
                  static_cast<float>(config.rms_norm_eps));
  EXPECT_FLOAT_EQ(static_cast<float>(read_config.rope_theta),
                  static_cast<float>(config.rope_theta));

  const GgufTensorSource gguf(file, read_config);
  gguf.validate(read_config);
  for (const ExpectedTensor& expected : expected_tensors(config)) {
    if (!expected.required) continue;
    const bool matrix = expected.shape.size() == 2;
    const std::int64_t rows = expected.shape[0];
    const std::int64_t cols = matrix ? expected.shape[1] : 0;
    for (const TensorSlice& slice :
         {TensorSlice{0, rows, 0, cols}, TensorSlice{1, rows - 2, matrix ? 8 : 0, cols}}) {
      EXPECT_EQ(read(gguf, expected.name, slice, matrix),
                read(reference, expected.name, slice, matrix))
          << expected.name << " rows [" << slice.row_begin << ", " << slice.row_end << ")";
    }
  }
}

TEST(GgufModel, LlamaWithGroupedQueryAttentionRoundTrips) {
  testing::TinyModelSpec spec;
  spec.heads = 4;
  spec.kv_heads = 2;
  expect_round_trip(spec);
}

TEST(GgufModel, TiedLlamaRoundTrips) {
  testing::TinyModelSpec spec;
  spec.tie = true;
  expect_round_trip(spec);
}

TEST(GgufModel, Qwen2WithBiasRoundTrips) {
  testing::TinyModelSpec spec;
  spec.model_type = "qwen2";
  spec.attention_bias = true;
  spec.kv_heads = 2;
  expect_round_trip(spec);
}

// The permutation itself, independently of the exporter: llama.cpp's converter reshapes Q rows to
// (heads, 2, d/2), swaps the last two axes and flattens, so GGUF row 2k + i holds HF row
// i*d/2 + k. With one head of size 4, GGUF rows [a, b, c, d] are HF rows [a, c, b, d].
TEST(GgufModel, UndoesTheLlamaQueryKeyPermutation) {
  ModelConfig config;
  config.model_type = "llama";
  config.num_heads = 1;
  config.num_kv_heads = 1;
  config.head_dim = 4;
  for (const char* arch : {"llama", "qwen2"}) {
    config.model_type = arch;
    GgufWriter writer;
    const std::vector<float> rows = {10, 20, 30, 40};
    writer.add_f32_tensor("blk.0.attn_q.weight", {1, 4}, rows);
    writer.add_f32_tensor("blk.0.attn_v.weight", {1, 4}, rows);
    const std::vector<std::byte> bytes = writer.to_bytes();
    const GgufFile file(bytes, "perm.gguf");
    const GgufTensorSource source(file, config);
    const std::vector<float> q =
        read(source, "model.layers.0.self_attn.q_proj.weight", {0, 4, 0, 1}, true);
    const std::vector<float> v =
        read(source, "model.layers.0.self_attn.v_proj.weight", {0, 4, 0, 1}, true);
    if (config.model_type == "llama") {
      EXPECT_EQ(q, (std::vector<float>{10, 30, 20, 40}));
    } else {
      EXPECT_EQ(q, rows);  // qwen2 files use the NeoX layout: nothing to undo
    }
    EXPECT_EQ(v, rows);
  }
}

// Q8_0 block: f16 scale, then 32 int8 values.
std::vector<std::byte> q8_0_block(float scale, std::int8_t first) {
  std::vector<std::byte> block(34);
  const std::uint16_t d = f32_to_f16(scale);
  std::memcpy(block.data(), &d, 2);
  for (int i = 0; i < 32; ++i) block[2 + i] = static_cast<std::byte>(first + i);
  return block;
}

TEST(GgufModel, ColumnSlicesMayCutBlocks) {
  ModelConfig config;
  config.model_type = "llama";
  GgufWriter writer;
  // One row of two Q8_0 blocks: values 0.5 * (0..31) and 2 * (-16..15).
  std::vector<std::byte> data = q8_0_block(0.5F, 0);
  const std::vector<std::byte> second = q8_0_block(2.0F, -16);
  data.insert(data.end(), second.begin(), second.end());
  writer.add_tensor("blk.0.attn_output.weight", GgmlType::kQ8_0, {64, 1}, data);
  const std::vector<std::byte> bytes = writer.to_bytes();
  const GgufFile file(bytes, "q8.gguf");
  const GgufTensorSource source(file, config);
  const std::string name = "model.layers.0.self_attn.o_proj.weight";
  EXPECT_EQ(source.dtype(name), DType::kF32);
  const std::vector<float> right = read(source, name, {0, 1, 32, 64}, true);
  ASSERT_EQ(right.size(), 32U);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(right[i], 2.0F * static_cast<float>(i - 16));
  const std::vector<float> all = read(source, name, {0, 1, 0, 64}, true);
  EXPECT_EQ(all[3], 1.5F);
  // Slices that start or end inside a block read the values of the whole-row read.
  for (const auto& [begin, end] : {std::pair{16, 64}, std::pair{8, 40}, std::pair{33, 34},
                                   std::pair{0, 31}, std::pair{31, 33}}) {
    const std::vector<float> part = read(source, name, {0, 1, begin, end}, true);
    ASSERT_EQ(part.size(), static_cast<std::size_t>(end - begin));
    for (int i = begin; i < end; ++i) {
      EXPECT_EQ(part[static_cast<std::size_t>(i - begin)], all[static_cast<std::size_t>(i)])
          << "[" << begin << ", " << end << ") column " << i;
    }
  }
  EXPECT_THAT(
      [&] {
        read(source, name, {0, 2, 0, 64}, true);
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("is out of range")));
}

TEST(GgufModel, ValidationNamesMissingAndUnexpectedTensors) {
  testing::TinyModelSpec spec;
  const testing::TempDir dir("gguf-validate");
  testing::write_tiny_checkpoint(spec, dir.path());
  const ModelConfig config = testing::tiny_config(spec);
  const Checkpoint checkpoint = Checkpoint::open(dir.path());

  GgufWriter extra;
  add_model_to_gguf(extra, CheckpointSource(checkpoint), config);
  const std::vector<float> one = {1};
  extra.add_f32_tensor("rope_freqs.weight", {1}, one);
  const std::vector<std::byte> extra_bytes = extra.to_bytes();
  const GgufFile extra_file(extra_bytes, "extra.gguf");
  EXPECT_THAT([&] { model_config_from_gguf(extra_file); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tensor 'rope_freqs.weight'")));
  EXPECT_THAT([&] { GgufTensorSource(extra_file, config).validate(config); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "extra.gguf: tensor 'rope_freqs.weight' is not part of a llama model")));

  ModelConfig deeper = config;
  deeper.num_layers = config.num_layers + 1;
  GgufWriter writer;
  add_model_to_gguf(writer, CheckpointSource(checkpoint), config);
  const std::vector<std::byte> bytes = writer.to_bytes();
  const GgufFile file(bytes, "tiny.gguf");
  EXPECT_THAT([&] { GgufTensorSource(file, deeper).validate(deeper); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "tiny.gguf: tensor 'blk.2.attn_norm.weight' (model.layers.2.input_layernorm."
                  "weight in HF naming) is missing")));
  ModelConfig wider = config;
  wider.intermediate_size = config.intermediate_size * 2;
  EXPECT_THAT(
      [&] { GgufTensorSource(file, wider).validate(wider); },
      ::testing::ThrowsMessage<Error>(HasSubstr("tensor 'blk.0.ffn_gate.weight' has shape")));
}

// The metadata of the tiny model with one key changed by `edit`.
std::string config_error(const std::function<void(GgufWriter&)>& edit) {
  testing::TinyModelSpec spec;
  const testing::TempDir dir("gguf-config");
  testing::write_tiny_checkpoint(spec, dir.path());
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  GgufWriter writer;
  add_model_to_gguf(writer, CheckpointSource(checkpoint), testing::tiny_config(spec));
  edit(writer);
  const std::vector<std::byte> bytes = writer.to_bytes();
  try {
    model_config_from_gguf(GgufFile(bytes, "edited.gguf"));
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(GgufModel, ConfigErrorsNameTheKey) {
  EXPECT_EQ(config_error([](GgufWriter&) {}), "(no error)");
  EXPECT_THAT(config_error([](GgufWriter& w) { w.set_string("general.architecture", "gpt2"); }),
              HasSubstr("general.architecture 'gpt2' is not supported"));
  EXPECT_THAT(config_error([](GgufWriter& w) { w.set_string("llama.rope.scaling.type", "yarn"); }),
              HasSubstr("llama.rope.scaling.type = 'yarn' is not supported"));
  EXPECT_THAT(config_error([](GgufWriter& w) { w.set_u32("llama.rope.dimension_count", 4); }),
              HasSubstr("partial rotary embeddings are not supported"));
  EXPECT_THAT(config_error([](GgufWriter& w) { w.set_u32("llama.block_count", 0); }),
              HasSubstr("'llama.block_count' must be positive"));
  EXPECT_THAT(config_error([](GgufWriter& w) { w.set_string("llama.block_count", "2"); }),
              HasSubstr("'llama.block_count' is a string, not an integer"));
  EXPECT_THAT(config_error([](GgufWriter& w) { w.set_u32("tokenizer.ggml.eos_token_id", 9999); }),
              HasSubstr("'tokenizer.ggml.eos_token_id' = 9999 is outside the vocabulary"));
  // Found by fuzzing: 851,969 layers made validation build 11 million tensor names (1.5 GB).
  EXPECT_THAT(config_error([](GgufWriter& w) { w.set_u32("llama.block_count", 851969); }),
              HasSubstr("'num_hidden_layers' = 851969 is more than selfspec runs (256 layers)"));
}

TEST(GgufModel, MapsHuggingFaceNames) {
  EXPECT_EQ(gguf_tensor_name("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(gguf_tensor_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(gguf_tensor_name("model.norm.weight"), "output_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.17.mlp.down_proj.weight"), "blk.17.ffn_down.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.self_attn.k_proj.bias"), "blk.0.attn_k.bias");
  EXPECT_THROW(gguf_tensor_name("model.layers.x.mlp.down_proj.weight"), Error);
  EXPECT_THROW(gguf_tensor_name("model.layers.1.mlp.fc.weight"), Error);
}

}  // namespace
}  // namespace selfspec
