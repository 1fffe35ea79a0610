// matmul / dot against a naive double-precision reference, plus the invariance contract of
// matmul.hpp: scalar and AVX2 bit-identical, a token's row independent of T, results independent
// of the thread count.
#include "kernels/cpu/matmul.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernel_test_util.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/matmul_avx2.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

namespace selfspec::kernels::cpu::test {
namespace {

constexpr std::int64_t kAwkwardK[] = {1, 15, 16, 17, 100, 4096 + 3};
constexpr std::int64_t kTokenCounts[] = {1, 2, 3, 5, 17};
constexpr std::int64_t kRowCounts[] = {1, 2, 5, 7, 33};
constexpr float kGuard = 12345.0f;  // written after y; must survive the call
constexpr int kGuardCount = 8;

struct Reference {
  std::vector<double> value;    // [T][N]
  std::vector<double> abs_sum;  // sum |x w| per output, for the error bound
};

Reference reference_matmul(const std::vector<float>& x, std::int64_t n_tokens,
                           const StoredWeights& w) {
  Reference ref;
  ref.value.assign(static_cast<std::size_t>(n_tokens * w.rows), 0.0);
  ref.abs_sum.assign(ref.value.size(), 0.0);
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t n = 0; n < w.rows; ++n) {
      double sum = 0.0;
      double abs_sum = 0.0;
      for (std::int64_t k = 0; k < w.cols; ++k) {
        const double p = static_cast<double>(x[static_cast<std::size_t>(t * w.cols + k)]) *
                         w.exact[static_cast<std::size_t>(n * w.cols + k)];
        sum += p;
        abs_sum += std::fabs(p);
      }
      ref.value[static_cast<std::size_t>(t * w.rows + n)] = sum;
      ref.abs_sum[static_cast<std::size_t>(t * w.rows + n)] = abs_sum;
    }
  }
  return ref;
}

// Error bound of the canonical order: ceil(K/16) fma roundings per lane plus 4 tree levels, each
// at most 2^-24 of the sum of magnitudes (first order), with margin.
double error_bound(std::int64_t k, double abs_sum) {
  const double steps = static_cast<double>((k + 15) / 16 + 4);
  return 1.5 * steps * std::ldexp(1.0, -24) * abs_sum + 1e-35;
}

std::vector<float> run_matmul(const std::vector<float>& x, std::int64_t n_tokens,
                              const StoredWeights& w) {
  std::vector<float> y = nan_filled(static_cast<std::size_t>(n_tokens * w.rows + kGuardCount));
  std::fill(y.end() - kGuardCount, y.end(), kGuard);
  matmul(x.data(), n_tokens, WeightView{w.dtype, w.data(), w.rows, w.cols}, y.data());
  for (int i = 0; i < kGuardCount; ++i) EXPECT_EQ(y[y.size() - kGuardCount + i], kGuard);
  y.resize(y.size() - kGuardCount);
  return y;
}

class MatmulTest : public ::testing::TestWithParam<DType> {
 protected:
  IsaGuard isa_guard_;
  ThreadGuard thread_guard_;
};

TEST_P(MatmulTest, MatchesDoubleReference) {
  const DType dtype = GetParam();
  std::mt19937 rng(1234);
  for (const std::int64_t k : kAwkwardK) {
    for (const std::int64_t n_tokens : kTokenCounts) {
      for (const std::int64_t rows : kRowCounts) {
        const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(n_tokens * k));
        const StoredWeights w = random_weights(rng, dtype, rows, k);
        const Reference ref = reference_matmul(x, n_tokens, w);
        for (const Isa isa : available_isas()) {
          SCOPED_TRACE(::testing::Message() << "isa " << isa_name(isa) << " K " << k << " T "
                                            << n_tokens << " N " << rows);
          force_isa(isa);
          const std::vector<float> y = run_matmul(x, n_tokens, w);
          for (std::size_t i = 0; i < y.size(); ++i) {
            ASSERT_NEAR(y[i], ref.value[i], error_bound(k, ref.abs_sum[i])) << "output " << i;
          }
        }
      }
    }
  }
}

TEST_P(MatmulTest, DotMatchesReferenceAndMatmul) {
  const DType dtype = GetParam();
  std::mt19937 rng(99);
  for (const std::int64_t k : kAwkwardK) {
    const std::int64_t rows = 5;
    const std::int64_t n_tokens = 3;
    const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(n_tokens * k));
    const StoredWeights w = random_weights(rng, dtype, rows, k);
    const Reference ref = reference_matmul(x, n_tokens, w);
    for (const Isa isa : available_isas()) {
      SCOPED_TRACE(::testing::Message() << "isa " << isa_name(isa) << " K " << k);
      force_isa(isa);
      const std::vector<float> y = run_matmul(x, n_tokens, w);
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        for (std::int64_t n = 0; n < rows; ++n) {
          const std::size_t i = static_cast<std::size_t>(t * rows + n);
          const float d = dot(x.data() + t * k, w.row(n), dtype, k);
          EXPECT_EQ(std::bit_cast<std::uint32_t>(d), std::bit_cast<std::uint32_t>(y[i]));
          EXPECT_NEAR(d, ref.value[i], error_bound(k, ref.abs_sum[i]));
        }
      }
    }
  }
}

