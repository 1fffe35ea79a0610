// Exactness of the hand-written dtype conversions in core/dtype.hpp: f16 exhaustively and against
// the F16C hardware conversion (round to nearest even), bf16 against a reference rounding.
#include "core/dtype.hpp"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace selfspec {
namespace {

bool f16_is_nan(std::uint16_t bits) {
  return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
}
bool bf16_is_nan(std::uint16_t bits) {
  return (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0;
}

// The exact value of an f16 encoding, computed independently.
double f16_value(std::uint16_t bits) {
  const double sign = (bits & 0x8000u) != 0 ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

bool have_f16c() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("f16c") != 0;
}

__attribute__((target("f16c"))) std::uint16_t hw_f32_to_f16(float value) {
  return static_cast<std::uint16_t>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
}

__attribute__((target("f16c"))) float hw_f16_to_f32(std::uint16_t bits) {
  return _cvtsh_ss(bits);
}

TEST(F16, DecodeAllPatternsExactly) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = f16_to_f32(bits);
    if (f16_is_nan(bits)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_EQ(std::signbit(f), (b & 0x8000u) != 0) << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(f), f16_value(bits)) << std::hex << b;
      ASSERT_EQ(std::signbit(f), (b & 0x8000u) != 0) << std::hex << b;
    }
  }
}

TEST(F16, RoundTripAllPatterns) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const std::uint16_t back = f32_to_f16(f16_to_f32(bits));
    if (f16_is_nan(bits)) {
      ASSERT_TRUE(f16_is_nan(back)) << std::hex << b;
      ASSERT_EQ(back & 0x8000u, bits & 0x8000u) << std::hex << b;
    } else {
      ASSERT_EQ(back, bits) << std::hex << b;
    }
  }
}

TEST(F16, DecodeMatchesF16C) {
  if (!have_f16c()) GTEST_SKIP() << "CPU lacks F16C";
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float sw = f16_to_f32(bits);
    const float hw = hw_f16_to_f32(bits);
    if (f16_is_nan(bits)) {
      ASSERT_TRUE(std::isnan(sw) && std::isnan(hw)) << std::hex << b;
    } else {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(sw), std::bit_cast<std::uint32_t>(hw))
          << std::hex << b;
    }
  }
}

void expect_encode_matches_hw(float value) {
  const std::uint16_t sw = f32_to_f16(value);
  const std::uint16_t hw = hw_f32_to_f16(value);
  if (std::isnan(value)) {
    ASSERT_TRUE(f16_is_nan(sw) && f16_is_nan(hw)) << value;
    ASSERT_EQ(sw & 0x8000u, hw & 0x8000u);
  } else {
    ASSERT_EQ(sw, hw) << std::hexfloat << value << " bits " << std::hex
                      << std::bit_cast<std::uint32_t>(value);
  }
}

TEST(F16, EncodeMatchesF16COnEdgeValues) {
  if (!have_f16c()) GTEST_SKIP() << "CPU lacks F16C";
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               65504.0f,    // largest finite f16
                               65519.996f,  // just below the overflow threshold
                               65520.0f,    // halfway to 2^16: rounds to Inf
                               65536.0f,
                               1e10f,
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               std::bit_cast<float>(0x7f800001u),  // signalling NaN
                               std::bit_cast<float>(0x7fffffffu),
                               std::ldexp(1.0f, -14),  // smallest normal f16
                               std::ldexp(1.0f, -24),  // smallest subnormal f16
                               std::ldexp(1.0f, -25),  // half of it: ties to even (0)
                               std::nextafter(std::ldexp(1.0f, -25), 1.0f),
                               std::ldexp(3.0f, -26),
                               std::ldexp(1.0f, -26),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::min()};
  // Every f16 value, the midpoints between neighbours (exact in f32: the ties) and the f32
  // values one ulp either side of each midpoint.
  for (std::uint32_t b = 0; b < 0x7c00u; ++b) {
    const float lo = f16_to_f32(static_cast<std::uint16_t>(b));
    const float hi = b + 1 < 0x7c00u ? f16_to_f32(static_cast<std::uint16_t>(b + 1)) : 65536.0f;
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2.0);
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2.0);
    for (const float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      values.push_back(v);
      values.push_back(-v);
    }
  }
  for (const float v : values) expect_encode_matches_hw(v);
}

