// apply_rope against a double-precision rotate-half reference and against the literal HF formula
// q * cos + rotate_half(q) * sin.
#include "kernels/cpu/rope.hpp"

#include "core/error.hpp"
#include "kernel_test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace selfspec::kernels::cpu::test {
namespace {

std::vector<float> llama_inv_freq(std::int64_t head_dim, double theta) {
  std::vector<float> inv_freq(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] = static_cast<float>(
        1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim)));
  }
  return inv_freq;
}

// HF apply_rotary_pos_emb for one head, in double: cos/sin are [d] = cat(freqs, freqs),
// rotate_half(q) = cat(-q[d/2:], q[:d/2]).
std::vector<double> hf_rotate(const float* q, std::int64_t d, std::int32_t pos,
                              const std::vector<float>& inv_freq) {
  const std::size_t n = static_cast<std::size_t>(d);
  std::vector<double> cos_full(n), sin_full(n), rotated(n), out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i % (n / 2)];
    cos_full[i] = std::cos(angle);
    sin_full[i] = std::sin(angle);
  }
  for (std::size_t i = 0; i < n / 2; ++i) {
    rotated[i] = -static_cast<double>(q[i + n / 2]);
    rotated[i + n / 2] = q[i];
  }
  for (std::size_t i = 0; i < n; ++i) out[i] = q[i] * cos_full[i] + rotated[i] * sin_full[i];
  return out;
}

TEST(Rope, MatchesRotateHalfReference) {
  std::mt19937 rng(31);
  const float kSentinel = -777.0f;
  for (const std::int64_t head_dim : {2, 8, 64, 128}) {
    for (const std::int64_t n_tokens : {1, 2, 3, 5, 17}) {
      const std::int64_t n_heads = 3;
      const std::int64_t row_stride = n_heads * head_dim + 5;  // padding must stay untouched
      SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << " T " << n_tokens);
      const std::vector<float> inv_freq = llama_inv_freq(head_dim, 10000.0);
      std::vector<std::int32_t> positions(static_cast<std::size_t>(n_tokens));
      std::uniform_int_distribution<std::int32_t> pos_dist(0, 200000);
      for (auto& p : positions) p = pos_dist(rng);
      positions[0] = 0;
      if (n_tokens > 1) positions[1] = 4095;
      std::vector<float> x = random_floats(rng, static_cast<std::size_t>(n_tokens * row_stride), 2);
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        for (std::int64_t i = n_heads * head_dim; i < row_stride; ++i) {
          x[static_cast<std::size_t>(t * row_stride + i)] = kSentinel;
        }
      }
      const std::vector<float> x0 = x;
      apply_rope(x.data(), n_tokens, row_stride, n_heads, head_dim, positions.data(), inv_freq);
      const std::int64_t half = head_dim / 2;
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        const std::int32_t pos = positions[static_cast<std::size_t>(t)];
        for (std::int64_t h = 0; h < n_heads; ++h) {
          const float* in = x0.data() + t * row_stride + h * head_dim;
          const float* got = x.data() + t * row_stride + h * head_dim;
          const std::vector<double> hf = hf_rotate(in, head_dim, pos, inv_freq);
          for (std::int64_t i = 0; i < half; ++i) {
            const double angle = static_cast<double>(pos) * inv_freq[static_cast<std::size_t>(i)];
            const double c = std::cos(angle);
            const double s = std::sin(angle);
            const double a = in[i];
            const double b = in[i + half];
            const double expected_first = a * c - b * s;
            const double expected_second = b * c + a * s;
            const double tol = 4e-7 * (std::fabs(a) + std::fabs(b)) + 1e-30;
            ASSERT_NEAR(got[i], expected_first, tol) << "t " << t << " h " << h << " i " << i;
            ASSERT_NEAR(got[i + half], expected_second, tol);
            ASSERT_NEAR(got[i], hf[static_cast<std::size_t>(i)], tol);
            ASSERT_NEAR(got[i + half], hf[static_cast<std::size_t>(i + half)], tol);
          }
        }
        for (std::int64_t i = n_heads * head_dim; i < row_stride; ++i) {
          ASSERT_EQ(x[static_cast<std::size_t>(t * row_stride + i)], kSentinel);
        }
      }
      // Position 0 is the identity, exactly.
      for (std::int64_t i = 0; i < n_heads * head_dim; ++i) {
        ASSERT_EQ(x[static_cast<std::size_t>(i)], x0[static_cast<std::size_t>(i)]);
      }
      // The last token rotated alone gives the same bits.
      std::vector<float> alone(x0.end() - row_stride, x0.end());
      apply_rope(alone.data(), 1, row_stride, n_heads, head_dim, &positions.back(), inv_freq);
      EXPECT_TRUE(same_bits(alone, std::vector<float>(x.end() - row_stride, x.end())));
    }
  }
}