// Inputs that make any change of order visible: magnitudes spread over many binades, and
// products that underflow to -0 (the sign of a zero accumulator depends on the padding of the
// tail being an fma with zeros).
std::vector<float> spread_floats(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<float> mantissa(0.5f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(n);
  for (float& x : v) {
    x = std::ldexp(mantissa(rng), exponent(rng)) * (negative(rng) ? -1.0f : 1.0f);
  }
  return v;
}

TEST_P(MatmulTest, ScalarAndAvx2AreBitIdentical) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  const DType dtype = GetParam();
  std::mt19937 rng(7);
  for (const std::int64_t k : kAwkwardK) {
    for (const std::int64_t n_tokens : kTokenCounts) {
      const std::int64_t rows = 7;
      for (int variant = 0; variant < 3; ++variant) {
        SCOPED_TRACE(::testing::Message()
                     << "K " << k << " T " << n_tokens << " variant " << variant);
        std::vector<float> x;
        StoredWeights w = random_weights(rng, dtype, rows, k);
        if (variant == 0) {
          x = random_floats(rng, static_cast<std::size_t>(n_tokens * k));
        } else if (variant == 1) {
          x = spread_floats(rng, static_cast<std::size_t>(n_tokens * k));
        } else {
          // Tiny positive x times negative weights: every product underflows to -0 in f32.
          x.assign(static_cast<std::size_t>(n_tokens * k), 1e-40f);
          for (float& v : w.f32) v = -1e-30f;
          for (std::uint16_t& v : w.half) v = 0x8001;  // smallest negative subnormal
        }
        force_isa(Isa::kScalar);
        const std::vector<float> scalar = run_matmul(x, n_tokens, w);
        force_isa(Isa::kAvx2);
        const std::vector<float> avx2 = run_matmul(x, n_tokens, w);
        ASSERT_TRUE(same_bits(scalar, avx2));
        if (variant == 2) {
          // All lanes are -0; the zero padding of a tail turns the padded lanes into +0.
          const std::uint32_t expected = k % 16 == 0 ? 0x80000000u : 0u;
          for (const float v : scalar) ASSERT_EQ(std::bit_cast<std::uint32_t>(v), expected);
        }
        for (std::int64_t n = 0; n < rows; ++n) {
          force_isa(Isa::kScalar);
          const float d_scalar = dot(x.data(), w.row(n), dtype, k);
          force_isa(Isa::kAvx2);
          const float d_avx2 = dot(x.data(), w.row(n), dtype, k);
          ASSERT_EQ(std::bit_cast<std::uint32_t>(d_scalar), std::bit_cast<std::uint32_t>(d_avx2));
          ASSERT_EQ(std::bit_cast<std::uint32_t>(d_scalar),
                    std::bit_cast<std::uint32_t>(scalar[static_cast<std::size_t>(n)]));
        }
      }
    }
  }
}

TEST_P(MatmulTest, TokenRowsDoNotDependOnTokenCount) {
  const DType dtype = GetParam();
  std::mt19937 rng(21);
  for (const Isa isa : available_isas()) {
    force_isa(isa);
    for (const std::int64_t k : {std::int64_t{17}, std::int64_t{100}, std::int64_t{4099}}) {
      for (const std::int64_t n_tokens : {2, 3, 5, 17}) {
        SCOPED_TRACE(::testing::Message()
                     << "isa " << isa_name(isa) << " K " << k << " T " << n_tokens);
        const std::int64_t rows = 11;
        const std::vector<float> x = spread_floats(rng, static_cast<std::size_t>(n_tokens * k));
        const StoredWeights w = random_weights(rng, dtype, rows, k);
        const std::vector<float> batch = run_matmul(x, n_tokens, w);
        for (std::int64_t t = 0; t < n_tokens; ++t) {
          const std::vector<float> x_t(x.begin() + t * k, x.begin() + (t + 1) * k);
          const std::vector<float> single = run_matmul(x_t, 1, w);
          const std::vector<float> row(batch.begin() + t * rows, batch.begin() + (t + 1) * rows);
          ASSERT_TRUE(same_bits(single, row)) << "token " << t;
        }
      }
    }
  }
}

