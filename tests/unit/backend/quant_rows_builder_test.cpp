// The CUDA backend's quantized rows built on the host (backend/quant_rows_builder.hpp,
// kernels/cuda/quant_rows.hpp), held to the CPU kernels without a GPU: in every quantized format,
// on shapes with K-format slices that start inside a super-block, the scalar reference product
// of the rows equals the CPU's quantized matmul bit for bit at several token counts, a row's
// dequantization equals the CPU's (ggml's values), and selected rows keep their products. The
// CUDA kernels are held to the same reference on a GPU (tests/gpu/quant_matmul_cuda_test.cpp).
#include "backend/quant_rows_builder.hpp"

#include "core/error.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/quant_matmul.hpp"
#include "kernels/cuda/quant_rows.hpp"
#include "tests/unit/kernels/quant_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <span>
#include <vector>

namespace selfspec {
namespace {

namespace kc = kernels::cpu;
using kc::test::GgufMatrix;
using kc::test::random_gguf_matrix;

struct Slice {
  std::int64_t rows;
  std::int64_t blocks;
  std::int64_t skip;  // columns of the blocks before the slice
  std::int64_t cols;
};

// Shapes per format: a partial panel of rows, and for the K formats slices starting inside a
// super-block (a tensor-parallel rank's columns).
std::vector<Slice> slices(WeightFormat format) {
  const bool k = kernels::cuda::quant_rows_layout(format, 1, 32).k_quant;
  if (k) return {{19, 2, 0, 512}, {21, 3, 96, 512}, {5, 2, 224, 64}, {17, 1, 0, 256}};
  return {{19, 8, 0, 256}, {33, 3, 0, 96}, {1, 40, 0, 1280}};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> activations(std::mt19937& rng, std::int64_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = pick(rng) == 0 ? 30.0f * normal(rng) : normal(rng);
  if (n >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // a group of zeros
  return x;
}

class QuantRowsTest : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(QuantRowsTest, ReferenceProductEqualsTheCpuKernelBitForBit) {
  const WeightFormat format = GetParam();
  std::mt19937 rng(71);
  for (const Slice& slice : slices(format)) {
    SCOPED_TRACE(::testing::Message()
                 << slice.rows << " rows, skip " << slice.skip << ", cols " << slice.cols);
    const GgufMatrix m = random_gguf_matrix(rng, format, slice.rows, slice.blocks);
    const HostWeight host{format, slice.rows, slice.cols, m.data.data(), m.row_bytes, slice.skip};
    const std::vector<std::byte> rows = build_quant_rows(host);
    std::vector<std::byte> packed(static_cast<std::size_t>(
        kc::packed_quant_bytes(format, slice.rows, slice.cols, slice.skip)));
    kc::pack_quant_rows({format, m.data.data(), slice.rows, m.row_bytes, slice.skip, slice.cols},
                        packed);
    const kc::PackedView view{format, packed.data(), slice.rows, slice.cols};
    for (const std::int64_t tokens : {std::int64_t{1}, std::int64_t{3}, std::int64_t{7}}) {
      const std::vector<float> x = activations(rng, tokens * slice.cols);
      std::vector<float> cpu(static_cast<std::size_t>(tokens * slice.rows));
      std::vector<float> reference(cpu.size());
      kc::quant_matmul(x.data(), tokens, view, cpu.data());
      reference_quant_matmul(rows, x.data(), tokens, reference.data());
      EXPECT_TRUE(same_bits(reference, cpu)) << tokens << " tokens";
    }
    for (std::int64_t r = 0; r < slice.rows; r += 7) {
      std::vector<float> cpu(static_cast<std::size_t>(slice.cols));
      std::vector<float> reference(cpu.size());
      kc::dequantize_packed_row(view, r, cpu);
      reference_quant_dequantize_row(rows, r, reference.data());
      EXPECT_TRUE(same_bits(reference, cpu)) << "row " << r << " dequantized";
    }
  }
}

TEST_P(QuantRowsTest, SelectedRowsKeepTheirProducts) {
  const WeightFormat format = GetParam();
  std::mt19937 rng(72);
  const Slice slice = slices(format)[1];
  const GgufMatrix m = random_gguf_matrix(rng, format, slice.rows, slice.blocks);
  const std::vector<std::byte> rows =
      build_quant_rows({format, slice.rows, slice.cols, m.data.data(), m.row_bytes, slice.skip});
  const std::vector<std::int32_t> picked = {5, 0, static_cast<std::int32_t>(slice.rows - 1), 5};
  const std::vector<std::byte> selected = select_quant_rows(rows, picked);
  const std::vector<float> x = activations(rng, 2 * slice.cols);
  std::vector<float> all(static_cast<std::size_t>(2 * slice.rows));
  std::vector<float> some(2 * picked.size());
  reference_quant_matmul(rows, x.data(), 2, all.data());
  reference_quant_matmul(selected, x.data(), 2, some.data());
  for (std::size_t t = 0; t < 2; ++t) {
    for (std::size_t i = 0; i < picked.size(); ++i) {
      EXPECT_EQ(
          std::memcmp(
              &some[t * picked.size() + i],
              &all[t * static_cast<std::size_t>(slice.rows) + static_cast<std::size_t>(picked[i])],
              sizeof(float)),
          0)
          << "token " << t << " row " << picked[i];
    }
  }
  EXPECT_THROW(
      select_quant_rows(rows, std::vector<std::int32_t>{static_cast<std::int32_t>(slice.rows)}),
      Error);
}

// The loader's reused host buffer: whatever it held (another matrix's rows, garbage), the rows
// built into it are build_quant_rows' bytes, padding included; a buffer of another size is refused.
TEST_P(QuantRowsTest, RowsBuiltIntoAReusedBufferAreTheSameBytes) {
  const WeightFormat format = GetParam();
  std::mt19937 rng(73);
  std::vector<std::byte> buffer;
  for (const Slice& slice : slices(format)) {
    SCOPED_TRACE(::testing::Message() << slice.rows << " rows, skip " << slice.skip);
    const GgufMatrix m = random_gguf_matrix(rng, format, slice.rows, slice.blocks);
    const HostWeight host{format, slice.rows, slice.cols, m.data.data(), m.row_bytes, slice.skip};
    const std::vector<std::byte> expected = build_quant_rows(host);
    ASSERT_EQ(quant_rows_bytes(host), expected.size());
    if (buffer.size() < expected.size()) buffer.resize(expected.size(), std::byte{0xAB});
    const std::span<std::byte> rows(buffer.data(), expected.size());
    build_quant_rows_into(host, rows);
    EXPECT_EQ(std::memcmp(rows.data(), expected.data(), expected.size()), 0);
    EXPECT_THROW(build_quant_rows_into(host, std::span(buffer.data(), expected.size() - 1)), Error);
    std::fill(buffer.begin(), buffer.end(), std::byte{0xCD});  // garbage for the next slice
  }
}

TEST(QuantRows, MalformedInputIsRefused) {
  std::mt19937 rng(73);
  GgufMatrix m = random_gguf_matrix(rng, WeightFormat::kQ4_0, 3, 4);
  const std::uint16_t infinity = 0x7C00;
  std::memcpy(m.data.data() + m.row_bytes + 18, &infinity, 2);      // row 1, block 1's d
  std::memcpy(m.data.data() + 2 * m.row_bytes + 18, &infinity, 2);  // and row 2's
  try {  // the first malformed row is named, whichever thread decodes it
    (void)build_quant_rows({WeightFormat::kQ4_0, 3, 128, m.data.data(), m.row_bytes, 0});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1, column 32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(build_quant_rows({WeightFormat::kBF16, 3, 128, m.data.data(), m.row_bytes, 0}),
               Error);
  std::vector<std::byte> garbage(300);
  std::vector<float> y(3);
  EXPECT_THROW(reference_quant_matmul(garbage, y.data(), 1, y.data()), Error);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantRowsTest, ::testing::ValuesIn(kQuantizedFormats),
                         [](const auto& param_info) {
                           return std::string(weight_format_name(param_info.param));
                         });

}  // namespace
}  // namespace selfspec
