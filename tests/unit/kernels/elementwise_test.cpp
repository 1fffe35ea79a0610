// RMSNorm, SwiGLU, residual add, bias and embedding lookup against naive double references.
#include "kernels/cpu/elementwise.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernel_test_util.hpp"
#include "kernels/shared_math.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace selfspec::kernels::cpu::test {
namespace {

constexpr std::int64_t kDims[] = {1, 15, 16, 17, 100, 4096 + 3};
constexpr std::int64_t kTokenCounts[] = {1, 2, 3, 5, 17};

TEST(RmsNorm, MatchesDoubleReference) {
  std::mt19937 rng(11);
  const float eps = 1e-5f;
  for (const std::int64_t dim : kDims) {
    for (const std::int64_t n_tokens : kTokenCounts) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " T " << n_tokens);
      const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(n_tokens * dim), 3);
      const std::vector<float> weight = random_floats(rng, static_cast<std::size_t>(dim), 2);
      std::vector<float> y = nan_filled(x.size());
      rmsnorm(x.data(), weight.data(), eps, n_tokens, dim, y.data());
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        double sum = 0.0;
        for (std::int64_t i = 0; i < dim; ++i) {
          const double v = x[static_cast<std::size_t>(t * dim + i)];
          sum += v * v;
        }
        const double r = 1.0 / std::sqrt(sum / static_cast<double>(dim) + eps);
        for (std::int64_t i = 0; i < dim; ++i) {
          const std::size_t j = static_cast<std::size_t>(t * dim + i);
          const double expected = weight[static_cast<std::size_t>(i)] * x[j] * r;
          ASSERT_NEAR(y[j], expected, 4e-7 * std::fabs(expected) + 1e-30)
              << "t " << t << " i " << i;
        }
      }
      // In place gives the same bits.
      std::vector<float> in_place = x;
      rmsnorm(in_place.data(), weight.data(), eps, n_tokens, dim, in_place.data());
      EXPECT_TRUE(same_bits(in_place, y));
      // A token normalised alone gives the same bits as inside the batch.
      const std::int64_t last = n_tokens - 1;
      std::vector<float> alone = nan_filled(static_cast<std::size_t>(dim));
      rmsnorm(x.data() + last * dim, weight.data(), eps, 1, dim, alone.data());
      EXPECT_TRUE(same_bits(alone, std::vector<float>(y.begin() + last * dim, y.end())));
    }
  }
}

TEST(RmsNorm, ThreadCountInvariant) {
  ThreadGuard guard;
  std::mt19937 rng(12);
  const std::int64_t dim = 4099;
  const std::int64_t n_tokens = 33;
  const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(n_tokens * dim));
  const std::vector<float> weight = random_floats(rng, static_cast<std::size_t>(dim));
  std::vector<std::vector<float>> results;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<float> y = nan_filled(x.size());
    rmsnorm(x.data(), weight.data(), 1e-6f, n_tokens, dim, y.data());
    results.push_back(y);
  }
  EXPECT_TRUE(same_bits(results[0], results[1]));
  EXPECT_TRUE(same_bits(results[0], results[2]));
}

TEST(SwiGlu, MatchesDoubleReference) {
  std::mt19937 rng(13);
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{17}, std::int64_t{100000}}) {
    std::vector<float> gate = random_floats(rng, static_cast<std::size_t>(n), 12);
    const std::vector<float> up = random_floats(rng, static_cast<std::size_t>(n), 4);
    if (n > 4) {  // extremes: silu saturates to g and to -0
      gate[1] = 100.0f;
      gate[2] = -100.0f;
      gate[3] = 0.0f;
    }
    std::vector<float> out = nan_filled(static_cast<std::size_t>(n));
    swiglu(gate.data(), up.data(), out.data(), n);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double g = gate[i];
      const double expected = g / (1.0 + std::exp(-g)) * up[i];
      ASSERT_NEAR(out[i], expected, 1e-6 * std::fabs(expected) + 1e-30) << i;
    }
    std::vector<float> alias_gate = gate;
    swiglu(alias_gate.data(), up.data(), alias_gate.data(), n);
    EXPECT_TRUE(same_bits(alias_gate, out));
    std::vector<float> alias_up = up;
    swiglu(gate.data(), alias_up.data(), alias_up.data(), n);
    EXPECT_TRUE(same_bits(alias_up, out));
  }
}

