// The quantized matmul (kernels/cpu/quant_matmul.hpp) and its activation quantizer:
//  * the quantizer equals its definition, written out here independently, for every ISA
//    (zeros, NaN, infinities and subnormals included);
//  * every format's product equals a double-precision reference over the file's dequantized
//    weights and the quantized activations, within a few float roundings;
//  * every ISA equals the scalar path bit for bit, for every token count 1..20, 1 and 2 threads,
//    on shapes with a partial last panel and K-format slices starting inside a super-block, and
//    each token's row equals that token computed alone (token-count invariance).
#include "kernels/cpu/quant_matmul.hpp"

#include "core/error.hpp"
#include "kernel_test_util.hpp"
#include "quant_test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace selfspec::kernels::cpu::test {
namespace {

struct Packed {
  WeightFormat format;
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t skip;  // columns of the source rows before the slice
  std::vector<std::byte> bytes;
  PackedView view() const { return {format, bytes.data(), rows, cols}; }
};

// Columns [skip, skip + cols) of m (skip < the block size), packed.
Packed pack(const GgufMatrix& m, std::int64_t skip, std::int64_t cols) {
  Packed p{m.format, m.rows, cols, skip, {}};
  p.bytes.resize(static_cast<std::size_t>(packed_quant_bytes(m.format, m.rows, cols, skip)));
  pack_quant_rows({m.format, m.data.data(), m.rows, m.row_bytes, skip, cols}, p.bytes);
  return p;
}

std::vector<float> run(const std::vector<float>& x, std::int64_t tokens, const Packed& p) {
  std::vector<float> y = nan_filled(static_cast<std::size_t>(tokens * p.rows + 4));
  quant_matmul(x.data(), tokens, p.view(), y.data());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(y[y.size() - 1 - i])) << "wrote past y";
  y.resize(static_cast<std::size_t>(tokens * p.rows));
  return y;
}

// Activations like a model's: mostly small, a few large, some groups all zero.
std::vector<float> activations(std::mt19937& rng, std::int64_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = pick(rng) == 0 ? 20.0f * normal(rng) : normal(rng);
  if (n >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  return x;
}

// ---- The quantizer ---------------------------------------------------------------------------

struct GroupQuant {
  std::vector<std::int8_t> q;
  float dx;
  std::int32_t s_a;
  std::int32_t s_b;
};

// The definition (quant_matmul.hpp), independently.
GroupQuant define_group(const float* x) {
  GroupQuant g{std::vector<std::int8_t>(32), 0.0f, 0, 0};
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]);
  }
  g.dx = amax / 127.0f;
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float v = x[i] * inv;
    const float clamped = std::isnan(v) ? -127.0f : std::min(127.0f, std::max(-127.0f, v));
    g.q[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(std::lrint(clamped));
    (i < 16 ? g.s_a : g.s_b) += g.q[static_cast<std::size_t>(i)];
  }
  return g;
}

TEST(QuantizeActivations, EveryIsaEqualsTheDefinition) {
  IsaGuard guard;
  std::mt19937 rng(3);
  const std::int64_t tokens = 3;
  const std::int64_t cols = 256;
  std::vector<float> x = activations(rng, tokens * cols);
  x[70] = std::numeric_limits<float>::quiet_NaN();  // group 2: a NaN among values
  x[100] = std::numeric_limits<float>::infinity();  // group 3: an infinity
  for (int i = 128; i < 160; ++i) x[static_cast<std::size_t>(i)] = 1e-41f * static_cast<float>(i);
  x[170] = -0.0f;
  for (const Isa isa : available_isas()) {
    SCOPED_TRACE(isa_name(isa));
    force_isa(isa);
    QuantizedActivations a;
    quantize_activations(x.data(), tokens, cols, a);
    for (std::int64_t t = 0; t < tokens; ++t) {
      for (std::int64_t g = 0; g < cols / 32; ++g) {
        SCOPED_TRACE(::testing::Message() << "token " << t << " group " << g);
        const GroupQuant expected = define_group(x.data() + t * cols + g * 32);
        const auto tg = static_cast<std::size_t>(t * (cols / 32) + g);
        for (int i = 0; i < 32; ++i) {
          ASSERT_EQ(a.q[static_cast<std::size_t>(t * cols + g * 32 + i)],
                    expected.q[static_cast<std::size_t>(i)])
              << "element " << i;
        }
        ASSERT_EQ(std::bit_cast<std::uint32_t>(a.dx[tg]),
                  std::bit_cast<std::uint32_t>(expected.dx));
        ASSERT_EQ(a.s16[2 * tg], expected.s_a);
        ASSERT_EQ(a.s16[2 * tg + 1], expected.s_b);
        ASSERT_EQ(a.s32[tg], expected.s_a + expected.s_b);
        ASSERT_EQ(a.s[tg], static_cast<float>(expected.s_a + expected.s_b));
        ASSERT_EQ(std::bit_cast<std::uint32_t>(a.dxs[tg]),
                  std::bit_cast<std::uint32_t>(expected.dx * a.s[tg]));
      }
    }
  }
}