// Every verification size T = 1..16 (and a few prefill sizes, which use narrower column blocks)
// on awkward shapes: row counts that leave partial row groups and thread chunks, K with a tail
// chunk, K spanning several column blocks, a last column block holding only the tail. For every
// T, AVX2 equals scalar bit for bit and each token's row equals that token computed alone.
TEST_P(MatmulTest, EveryTokenCountIsBitExactAndTokenInvariant) {
  const DType dtype = GetParam();
  struct Shape {
    std::int64_t rows;
    std::int64_t cols;
    std::vector<std::int64_t> token_counts;
  };
  std::vector<std::int64_t> verify_counts;
  for (std::int64_t t = 1; t <= 16; ++t) verify_counts.push_back(t);
  const Shape shapes[] = {{37, 1000, verify_counts},
                          {101, 2061, {1, 2, 3, 4, 5, 8, 13}},
                          {7, 16, {1, 2, 3, 6, 9}},
                          {13, 2061, {33, 64, 130}}};
  std::mt19937 rng(77);
  for (const Shape& shape : shapes) {
    const std::int64_t k = shape.cols;
    const std::int64_t rows = shape.rows;
    std::int64_t max_tokens = 0;
    for (const std::int64_t t : shape.token_counts) max_tokens = std::max(max_tokens, t);
    const std::vector<float> x = spread_floats(rng, static_cast<std::size_t>(max_tokens * k));
    const StoredWeights w = random_weights(rng, dtype, rows, k);
    // Every token alone (T = 1), per ISA.
    std::vector<std::vector<float>> singles[3];
    for (const Isa isa : available_isas()) {
      force_isa(isa);
      for (std::int64_t t = 0; t < max_tokens; ++t) {
        const std::vector<float> x_t(x.begin() + t * k, x.begin() + (t + 1) * k);
        singles[static_cast<int>(isa)].push_back(run_matmul(x_t, 1, w));
      }
    }
    for (const std::int64_t n_tokens : shape.token_counts) {
      SCOPED_TRACE(::testing::Message() << "N " << rows << " K " << k << " T " << n_tokens);
      const std::vector<float> x_batch(x.begin(), x.begin() + n_tokens * k);
      std::vector<float> results[3];
      for (const Isa isa : available_isas()) {
        SCOPED_TRACE(::testing::Message() << "isa " << isa_name(isa));
        force_isa(isa);
        const int i = static_cast<int>(isa);
        results[i] = run_matmul(x_batch, n_tokens, w);
        for (std::int64_t t = 0; t < n_tokens; ++t) {
          const std::vector<float> row(results[i].begin() + t * rows,
                                       results[i].begin() + (t + 1) * rows);
          ASSERT_TRUE(same_bits(singles[i][static_cast<std::size_t>(t)], row)) << "token " << t;
        }
      }
      for (const Isa isa : available_isas()) {
        ASSERT_TRUE(same_bits(results[0], results[static_cast<int>(isa)])) << isa_name(isa);
      }
    }
  }
}

// The internal row-range entry point (used for sub-ranges, e.g. by attention) agrees with the
// full matmul for ranges that cut row groups and tiles anywhere.
TEST_P(MatmulTest, RowRangesMatchFullMatmul) {
  const DType dtype = GetParam();
  std::mt19937 rng(31);
  const std::int64_t k = 1000;
  const std::int64_t rows = 29;
  for (const Isa isa : available_isas()) {
    force_isa(isa);
    for (const std::int64_t n_tokens : {1, 2, 3, 7}) {
      SCOPED_TRACE(::testing::Message() << "isa " << isa_name(isa) << " T " << n_tokens);
      const std::vector<float> x = spread_floats(rng, static_cast<std::size_t>(n_tokens * k));
      const StoredWeights w = random_weights(rng, dtype, rows, k);
      const std::vector<float> full = run_matmul(x, n_tokens, w);
      const WeightView view{w.dtype, w.data(), w.rows, w.cols};
      for (const auto& [begin, end] :
           {std::pair<std::int64_t, std::int64_t>{0, 29}, {0, 1}, {5, 12}, {7, 20}, {28, 29}}) {
        std::vector<float> y = nan_filled(static_cast<std::size_t>(n_tokens * rows));
        detail::matmul_rows(isa, x.data(), n_tokens, view, begin, end, y.data());
        for (std::int64_t t = 0; t < n_tokens; ++t) {
          for (std::int64_t n = 0; n < rows; ++n) {
            const std::size_t i = static_cast<std::size_t>(t * rows + n);
            if (n >= begin && n < end) {
              ASSERT_EQ(std::bit_cast<std::uint32_t>(y[i]), std::bit_cast<std::uint32_t>(full[i]))
                  << "rows [" << begin << ", " << end << ") token " << t << " row " << n;
            } else {
              ASSERT_TRUE(std::isnan(y[i]))
                  << "wrote outside rows [" << begin << ", " << end << ")";
            }
          }
        }
      }
    }
  }
}

