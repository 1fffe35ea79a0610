// How LlamaWeights::load holds each matrix (llama_weights.hpp): a source's quantized tensors stay
// quantized with no dtype asked (native), convert with one; a tensor of a type no kernel runs
// (Q2_K, Q3_K) and a quantized slice off the 32-column groups become bf16; the values of every
// matrix are the source's (an embedding row read back equals the f32 read of the file). A layer
// asked for in a quantized format is quantized at load: its rows read back are the f32 values
// quantized by ggml_quantize.hpp, and a K format over rows that are not whole super-blocks falls
// back to q8_0.
#include "model/llama_weights.hpp"

#include "kernels/cpu/ggml_quantize.hpp"
#include "kernels/cpu/packed_weights.hpp"

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
#include <vector>

namespace selfspec::testing {
namespace {

// The tiny model of these tests: 4 query heads over 2 KV heads, 96 intermediate features.
TinyModelSpec tiny_spec(std::int64_t hidden) {
  TinyModelSpec spec;
  spec.hidden = hidden;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.intermediate = 96;
  spec.vocab = 80;
  return spec;
}

// A GGUF of a tiny model with every matrix in Q8_0 (hidden and intermediate multiples of 32).
struct QuantizedTiny {
  TempDir dir{"weight-formats"};
  std::unique_ptr<GgufFile> file;
  ModelConfig config;

  QuantizedTiny() {
    const TinyModelSpec spec = tiny_spec(64);
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

// Row r of a loaded matrix, read back as f32.
std::vector<float> matrix_row(const Matrix& m, std::int64_t r) {
  std::vector<float> row(static_cast<std::size_t>(m.cols));
  kernels::cpu::dequantize_packed_row({m.format, m.data.data(), m.rows, m.cols}, r, row);
  return row;
}

// What quantize-then-dequantize makes of f32 values in `format`.
std::vector<float> round_trip(WeightFormat format, const std::vector<float>& values) {
  const GgmlType type = kernels::cpu::ggml_type_of(format);
  std::vector<std::byte> blocks(ggml_row_bytes(type, static_cast<std::int64_t>(values.size())));
  quantize_ggml(type, values, blocks);
  std::vector<float> out(values.size());
  dequantize_ggml(type, blocks, out);
  return out;
}

TEST(WeightFormats, ALayerAskedForInAQuantizedFormatIsQuantizedAtLoad) {
  TempDir dir("weight-formats-requantized");
  const TinyModelSpec spec = tiny_spec(256);
  write_tiny_checkpoint(spec, dir.path());
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  const CheckpointSource source(checkpoint);
  const ModelConfig config = tiny_config(spec);
  const ShardPlan shard = ShardPlan::make(config, 1, 0, 32);
  const auto name_of = [](std::string_view suffix) { return layer_tensor_name(1, suffix); };
  for (const WeightFormat format :
       {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ4_K, WeightFormat::kQ6_K}) {
    SCOPED_TRACE(std::string(weight_format_name(format)));
    const LayerWeights layer =
        load_layer_weights(source, name_of, config, shard, format, cpu_backend());
    // gate_proj rows are 256 hidden columns: whole blocks of every format.
    EXPECT_EQ(layer.w_gate.format, format);
    // down_proj rows are 96 intermediate columns: a K format's super-blocks do not fit, q8_0 does.
    const bool k_format = format == WeightFormat::kQ4_K || format == WeightFormat::kQ6_K;
    EXPECT_EQ(layer.w_down.format, k_format ? WeightFormat::kQ8_0 : format);
    for (const auto& [matrix, hf] : {std::pair{&layer.w_gate, "mlp.gate_proj.weight"},
                                     std::pair{&layer.w_down, "mlp.down_proj.weight"}}) {
      for (const std::int64_t r : {std::int64_t{0}, matrix->rows - 1}) {
        std::vector<float> stored(static_cast<std::size_t>(matrix->cols));
        source.read(name_of(hf), {r, r + 1, 0, matrix->cols}, DType::kF32, stored.data());
        EXPECT_EQ(matrix_row(*matrix, r), round_trip(matrix->format, stored)) << hf << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace selfspec::testing