TEST(F16, EncodeMatchesF16COnRandomBits) {
  if (!have_f16c()) GTEST_SKIP() << "CPU lacks F16C";
  std::mt19937 rng(1);
  std::uniform_int_distribution<std::uint32_t> any;
  // Random bit patterns cover NaN/Inf/huge; random values near the f16 range cover rounding.
  std::uniform_int_distribution<std::uint32_t> near_range(0x33000000u - 0x100000u, 0x47800000u);
  for (int i = 0; i < 1000000; ++i) {
    expect_encode_matches_hw(std::bit_cast<float>(any(rng)));
    expect_encode_matches_hw(std::bit_cast<float>(near_range(rng)));
  }
}

// Reference bf16 rounding: the nearest of the two bf16 neighbours, ties to even; a value beyond
// the largest finite bf16 rounds to the "next" neighbour 2^128, i.e. Inf.
std::uint16_t reference_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = bits & 0x80000000u;
  const std::uint32_t abs = bits & 0x7fffffffu;
  const std::uint32_t lower = abs & 0xffff0000u;
  if ((abs & 0xffffu) == 0) return static_cast<std::uint16_t>((sign | abs) >> 16);
  const std::uint32_t upper = lower + 0x10000u;
  const double v = std::bit_cast<float>(abs);
  const double lo = std::bit_cast<float>(lower);
  const double hi = upper == 0x7f800000u ? std::ldexp(1.0, 128) : std::bit_cast<float>(upper);
  std::uint32_t chosen = 0;
  if (v - lo < hi - v) {
    chosen = lower;
  } else if (v - lo > hi - v) {
    chosen = upper;
  } else {
    chosen = ((lower >> 16) & 1u) == 0 ? lower : upper;
  }
  return static_cast<std::uint16_t>((sign | chosen) >> 16);
}

TEST(Bf16, RoundToNearestEven) {
  // Halfway cases go to the even neighbour.
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80u);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82u);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81u);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f807fffu)), 0x3f80u);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80u);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000u);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80u);  // rounds up to Inf
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80u);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80u);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000u);
  std::mt19937 rng(2);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    const float v = std::bit_cast<float>(any(rng));
    if (std::isnan(v)) continue;
    ASSERT_EQ(f32_to_bf16(v), reference_bf16(v)) << std::hex << std::bit_cast<std::uint32_t>(v);
  }
}

TEST(Bf16, NanStaysQuietNanWithSign) {
  for (const std::uint32_t bits : {0x7f800001u, 0x7fc00000u, 0x7fffffffu, 0xff800001u, 0xffc00000u,
                                   0x7f80ffffu, 0x7f810000u}) {
    const std::uint16_t out = f32_to_bf16(std::bit_cast<float>(bits));
    EXPECT_TRUE(bf16_is_nan(out)) << std::hex << bits;
    EXPECT_NE(out & 0x0040u, 0u) << std::hex << bits;  // quiet
    EXPECT_EQ(out & 0x8000u, (bits >> 16) & 0x8000u) << std::hex << bits;
  }
}

TEST(Bf16, DecodeIsShift) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_f32(static_cast<std::uint16_t>(b));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f), b << 16);
    if (!bf16_is_nan(static_cast<std::uint16_t>(b))) {
      ASSERT_EQ(f32_to_bf16(f), b);
    }
  }
}

TEST(DType, ConvertAndNames) {
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_name(DType::kF16), "f16");
  EXPECT_EQ(dtype_safetensors_name(DType::kBF16), "BF16");
  EXPECT_EQ(parse_dtype("BFloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("F32"), DType::kF32);
  EXPECT_EQ(parse_dtype("half"), DType::kF16);
  EXPECT_FALSE(parse_dtype("int8").has_value());

  const std::vector<float> src = {1.0f, -0.5f, 3.14159f, 65504.0f, 1e-8f};
  std::vector<std::uint16_t> half(src.size());
  convert_dtype(DType::kF32, src.data(), DType::kF16, half.data(), src.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(half[i], f32_to_f16(src[i]));
    EXPECT_EQ(load_as_f32(DType::kF16, half.data(), i), f16_to_f32(half[i]));
  }
  std::vector<std::uint16_t> bf(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) store_from_f32(DType::kBF16, bf.data(), i, src[i]);
  for (std::size_t i = 0; i < src.size(); ++i) EXPECT_EQ(bf[i], f32_to_bf16(src[i]));
}

}  // namespace
}  // namespace selfspec
