// The bf16 panel matmul (kernels/cpu/bf16_matmul.hpp): against a double reference over the
// bf16-rounded activations; every ISA equal to the scalar emulation of vdpbf16ps bit for bit at
// every token count 1..20 and 1 or 2 threads, with subnormal inputs and flushed sums; each token's
// row equal to that token alone.
#include "kernels/cpu/bf16_matmul.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "kernel_test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace selfspec::kernels::cpu::test {
namespace {

struct Packed {
  std::int64_t rows;
  std::int64_t cols;
  std::vector<std::byte> bytes;
  PackedView view() const { return {WeightFormat::kBF16, bytes.data(), rows, cols}; }
};

Packed pack(const StoredWeights& w) {
  Packed p{w.rows, w.cols,
           std::vector<std::byte>(static_cast<std::size_t>(packed_bf16_bytes(w.rows, w.cols)))};
  pack_bf16_rows(w.half.data(), w.rows, w.cols, w.cols, p.bytes);
  return p;
}

std::vector<float> run(const std::vector<float>& x, std::int64_t tokens, const Packed& p) {
  std::vector<float> y = nan_filled(static_cast<std::size_t>(tokens * p.rows + 4));
  bf16_matmul(x.data(), tokens, p.view(), y.data());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(y[y.size() - 1 - i])) << "wrote past y";
  y.resize(static_cast<std::size_t>(tokens * p.rows));
  return y;
}

class Bf16Matmul : public ::testing::Test {
 protected:
  IsaGuard isa_guard_;
  ThreadGuard thread_guard_;
};

TEST_F(Bf16Matmul, MatchesDoubleReferenceOfRoundedActivations) {
  std::mt19937 rng(21);
  for (const std::int64_t cols : {1, 8, 13, 1000}) {
    for (const std::int64_t tokens : {1, 3, 7}) {
      const StoredWeights w = random_weights(rng, DType::kBF16, 19, cols);
      const Packed p = pack(w);
      const std::vector<float> x = random_floats(rng, static_cast<std::size_t>(tokens * cols));
      for (const Isa isa : available_isas()) {
        SCOPED_TRACE(::testing::Message() << isa_name(isa) << " cols " << cols << " T " << tokens);
        force_isa(isa);
        const std::vector<float> y = run(x, tokens, p);
        for (std::int64_t t = 0; t < tokens; ++t) {
          for (std::int64_t r = 0; r < w.rows; ++r) {
            double sum = 0.0;
            double magnitude = 0.0;
            for (std::int64_t c = 0; c < cols; ++c) {
              const double xb = bf16_to_f32(f32_to_bf16(x[static_cast<std::size_t>(t * cols + c)]));
              double wv = w.exact[static_cast<std::size_t>(r * cols + c)];
              if (std::fabs(wv) < 1.1754943508222875e-38) wv = 0.0;  // subnormals read as zero
              sum += xb * wv;
              magnitude += std::fabs(xb * wv);
            }
            const double bound = 1.5 * static_cast<double>((cols + 7) / 8 * 2 + 2) *
                                     std::ldexp(1.0, -24) * magnitude +
                                 1e-30;
            ASSERT_NEAR(y[static_cast<std::size_t>(t * w.rows + r)], sum, bound)
                << "row " << r << " token " << t;
          }
        }
      }
    }
  }
}

TEST_F(Bf16Matmul, EveryIsaEqualsScalarAtEveryTokenCount) {
  std::mt19937 rng(22);
  for (const std::int64_t cols : {5, 64, 1003}) {
    const std::int64_t rows = cols == 1003 ? 300 : 35;  // 300 x 1003: several thread chunks
    const std::int64_t max_tokens = 20;
    const StoredWeights w = random_weights(rng, DType::kBF16, rows, cols);
    const Packed p = pack(w);
    std::vector<float> x = random_floats(rng, static_cast<std::size_t>(max_tokens * cols));
    // Subnormal activations (read as zero) and products whose sums underflow (flushed).
    x[1] = 1e-39f;
    x[static_cast<std::size_t>(cols)] = 3e-39f;
    for (std::int64_t c = 0; c < cols; ++c) {
      x[static_cast<std::size_t>(2 * cols + c)] = std::ldexp(1.0f, -70) * (c % 2 == 0 ? 1 : -1);
    }
    force_isa(Isa::kScalar);
    set_num_threads(1);
    std::vector<std::vector<float>> alone;
    for (std::int64_t t = 0; t < max_tokens; ++t) {
      alone.push_back(
          run(std::vector<float>(x.begin() + t * cols, x.begin() + (t + 1) * cols), 1, p));
    }
    for (const Isa isa : available_isas()) {
      for (const int threads : {1, 2}) {
        force_isa(isa);
        set_num_threads(threads);
        for (std::int64_t tokens = 1; tokens <= max_tokens; ++tokens) {
          SCOPED_TRACE(::testing::Message() << isa_name(isa) << " threads " << threads << " cols "
                                            << cols << " T " << tokens);
          const std::vector<float> y =
              run(std::vector<float>(x.begin(), x.begin() + tokens * cols), tokens, p);
          for (std::int64_t t = 0; t < tokens; ++t) {
            const std::vector<float> row(y.begin() + t * rows, y.begin() + (t + 1) * rows);
            ASSERT_TRUE(same_bits(row, alone[static_cast<std::size_t>(t)])) << "token " << t;
          }
        }
      }
    }
  }
}

TEST_F(Bf16Matmul, BadArgumentsAreErrors) {
  std::mt19937 rng(23);
  const StoredWeights w = random_weights(rng, DType::kBF16, 3, 8);
  const Packed p = pack(w);
  std::vector<float> x(8, 1.0f);
  std::vector<float> y(3);
  EXPECT_THROW(bf16_matmul(x.data(), -1, p.view(), y.data()), selfspec::Error);
  EXPECT_THROW(bf16_matmul(x.data(), 1, {WeightFormat::kQ4_0, p.bytes.data(), 3, 8}, y.data()),
               selfspec::Error);
  EXPECT_THROW(bf16_matmul(x.data(), 1, {WeightFormat::kBF16, p.bytes.data(), 4, 8}, y.data()),
               selfspec::Error);
}

}  // namespace
}  // namespace selfspec::kernels::cpu::test
