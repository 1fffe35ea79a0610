// Synthetic weights stored quantized (model_io/synthetic_quantized.hpp, SyntheticSource with a
// matrix format): every block depends only on its row and block index, so a rank's slice equals
// the same rows and blocks of the whole matrix; the dense read of such a matrix is its blocks
// dequantized; the values' deviation is about the tensor's initialisation in every format; a
// matrix whose columns are not whole blocks stays dense; and a model of them loads quantized and
// runs (TP 1 and TP 2 give close logits).
#include "model_io/synthetic_quantized.hpp"

#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "model/llama_weights.hpp"
#include "model_io/synthetic_model.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/thread_comm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace selfspec::testing {
namespace {

class SyntheticQuantizedTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(SyntheticQuantizedTest, SlicesAreTheWholeMatrixsBlocksAndReadsAreTheirValues) {
  const WeightFormat format = GetParam();
  const GgmlType type = kernels::cpu::ggml_type_of(format);
  const std::int64_t block = ggml_block_elements(type);
  const std::int64_t block_bytes = ggml_block_bytes(type);
  const std::int64_t rows = 20;
  const std::int64_t cols = 4 * block;
  const QuantizedSlice whole =
      synthetic_quantized_slice(format, 7, 0.05, rows, cols, {0, rows, 0, cols});
  ASSERT_EQ(whole.row_stride, 4 * block_bytes);
  // Rows 5..12, columns [block + 32, 3 block + 32): inside blocks for the 256-column formats.
  const TensorSlice part{5, 12, block + 32, 3 * block + 32};
  const std::int64_t first_block = part.col_begin / block;
  const std::int64_t last_block = (part.col_end + block - 1) / block;
  const QuantizedSlice slice = synthetic_quantized_slice(format, 7, 0.05, rows, cols, part);
  EXPECT_EQ(slice.skip, part.col_begin - first_block * block);
  EXPECT_EQ(slice.cols, 2 * block);
  ASSERT_EQ(slice.row_stride, (last_block - first_block) * block_bytes);
  for (std::int64_t r = 0; r < slice.rows; ++r) {
    EXPECT_EQ(
        std::memcmp(slice.data.data() + r * slice.row_stride,
                    whole.data.data() + (5 + r) * whole.row_stride + first_block * block_bytes,
                    static_cast<std::size_t>(slice.row_stride)),
        0)
        << "row " << r;
  }
  // The dense read: the whole matrix's blocks dequantized, the slice's columns of them.
  std::vector<float> read(static_cast<std::size_t>(7 * 2 * block));
  synthetic_quantized_values(format, 7, 0.05, rows, cols, part, DType::kF32, read.data());
  std::vector<float> row(static_cast<std::size_t>(cols));
  double sum = 0.0;
  double sum_squares = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    dequantize_ggml(type,
                    std::span(whole.data.data() + r * whole.row_stride,
                              static_cast<std::size_t>(whole.row_stride)),
                    row);
    for (const float v : row) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sum_squares += static_cast<double>(v) * v;
    }
    if (r < 5 || r >= 12) continue;
    for (std::int64_t c = 0; c < 2 * block; ++c) {
      EXPECT_EQ(read[static_cast<std::size_t>((r - 5) * 2 * block + c)],
                row[static_cast<std::size_t>(block + 32 + c)])
          << "row " << r << " column " << c;
    }
  }
  const double n = static_cast<double>(rows * cols);
  const double mean = sum / n;
  const double std = std::sqrt(sum_squares / n - mean * mean);
  EXPECT_NEAR(std, 0.05, 0.02) << "the values' deviation";
  EXPECT_LT(std::fabs(mean), 0.03) << "the values' mean";
}

INSTANTIATE_TEST_SUITE_P(Formats, SyntheticQuantizedTest, ::testing::ValuesIn(kQuantizedFormats),
                         [](const auto& param_info) {
                           return std::string(weight_format_name(param_info.param));
                         });

TEST(SyntheticQuantizedModel, LoadsQuantizedAndTwoRanksAgreeWithOne) {
  SyntheticModelSpec spec;
  spec.config = make_synthetic_config(2, 256, 4, 2, 512, 300);
  spec.matrix_format = WeightFormat::kQ4_K;
  const SyntheticSource source(spec);
  EXPECT_EQ(source.quantized_format("model.layers.0.mlp.down_proj.weight"), WeightFormat::kQ4_K);
  EXPECT_EQ(source.quantized_format("model.layers.0.input_layernorm.weight"), std::nullopt);
  SyntheticModelSpec narrow = spec;
  narrow.config = make_synthetic_config(1, 96, 4, 2, 128, 50);  // 96 columns: not a super-block
  EXPECT_EQ(SyntheticSource(narrow).quantized_format("model.layers.0.mlp.up_proj.weight"),
            std::nullopt);

  const std::vector<std::int32_t> tokens = {1, 7, 42, 9};
  std::vector<float> one;
  LocalComm single;
  const ShardPlan shard = ShardPlan::make(spec.config, 1, 0, 32);
  LlamaModel model(spec.config, shard,
                   LlamaWeights::load(source, spec.config, shard, std::nullopt, cpu_backend()),
                   single, cpu_backend());
  EXPECT_EQ(model.weights().layers[0].w_gate.format, WeightFormat::kQ4_K);
  KvCache kv = model.make_kv_cache(16);
  one = forward_all_rows(model, kv, tokens);
  for (const float v : one) ASSERT_TRUE(std::isfinite(v));

  std::vector<std::vector<float>> shards(2);
  run_ranks(2, false, [&](ThreadComm& comm) {
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    const ShardPlan rank_shard = ShardPlan::make(spec.config, 2, comm.rank(), 32);
    LlamaModel rank_model(
        spec.config, rank_shard,
        LlamaWeights::load(source, spec.config, rank_shard, std::nullopt, *backend), comm,
        *backend);
    KvCache rank_kv = rank_model.make_kv_cache(16);
    shards[static_cast<std::size_t>(comm.rank())] = forward_all_rows(rank_model, rank_kv, tokens);
  });
  // Rank 0 holds the vocabulary's first half: its logits are the one-rank logits' first columns.
  const std::size_t half = shards[0].size() / tokens.size();
  const std::size_t vocab = one.size() / tokens.size();
  std::vector<double> expected;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    for (std::size_t i = 0; i < half; ++i) expected.push_back(one[t * vocab + i]);
  }
  EXPECT_LT(relative_max_error(shards[0], expected), 1e-4);
}

}  // namespace
}  // namespace selfspec::testing