TEST(AddInplace, ExactSum) {
  std::mt19937 rng(14);
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{17}, std::int64_t{200003}}) {
    std::vector<float> x = random_floats(rng, static_cast<std::size_t>(n));
    const std::vector<float> y = random_floats(rng, static_cast<std::size_t>(n));
    const std::vector<float> x0 = x;
    add_inplace(x.data(), y.data(), n);
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(x[i], static_cast<float>(static_cast<double>(x0[i]) + y[i])) << i;
    }
  }
}

TEST(AddBias, ExactSumPerRow) {
  std::mt19937 rng(15);
  for (const std::int64_t dim : kDims) {
    for (const std::int64_t n_tokens : kTokenCounts) {
      std::vector<float> x = random_floats(rng, static_cast<std::size_t>(n_tokens * dim));
      const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(dim));
      const std::vector<float> x0 = x;
      add_bias(x.data(), bias.data(), n_tokens, dim);
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        for (std::int64_t i = 0; i < dim; ++i) {
          const std::size_t j = static_cast<std::size_t>(t * dim + i);
          ASSERT_EQ(x[j], static_cast<float>(static_cast<double>(x0[j]) +
                                             bias[static_cast<std::size_t>(i)]));
        }
      }
    }
  }
}

// A KV row stored as bf16: rounded to nearest, ties to even, NaN kept quiet with its sign, at the
// given element offset, nothing else touched; as f32: copied.
TEST(StoreAs, RoundsToNearestEvenAtTheOffset) {
  const float tie_down = 1.00390625f;  // 1 + 2^-8: halfway between 0x3F80 and 0x3F81
  const float tie_up = 1.01171875f;    // 1 + 3 * 2^-8: halfway between 0x3F81 and 0x3F82
  const float above = 1.0040f;         // just past the first tie
  const float nan = -std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> src = {1.0f, tie_down, tie_up, above, nan, -0.0f, 3.0e-39f};
  std::vector<std::uint16_t> dst(10, 0xABCD);
  store_as(src.data(), static_cast<std::int64_t>(src.size()), DType::kBF16, dst.data(), 2);
  EXPECT_EQ(dst[0], 0xABCD);
  EXPECT_EQ(dst[1], 0xABCD);
  EXPECT_EQ(dst[2], 0x3F80);
  EXPECT_EQ(dst[3], 0x3F80);
  EXPECT_EQ(dst[4], 0x3F82);
  EXPECT_EQ(dst[5], 0x3F81);
  EXPECT_EQ(dst[6] & 0xFFC0, 0xFFC0);  // negative quiet NaN
  EXPECT_EQ(dst[7], 0x8000);
  EXPECT_EQ(dst[8], f32_to_bf16(3.0e-39f));  // a subnormal, rounded like any other value
  EXPECT_EQ(dst[9], 0xABCD);

  std::vector<float> f32(9, 7.0f);
  store_as(src.data(), 4, DType::kF32, f32.data(), 3);
  EXPECT_EQ(f32, (std::vector<float>{7, 7, 7, 1.0f, tie_down, tie_up, above, 7, 7}));
}

// The device's bf16 rounding (kernels/shared_math.hpp, also compiled for the host) is the host's
// (core/dtype.hpp) bit for bit: every sign, exponent and high mantissa (all 65,536 upper halves)
// with the lower halves that decide the rounding (zero, one, just below, at and above the tie,
// all ones) and a few random ones; NaNs, infinities and subnormals are among them.
TEST(SharedMath, Bf16RoundingIsTheHostsBitForBit) {
  std::mt19937 rng(17);
  std::vector<std::uint32_t> lows = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
  for (int i = 0; i < 4; ++i) lows.push_back(rng() & 0xffffu);
  for (std::uint32_t high = 0; high <= 0xffffu; ++high) {
    for (const std::uint32_t low : lows) {
      const float value = std::bit_cast<float>(high << 16 | low);
      ASSERT_EQ(kernels::float_to_bf16_bits(value), f32_to_bf16(value))
          << std::hex << (high << 16 | low);
    }
  }
}