// The RoPE table (fill_rope_table, built once at load) holds exactly what apply_rope computes per
// call, so apply_rope_table gives its bits: at several head sizes, token counts, positions up to
// 200,000 (llama3-scaled frequencies included via a small theta), and a table filled in two parts
// (the model grows it) equal to one filled at once.
TEST(Rope, TableGivesTheBitsOfThePerCallRotation) {
  std::mt19937 rng(37);
  for (const std::int64_t head_dim : {2, 8, 64, 128}) {
    for (const double theta : {10000.0, 500000.0}) {
      const std::vector<float> inv_freq = llama_inv_freq(head_dim, theta);
      const std::int64_t n_tokens = 19;
      const std::int64_t n_heads = 3;
      const std::int64_t row_stride = n_heads * head_dim + 3;
      std::vector<std::int32_t> positions(static_cast<std::size_t>(n_tokens));
      std::uniform_int_distribution<std::int32_t> pos_dist(0, 200000);
      for (auto& p : positions) p = pos_dist(rng);
      positions[0] = 0;
      positions[1] = 200000;
      const std::int64_t rows = 200001;
      std::vector<float> table(static_cast<std::size_t>(rows * head_dim));
      fill_rope_table(inv_freq, 0, rows, table.data());
      std::vector<float> in_parts(table.size());
      fill_rope_table(inv_freq, 0, 1000, in_parts.data());
      fill_rope_table(inv_freq, 1000, rows - 1000, in_parts.data() + 1000 * head_dim);
      ASSERT_TRUE(same_bits(table, in_parts));

      const std::vector<float> x0 =
          random_floats(rng, static_cast<std::size_t>(n_tokens * row_stride), 2);
      std::vector<float> per_call = x0;
      apply_rope(per_call.data(), n_tokens, row_stride, n_heads, head_dim, positions.data(),
                 inv_freq);
      std::vector<float> from_table = x0;
      apply_rope_table(from_table.data(), n_tokens, row_stride, n_heads, head_dim, positions.data(),
                       table.data(), rows);
      EXPECT_TRUE(same_bits(per_call, from_table)) << "head_dim " << head_dim;
    }
  }
}

// A position the table does not cover is refused, naming it, before anything is rotated.
TEST(Rope, TableRefusesAPositionItDoesNotCover) {
  const std::vector<float> inv_freq = llama_inv_freq(8, 10000.0);
  std::vector<float> table(static_cast<std::size_t>(16 * 8));
  fill_rope_table(inv_freq, 0, 16, table.data());
  std::vector<float> x(16, 1.0f);
  const std::vector<float> x0 = x;
  const std::int32_t positions[] = {3, 16};
  try {
    apply_rope_table(x.data(), 2, 8, 1, 8, positions, table.data(), 16);
    ADD_FAILURE() << "accepted";
  } catch (const selfspec::Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(x, x0);
}

TEST(Rope, BadShapesThrow) {
  std::vector<float> x(16, 1.0f);
  const std::int32_t pos = 3;
  const std::vector<float> inv_freq3(3, 1.0f);
  const std::vector<float> inv_freq4(4, 1.0f);
  EXPECT_THROW(apply_rope(x.data(), 1, 16, 1, 7, &pos, inv_freq3), selfspec::Error);
  EXPECT_THROW(apply_rope(x.data(), 1, 16, 1, 8, &pos, inv_freq3), selfspec::Error);
  EXPECT_THROW(apply_rope(x.data(), 1, 7, 1, 8, &pos, inv_freq4), selfspec::Error);
  EXPECT_NO_THROW(apply_rope(x.data(), 1, 16, 2, 8, &pos, inv_freq4));
}

}  // namespace
}  // namespace selfspec::kernels::cpu::test
