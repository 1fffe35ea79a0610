// How LlamaWeights::load holds each matrix (llama_weights.hpp): a source's quantized tensors stay
// quantized with no dtype asked (native), convert with one; a tensor of a type no kernel runs
// (Q2_K, Q3_K) and a quantized slice off the 32-column groups become bf16; the values of every
// matrix are the source's (an embedding row read back equals the f32 read of the file).
#include "model/llama_weights.hpp"

#include "model_io/checkpoint_layout.hpp"
#include "model_io/gguf_export.hpp"
#include "model_io/gguf_file.hpp"
#include "model_io/gguf_model_config.hpp"
#include "model_io/gguf_tensor_source.hpp"
#include "model_io/safetensors.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace selfspec::testing {
namespace {

// A GGUF of a tiny model with every matrix in Q8_0 (hidden and intermediate multiples of 32).
struct QuantizedTiny {
  TempDir dir{"weight-formats"};
  std::unique_ptr<GgufFile> file;
  ModelConfig config;

  QuantizedTiny() {
    TinyModelSpec spec;
    spec.hidden = 64;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.intermediate = 96;
    spec.vocab = 80;
    write_tiny_checkpoint(spec, dir.path());
    const Checkpoint checkpoint = Checkpoint::open(dir.path());
    export_gguf(CheckpointSource(checkpoint), tiny_config(spec), dir / "model.gguf",
                GgmlType::kQ8_0);
    file = std::make_unique<GgufFile>(dir / "model.gguf");
    config = model_config_from_gguf(*file);
  }
};

// The GGUF, except that one tensor claims a type without a kernel.
class OneTensorWithoutKernel final : public TensorSource {
 public:
  OneTensorWithoutKernel(const TensorSource& inner, std::string name)
      : inner_(inner), name_(std::move(name)) {}
  void validate(const ModelConfig& config) const override { inner_.validate(config); }
  DType dtype(const std::string& name) const override { return inner_.dtype(name); }
  void read(const std::string& name, const TensorSlice& slice, DType dst_dtype,
            void* dst) const override {
    inner_.read(name, slice, dst_dtype, dst);
  }
  std::string describe() const override { return inner_.describe(); }
  std::optional<WeightFormat> quantized_format(const std::string& name) const override {
    return name == name_ ? std::nullopt : inner_.quantized_format(name);
  }
  std::optional<std::string> dequantized_only_type(const std::string& name) const override {
    return name == name_ ? std::optional<std::string>("Q2_K") : std::nullopt;
  }
  QuantizedSlice read_quantized(const std::string& name, const TensorSlice& slice) const override {
    return inner_.read_quantized(name, slice);
  }

 private:
  const TensorSource& inner_;
  std::string name_;
};

TEST(WeightFormats, QuantizedTensorsStayQuantizedUnlessConverted) {
  const QuantizedTiny tiny;
  const GgufTensorSource source(*tiny.file, tiny.config);
  const ShardPlan shard = ShardPlan::make(tiny.config, 1, 0, 32);
  const LlamaWeights native =
      LlamaWeights::load(source, tiny.config, shard, std::nullopt, cpu_backend());
  EXPECT_EQ(native.embedding.format, WeightFormat::kQ8_0);
  EXPECT_EQ(native.layers[0].w_down.format, WeightFormat::kQ8_0);
  EXPECT_EQ(native.bytes_by_format().count("q8_0"), 1U);
  const LlamaWeights converted =
      LlamaWeights::load(source, tiny.config, shard, DType::kF32, cpu_backend());
  EXPECT_EQ(converted.embedding.format, WeightFormat::kF32);
  EXPECT_EQ(converted.layers[0].w_down.format, WeightFormat::kF32);
  // Q8_0 holds a quarter of f32's bytes, plus its scales and the panels' headers.
  EXPECT_LT(native.bytes(), converted.bytes() / 3);
}

TEST(WeightFormats, ATypeWithoutAKernelIsDequantizedToBf16) {
  const QuantizedTiny tiny;
  const GgufTensorSource gguf(*tiny.file, tiny.config);
  const std::string name = layer_tensor_name(1, "mlp.up_proj.weight");
  const OneTensorWithoutKernel source(gguf, name);
  const ShardPlan shard = ShardPlan::make(tiny.config, 1, 0, 32);
  const LlamaWeights weights =
      LlamaWeights::load(source, tiny.config, shard, std::nullopt, cpu_backend());
  EXPECT_EQ(weights.layers[1].w_up.format, WeightFormat::kBF16);
  EXPECT_EQ(weights.layers[1].w_gate.format, WeightFormat::kQ8_0);
  EXPECT_EQ(weights.layers[0].w_up.format, WeightFormat::kQ8_0);
}

TEST(WeightFormats, ASliceOffTheGroupsIsDequantizedToBf16) {
  const QuantizedTiny tiny;
  const GgufTensorSource source(*tiny.file, tiny.config);
  // Unit 1 at TP 2: the 96 intermediate features split 48 / 48, off the 32-column groups, so the
  // ranks' down_proj slices are bf16 (their gate/up rows stay quantized).
  const ShardPlan shard = ShardPlan::make(tiny.config, 2, 1, 1);
  const LlamaWeights weights =
      LlamaWeights::load(source, tiny.config, shard, std::nullopt, cpu_backend());
  EXPECT_EQ(weights.layers[0].w_down.format, WeightFormat::kBF16);
  EXPECT_EQ(weights.layers[0].w_gate.format, WeightFormat::kQ8_0);
  // With the 32-feature unit the same split is 32 / 64: quantized.
  const LlamaWeights aligned = LlamaWeights::load(
      source, tiny.config, ShardPlan::make(tiny.config, 2, 1, 32), std::nullopt, cpu_backend());
  EXPECT_EQ(aligned.layers[0].w_down.format, WeightFormat::kQ8_0);
  EXPECT_EQ(aligned.layers[0].w_down.cols, 64);
}

}  // namespace
}  // namespace selfspec::testing