// The tensor-core GEMV's activation split: hi + mid + lo == x exactly (in double, where the three
// bf16 values add without rounding) for random bit patterns with |x| in [2^-100, 2^100], every
// exponent of that range at mantissas with all ones, a lone low bit and the rounding tie; each
// part is the nearest-even bf16 of what the parts before it left, so |mid| <= |hi| / 2^8 and
// |lo| <= |mid| / 2^8 (half an ulp of the part before).
TEST(SharedMath, Bf16PartsSumToTheF32ValueExactly) {
  std::mt19937 rng(18);
  std::vector<std::uint32_t> patterns;
  for (int i = 0; i < 2'000'000; ++i) patterns.push_back(rng());
  for (std::uint32_t exponent = 127 - 100; exponent <= 127 + 100; ++exponent) {
    for (const std::uint32_t mantissa : {0x7fffffu, 0x000001u, 0x008000u, 0x00ffffu, 0x0u}) {
      patterns.push_back(exponent << 23 | mantissa);
      patterns.push_back(0x80000000u | exponent << 23 | mantissa);
    }
  }
  int checked = 0;
  for (const std::uint32_t bits : patterns) {
    const float x = std::bit_cast<float>(bits);
    const float magnitude = std::fabs(x);
    if (!(magnitude >= std::ldexp(1.0f, -100) && magnitude <= std::ldexp(1.0f, 100))) continue;
    const kernels::Bf16Parts parts = kernels::split_to_bf16_parts(x);
    const double hi = kernels::bf16_bits_to_float(parts.hi);
    const double mid = kernels::bf16_bits_to_float(parts.mid);
    const double lo = kernels::bf16_bits_to_float(parts.lo);
    ASSERT_EQ(hi + mid + lo, static_cast<double>(x)) << std::hex << bits;
    ASSERT_LE(std::fabs(mid), std::fabs(hi) / 256.0) << std::hex << bits;
    ASSERT_LE(std::fabs(lo), std::fabs(mid) / 256.0) << std::hex << bits;
    ++checked;
  }
  EXPECT_GT(checked, 1'000'000);
  // A bf16 value is its own hi part, with zero rests.
  const kernels::Bf16Parts exact = kernels::split_to_bf16_parts(1.5f);
  EXPECT_EQ(exact.hi, 0x3FC0);
  EXPECT_EQ(exact.mid, 0);
  EXPECT_EQ(exact.lo, 0);
}

class EmbeddingTest : public ::testing::TestWithParam<DType> {};

TEST_P(EmbeddingTest, OwnedRowsConvertedOthersZero) {
  const DType dtype = GetParam();
  std::mt19937 rng(16);
  const std::int64_t vocab_begin = 100;
  const std::int64_t rows = 50;
  for (const std::int64_t dim : {std::int64_t{1}, std::int64_t{17}, std::int64_t{4099}}) {
    const StoredWeights table = random_weights(rng, dtype, rows, dim);
    const std::vector<std::int32_t> tokens = {100, 149, 0, 99, 150, 123, 100000, 120, 120};
    const std::int64_t n_tokens = static_cast<std::int64_t>(tokens.size());
    std::vector<float> out = nan_filled(static_cast<std::size_t>(n_tokens * dim));
    embedding_lookup(WeightView{dtype, table.data(), rows, dim}, vocab_begin, tokens.data(),
                     n_tokens, out.data());
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      const std::int64_t row = tokens[static_cast<std::size_t>(t)] - vocab_begin;
      const bool owned = row >= 0 && row < rows;
      for (std::int64_t i = 0; i < dim; ++i) {
        const float got = out[static_cast<std::size_t>(t * dim + i)];
        const double expected = owned ? table.exact[static_cast<std::size_t>(row * dim + i)] : 0.0;
        ASSERT_EQ(static_cast<double>(got), expected) << "token " << t << " i " << i;
        if (!owned) {
          ASSERT_FALSE(std::signbit(got));
        }
      }
    }
  }
}

TEST_P(EmbeddingTest, NegativeTokenThrows) {
  const DType dtype = GetParam();
  std::mt19937 rng(17);
  const StoredWeights table = random_weights(rng, dtype, 4, 8);
  const std::vector<std::int32_t> tokens = {1, -1};
  std::vector<float> out(16);
  EXPECT_THROW(
      embedding_lookup(WeightView{dtype, table.data(), 4, 8}, 0, tokens.data(), 2, out.data()),
      selfspec::Error);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, EmbeddingTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& param_info) { return dtype_label(param_info.param); });

}  // namespace
}  // namespace selfspec::kernels::cpu::test