// Each ISA's panel dispatch refuses a format it has no kernel for, instead of leaving y unwritten.
TEST(QuantPanels, EveryIsaRefusesAFormatThatIsNotQuantized) {
  std::vector<Isa> isas = {Isa::kScalar};
  if (detected_isa() != Isa::kScalar) isas.push_back(Isa::kAvx2);
  if (detected_isa() == Isa::kAvx512) isas.push_back(Isa::kAvx512);
  PanelGeometry g;
  g.format = WeightFormat::kBF16;
  const QuantizedActivations a;
  float y = 42.0f;
  for (const Isa isa : isas) {
    EXPECT_THROW(detail::quant_panels(isa, g, a, 0, 0, &y, 1), Error) << static_cast<int>(isa);
  }
}

TEST(QuantizeActivations, ColumnsMustBeWholeGroups) {
  QuantizedActivations a;
  const std::vector<float> x(48, 1.0f);
  EXPECT_THROW(quantize_activations(x.data(), 1, 48, a), selfspec::Error);
}

// ---- The product -----------------------------------------------------------------------------

class QuantMatmul : public ::testing::TestWithParam<WeightFormat> {
 protected:
  IsaGuard isa_guard_;
  ThreadGuard thread_guard_;
};

// Against double precision: the file's weights times the quantized activations. What remains is
// the rounding of the float steps (a few per group), bounded relative to Σ |w x̂|.
TEST_P(QuantMatmul, MatchesDoubleReferenceOfTheQuantizedActivations) {
  std::mt19937 rng(5);
  const WeightFormat format = GetParam();
  const std::int64_t block = ggml_block_elements(ggml_type_of(format));
  for (const std::int64_t tokens : {1, 2, 3, 5, 17}) {
    const GgufMatrix m = random_gguf_matrix(rng, format, 37, 1024 / block);
    const std::int64_t skip = block == 256 ? 64 : 0;
    const std::int64_t cols = 1024 - skip - (block == 256 ? 96 : 0);
    const Packed p = pack(m, skip, cols);
    const std::vector<float> x = activations(rng, tokens * cols);
    QuantizedActivations a;
    quantize_activations(x.data(), tokens, cols, a);
    for (const Isa isa : available_isas()) {
      SCOPED_TRACE(::testing::Message() << isa_name(isa) << " T " << tokens);
      force_isa(isa);
      const std::vector<float> y = run(x, tokens, p);
      for (std::int64_t r = 0; r < m.rows; ++r) {
        const std::vector<float> w = m.dequantized_row(r);
        for (std::int64_t t = 0; t < tokens; ++t) {
          double sum = 0.0;
          double magnitude = 0.0;
          for (std::int64_t c = 0; c < cols; ++c) {
            const auto tg = static_cast<std::size_t>(t * (cols / 32) + c / 32);
            const double xhat =
                static_cast<double>(a.q[static_cast<std::size_t>(t * cols + c)]) * a.dx[tg];
            const double prod = static_cast<double>(w[static_cast<std::size_t>(skip + c)]) * xhat;
            sum += prod;
            magnitude += std::fabs(prod);
          }
          ASSERT_NEAR(y[static_cast<std::size_t>(t * m.rows + r)], sum, 1e-5 * magnitude + 1e-30)
              << "row " << r << " token " << t;
        }
      }
    }
  }
}