TEST_P(MatmulTest, ResultDoesNotDependOnThreadCount) {
  const DType dtype = GetParam();
  std::mt19937 rng(5);
  for (const Isa isa : available_isas()) {
    force_isa(isa);
    for (const std::int64_t n_tokens : {1, 5, 8, 13}) {
      SCOPED_TRACE(::testing::Message() << "isa " << isa_name(isa) << " T " << n_tokens);
      const std::int64_t k = 4099;
      const std::int64_t rows = 101;
      const std::vector<float> x = spread_floats(rng, static_cast<std::size_t>(n_tokens * k));
      const StoredWeights w = random_weights(rng, dtype, rows, k);
      set_num_threads(1);
      const std::vector<float> one = run_matmul(x, n_tokens, w);
      set_num_threads(2);
      const std::vector<float> two = run_matmul(x, n_tokens, w);
      set_num_threads(3);
      const std::vector<float> three = run_matmul(x, n_tokens, w);
      EXPECT_TRUE(same_bits(one, two));
      EXPECT_TRUE(same_bits(one, three));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, MatmulTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& param_info) { return dtype_label(param_info.param); });

TEST(MatmulEdgeCases, EmptyReductionGivesZeros) {
  const std::vector<float> x(3, 1.0f);
  std::vector<float> y = nan_filled(6);
  const float w_dummy = 0.0f;
  matmul(x.data(), 3, WeightView{DType::kF32, &w_dummy, 2, 0}, y.data());
  for (const float v : y) EXPECT_EQ(std::bit_cast<std::uint32_t>(v), 0u);
  EXPECT_EQ(dot(x.data(), &w_dummy, DType::kF32, 0), 0.0f);
}

TEST(MatmulEdgeCases, NoTokensWritesNothing) {
  std::vector<float> y = nan_filled(4);
  const std::vector<float> w(8, 1.0f);
  matmul(nullptr, 0, WeightView{DType::kF32, w.data(), 2, 4}, y.data());
  for (const float v : y) EXPECT_TRUE(std::isnan(v));
}

TEST(MatmulEdgeCases, BadArgumentsThrow) {
  const std::vector<float> x(4, 1.0f);
  const std::vector<float> w(8, 1.0f);
  std::vector<float> y(8);
  EXPECT_THROW(matmul(x.data(), -1, WeightView{DType::kF32, w.data(), 2, 4}, y.data()),
               selfspec::Error);
  EXPECT_THROW(matmul(x.data(), 1, WeightView{DType::kF32, nullptr, 2, 4}, y.data()),
               selfspec::Error);
  EXPECT_THROW(matmul(x.data(), 1, WeightView{static_cast<DType>(7), w.data(), 2, 4}, y.data()),
               selfspec::Error);
  EXPECT_THROW(dot(x.data(), w.data(), DType::kF32, -1), selfspec::Error);
}

TEST(CpuFeatures, ForceIsa) {
  IsaGuard guard;
  EXPECT_EQ(isa_name(Isa::kScalar), "scalar");
  EXPECT_EQ(isa_name(Isa::kAvx2), "avx2");
  EXPECT_EQ(isa_name(Isa::kAvx512), "avx512");
  force_isa(Isa::kScalar);
  EXPECT_EQ(active_isa(), Isa::kScalar);
  for (const Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(isa)) {
      force_isa(isa);
      EXPECT_EQ(active_isa(), isa);
    } else {
      force_isa(Isa::kScalar);
      EXPECT_THROW(force_isa(isa), selfspec::Error);
      EXPECT_EQ(active_isa(), Isa::kScalar);
    }
  }
}

// SELFSPEC_CPU_ISA is read once per process, so each case runs in a fresh child process.
int active_isa_with_env(const char* value) {
  setenv("SELFSPEC_CPU_ISA", value, 1);
  try {
    return static_cast<int>(active_isa());
  } catch (const selfspec::Error&) {
    return 10;
  }
}

TEST(CpuFeatures, EnvironmentOverride) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(active_isa_with_env("scalar")), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(std::exit(active_isa_with_env("SCALAR")), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(std::exit(active_isa_with_env("sse9")), ::testing::ExitedWithCode(10), "");
  const int avx2_expected = isa_supported(Isa::kAvx2) ? static_cast<int>(Isa::kAvx2) : 10;
  EXPECT_EXIT(std::exit(active_isa_with_env("avx2")), ::testing::ExitedWithCode(avx2_expected), "");
  const int avx512_expected = isa_supported(Isa::kAvx512) ? static_cast<int>(Isa::kAvx512) : 10;
  EXPECT_EXIT(std::exit(active_isa_with_env("avx512")), ::testing::ExitedWithCode(avx512_expected),
              "");
}

}  // namespace
}  // namespace selfspec::kernels::cpu::test
