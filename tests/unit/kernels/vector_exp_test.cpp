// The kernels' exp (kernels/cpu/vector_exp.hpp): within 2 ulp of exp over its range, clamped
// outside it, and the same bits on every ISA in SwiGLU and the softmax numerators (including
// odd lengths, zeros, infinities and NaN).
#include "kernels/cpu/vector_exp.hpp"

#include "kernel_test_util.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/elementwise_simd.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace selfspec::kernels::cpu::test {
namespace {

// Distance in units in the last place between two positive finite floats.
std::int64_t ulp_distance(float a, float b) {
  return std::abs(static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a)) -
                  static_cast<std::int64_t>(std::bit_cast<std::int32_t>(b)));
}

TEST(VectorExp, WithinTwoUlpOverItsRange) {
  std::int64_t worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0013f) {
    const auto expected = static_cast<float>(std::exp(static_cast<double>(x)));
    worst = std::max(worst, ulp_distance(exp_canonical(x), expected));
  }
  EXPECT_LE(worst, 2);
  EXPECT_EQ(exp_canonical(0.0f), 1.0f);
  EXPECT_EQ(exp_canonical(-1000.0f), exp_canonical(-87.0f));  // clamped: tiny, never zero
  EXPECT_EQ(exp_canonical(1000.0f), exp_canonical(88.0f));    // clamped: finite
  EXPECT_TRUE(std::isfinite(exp_canonical(std::numeric_limits<float>::infinity())));
}

std::vector<float> awkward_values(std::size_t n) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 6.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  v[0] = 0.0f;
  v[1] = -0.0f;
  v[2] = 200.0f;
  v[3] = -200.0f;
  v[4] = std::numeric_limits<float>::infinity();
  v[5] = -std::numeric_limits<float>::infinity();
  v[6] = std::numeric_limits<float>::quiet_NaN();
  v[7] = 1e-40f;
  return v;
}

TEST(VectorExp, EveryIsaGivesTheScalarBits) {
  IsaGuard guard;
  for (const std::size_t n :
       {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{37}, std::size_t{1000}}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    std::vector<float> gate = awkward_values(std::max<std::size_t>(n, 8));
    gate.resize(n);
    std::vector<float> up(n, 1.5f);
    if (n > 9) up[9] = -3.0f;
    std::vector<float> scalar_swiglu(n);
    std::vector<float> scalar_exp = gate;
    for (std::size_t i = 0; i < n; ++i) {
      scalar_swiglu[i] = swiglu_canonical(gate[i], up[i]);
      scalar_exp[i] = exp_canonical(scalar_exp[i] - 0.75f);
    }
    for (const Isa isa : available_isas()) {
      SCOPED_TRACE(isa_name(isa));
      force_isa(isa);
      std::vector<float> out(n);
      swiglu(gate.data(), up.data(), out.data(), static_cast<std::int64_t>(n));
      EXPECT_TRUE(same_bits(out, scalar_swiglu));
      std::vector<float> shifted = gate;
      if (isa == Isa::kAvx512) {
        detail::exp_shifted_avx512(shifted.data(), 0.75f, static_cast<std::int64_t>(n));
        EXPECT_TRUE(same_bits(shifted, scalar_exp));
      } else if (isa == Isa::kAvx2) {
        detail::exp_shifted_avx2(shifted.data(), 0.75f, static_cast<std::int64_t>(n));
        EXPECT_TRUE(same_bits(shifted, scalar_exp));
      }
    }
  }
}

}  // namespace
}  // namespace selfspec::kernels::cpu::test