// Every token count of a verification (1..20) and a prefill size, 1 and 2 threads: each ISA
// equals scalar bit for bit, and every token's row equals that token alone.
TEST_P(QuantMatmul, EveryIsaEqualsScalarAtEveryTokenCount) {
  std::mt19937 rng(6);
  const WeightFormat format = GetParam();
  const std::int64_t block = ggml_block_elements(ggml_type_of(format));
  struct Shape {
    std::int64_t rows;
    std::int64_t blocks;
    std::int64_t skip;
    std::int64_t cols;
  };
  // The first shape has enough panels for several thread chunks.
  const Shape shapes[] = {{300, 1024 / block, 0, 1024},
                          {33, 768 / block, block == 256 ? 224 : 0, block == 256 ? 512 : 768},
                          {16, 256 / block, 0, 256},
                          {5, 512 / block, block == 256 ? 32 : 0, block == 256 ? 384 : 512}};
  for (const Shape& shape : shapes) {
    const GgufMatrix m = random_gguf_matrix(rng, format, shape.rows, shape.blocks);
    const Packed p = pack(m, shape.skip, shape.cols);
    const std::int64_t max_tokens = 20;
    const std::vector<float> x = activations(rng, max_tokens * shape.cols);
    force_isa(Isa::kScalar);
    set_num_threads(1);
    std::vector<std::vector<float>> alone;
    for (std::int64_t t = 0; t < max_tokens; ++t) {
      alone.push_back(run(
          std::vector<float>(x.begin() + t * shape.cols, x.begin() + (t + 1) * shape.cols), 1, p));
    }
    for (const Isa isa : available_isas()) {
      for (const int threads : {1, 2}) {
        force_isa(isa);
        set_num_threads(threads);
        for (std::int64_t tokens = 1; tokens <= max_tokens; ++tokens) {
          SCOPED_TRACE(::testing::Message()
                       << isa_name(isa) << " threads " << threads << " rows " << shape.rows
                       << " cols " << shape.cols << " T " << tokens);
          const std::vector<float> y =
              run(std::vector<float>(x.begin(), x.begin() + tokens * shape.cols), tokens, p);
          for (std::int64_t t = 0; t < tokens; ++t) {
            const std::vector<float> row(y.begin() + t * shape.rows,
                                         y.begin() + (t + 1) * shape.rows);
            ASSERT_TRUE(same_bits(row, alone[static_cast<std::size_t>(t)])) << "token " << t;
          }
        }
      }
    }
  }
}

TEST_P(QuantMatmul, BadArgumentsAreErrors) {
  std::mt19937 rng(8);
  const GgufMatrix m = random_gguf_matrix(rng, GetParam(), 4, 1);
  const Packed p = pack(m, 0, m.cols());
  std::vector<float> x(static_cast<std::size_t>(m.cols()), 1.0f);
  std::vector<float> y(8);
  EXPECT_THROW(quant_matmul(x.data(), -1, p.view(), y.data()), selfspec::Error);
  EXPECT_THROW(quant_matmul(nullptr, 1, p.view(), y.data()), selfspec::Error);
  EXPECT_THROW(
      quant_matmul(x.data(), 1, {WeightFormat::kBF16, p.bytes.data(), 4, m.cols()}, y.data()),
      selfspec::Error);
  quant_matmul(x.data(), 0, p.view(), y.data());  // nothing to do
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantMatmul, ::testing::ValuesIn(kQuantizedFormats),
                         [](const ::testing::TestParamInfo<WeightFormat>& param_info) {
                           return std::string(weight_format_name(param_info.param));
                         });

}  // namespace
}  // namespace selfspec::kernels::cpu::test
