// ggml quantization (quantize_ggml): the 32-block types equal gguf-py's quantizers byte for byte;
// every type's round trip through dequantize_ggml stays within an error bound derived from the
// data alone (below), with an RMS error near what uniform quantization noise predicts; zeros stay
// exactly zero where the format can hold a zero; the symmetric 32-block types are stable under
// a second round trip; sizes, unsupported types and unrepresentable values are rejected.
//
// The bounds. e = 2^-11 is the relative rounding of an f32 scale to f16 (round to nearest; the
// test data keep every scale a normal f16), and "tiny" (1e-5 of the block's largest magnitude)
// absorbs f32 rounding in the quantizer's and dequantizer's arithmetic.
//   * Q4_0 / Q5_0: d = m / -8 (/ -16), m the block's value of largest magnitude, so x / d lies in
//     [-8, 8] ([-16, 16]) and the levels are -8..7 (-16..15): an element is within d / 2 of a
//     level unless x / d > 7.5 (15.5), where it clips to 7 (15), |x| - 7|d| (15|d|) away. The
//     quants are chosen with the f32 d and dequantized with its f16 rounding, which moves level k
//     by |k| e |d| <= 8 e |d| (16 e |d|). Bound: max(|d| / 2, |x| - 7|d|) + 8 e |d| + tiny.
//   * Q8_0: d = max|x| / 127, no clipping (|x / d| <= 127): d / 2 + 127 e d + tiny.
//   * Q4_1 / Q5_1: d = (max - min) / 15 (31), x - min in [0, 15d]: d / 2 from the rounding,
//     15 e d (31 e d) from d's f16 rounding, e |min| from min's. Bound: d / 2 + 15 e d + e |min| +
//     tiny.
//   * Q4_K / Q5_K (top T = 15 / 31): sub-block j (32 elements) wants the offset m'_j = max(0,
//     -min_j) and the step (max_j + offset_j) / T. dmin is the smallest f16 whose 63 multiple
//     reaches D = max_j m'_j, so dmin <= (D / 63)(1 + 2^-8) (nearest f16, then at most a step or
//     two up, each 2^-10 relative); offset_j <= m'_j + dmin; d <= (S / 63)(1 + 2^-8) with S the
//     largest wanted step, and each sub-block's step d * sc <= its wanted step + d. Nothing clips
//     (the steps and offsets are rounded up), so the bound is half of that step: ((max_j + m'_j +
//     dmin_bound) / T + d_bound) / 2 + tiny.
//   * Q6_K: sub-block j (16 elements) wants the step s_j = max|x| / 32 (its largest magnitude is
//     level -32); d <= (max_j s_j / 127)(1 + 2^-8) and the step's magnitude lies in [s_j, s_j + d].
//     As in Q4_0 only x / step > 31.5 clips: bound max((s_j + d_bound) / 2, |x| - 31 s_j) + tiny.
// The bounds are sharp: on the test data the largest error / bound ratio is 0.977 (Q8_0) to 0.999
// (Q4_0). The RMS relative errors on N(0, 1) data are checked against 1.3x the uniform-noise
// prediction (step / sqrt(12) for the steps each format takes on Gaussian blocks).
#include "kernels/cpu/ggml_quantize.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "kernels/cpu/ggml_dequantize.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace selfspec {
namespace {

using ::testing::HasSubstr;

constexpr GgmlType kQuantTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                    GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ4_K,
                                    GgmlType::kQ5_K, GgmlType::kQ6_K};

constexpr double kF16Rounding = 0x1p-11;      // e: relative rounding of a scale to f16
constexpr double kF16RoundedUp = 1 + 0x1p-8;  // the K formats' super-block scales, rounded up

std::string type_name(GgmlType type) {
  return std::string(ggml_type_name(type));
}

std::vector<std::byte> quantize(GgmlType type, std::span<const float> x) {
  std::vector<std::byte> out(ggml_row_bytes(type, static_cast<std::int64_t>(x.size())));
  quantize_ggml(type, x, out);
  return out;
}

std::vector<float> dequantize(GgmlType type, std::span<const std::byte> bytes, std::size_t n) {
  std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
  dequantize_ggml(type, bytes, out);
  return out;
}

std::vector<float> round_trip(GgmlType type, std::span<const float> x) {
  return dequantize(type, quantize(type, x), x.size());
}

double max_abs(std::span<const float> x) {
  double m = 0.0;
  for (const float v : x) m = std::max(m, std::fabs(static_cast<double>(v)));
  return m;
}

// The signed value of largest magnitude (the first on ties).
double signed_absmax(std::span<const float> x) {
  double best = 0.0;
  for (const float v : x) {
    if (std::fabs(v) > std::fabs(best)) best = v;
  }
  return best;
}

// Per-element error bounds of one block of `type` (see the file comment), from the data alone.
std::vector<double> block_bounds(GgmlType type, std::span<const float> x) {
  const double e = kF16Rounding;
  const double tiny = 1e-5 * max_abs(x);
  std::vector<double> bound(x.size(), tiny);
  const auto symmetric = [&](double half) {  // Q4_0 (half 8), Q5_0 (16)
    const double d = std::fabs(signed_absmax(x)) / half;
    for (std::size_t i = 0; i < x.size(); ++i) {
      bound[i] += std::max(d / 2, std::fabs(x[i]) - (half - 1) * d) + half * e * d;
    }
  };
  const auto affine = [&](double top) {  // Q4_1 (top 15), Q5_1 (31)
    const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
    const double d = (static_cast<double>(*hi) - *lo) / top;
    for (double& b : bound) b += d / 2 + top * e * d + e * std::fabs(*lo);
  };
  const auto k_format = [&](double top) {  // Q4_K (top 15), Q5_K (31)
    std::vector<double> wanted_offset(8);
    std::vector<double> sub_max(8);
    for (std::size_t s = 0; s < 8; ++s) {
      const auto sub = x.subspan(32 * s, 32);
      const auto [lo, hi] = std::minmax_element(sub.begin(), sub.end());
      wanted_offset[s] = std::max(0.0, -static_cast<double>(*lo));
      sub_max[s] = *hi;
    }
    const double dmin =
        *std::max_element(wanted_offset.begin(), wanted_offset.end()) / 63.0 * kF16RoundedUp;
    std::vector<double> wanted_step(8);
    for (std::size_t s = 0; s < 8; ++s) {
      wanted_step[s] = std::max(0.0, (sub_max[s] + wanted_offset[s] + dmin) / top);
    }
    const double d =
        *std::max_element(wanted_step.begin(), wanted_step.end()) / 63.0 * kF16RoundedUp;
    for (std::size_t i = 0; i < x.size(); ++i) bound[i] += (wanted_step[i / 32] + d) / 2;
  };
  switch (type) {
    case GgmlType::kQ4_0:
      symmetric(8);
      break;
    case GgmlType::kQ5_0:
      symmetric(16);
      break;
    case GgmlType::kQ8_0: {
      const double d = max_abs(x) / 127;
      for (double& b : bound) b += d / 2 + 127 * e * d;
      break;
    }
    case GgmlType::kQ4_1:
      affine(15);
      break;
    case GgmlType::kQ5_1:
      affine(31);
      break;
    case GgmlType::kQ4_K:
      k_format(15);
      break;
    case GgmlType::kQ5_K:
      k_format(31);
      break;
    case GgmlType::kQ6_K: {
      std::vector<double> wanted_step(16);
      for (std::size_t s = 0; s < 16; ++s) wanted_step[s] = max_abs(x.subspan(16 * s, 16)) / 32;
      const double d =
          *std::max_element(wanted_step.begin(), wanted_step.end()) / 127 * kF16RoundedUp;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double step = wanted_step[i / 16];
        bound[i] += std::max((step + d) / 2, std::fabs(x[i]) - 31 * step);
      }
      break;
    }
    default:
      ADD_FAILURE() << "no bound for " << type_name(type);
  }
  return bound;
}

// Checks every element of the round trip of x against its bound; returns the RMS error relative
// to the RMS of x.
double check_round_trip(GgmlType type, std::span<const float> x) {
  const std::vector<float> y = round_trip(type, x);
  const auto block = static_cast<std::size_t>(ggml_block_elements(type));
  double err2 = 0.0;
  double x2 = 0.0;
  int reported = 0;
  for (std::size_t start = 0; start < x.size(); start += block) {
    const std::vector<double> bound = block_bounds(type, x.subspan(start, block));
    for (std::size_t j = 0; j < block; ++j) {
      const std::size_t i = start + j;
      const double err = std::fabs(static_cast<double>(y[i]) - x[i]);
      if (!(err <= bound[j]) && reported++ < 5) {
        ADD_FAILURE() << type_name(type) << " element " << i << ": x " << x[i] << " -> " << y[i]
                      << ", error " << err << " > bound " << bound[j];
      }
      err2 += err * err;
      x2 += static_cast<double>(x[i]) * x[i];
    }
  }
  return x2 > 0 ? std::sqrt(err2 / x2) : std::sqrt(err2);
}

std::vector<float> normal(std::mt19937& rng, std::size_t n, float sigma) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

std::vector<float> uniform(std::mt19937& rng, std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

std::string hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const std::byte b : bytes) {
    out += kDigits[std::to_integer<int>(b) >> 4];
    out += kDigits[std::to_integer<int>(b) & 0xF];
  }
  return out;
}

// Three blocks of 32: a spread of signed values, small values, and a block whose largest
// magnitude occurs with both signs (ggml takes the first). Each value is f32 arithmetic that
// numpy's float32 repeats exactly.
std::vector<float> gguf_py_input() {
  std::vector<float> x;
  for (int i = 0; i < 32; ++i) x.push_back(static_cast<float>((i * 37) % 61 - 30) / 7.0f);
  for (int i = 0; i < 32; ++i) {
    x.push_back(static_cast<float>((i * i * 13) % 101 - 50) / 9.0f * 0.01f);
  }
  for (int i = 0; i < 32; ++i) x.push_back((i % 2 != 0 ? 2.5f : -2.5f) * (i % 5 == 0 ? 1 : 0.3f));
  return x;
}

// gguf_py_input() quantized by gguf-py 0.19.0 (numpy 2.4.6), gguf.quants.quantize(x, type), whose
// 32-block quantizers are bit-exact ports of ggml-quants.c's quantize_row_*_ref.
TEST(GgmlQuantize, MatchesGgufPyBitForBit) {
  const struct {
    GgmlType type;
    const char* bytes;
  } cases[] = {
      {GgmlType::kQ4_0,
       "4938b05af39d27c16af49e37d16bf5ae38d21c1ff032b88381c45a1524770ed9f94ce4bf003560aa66aa06af"
       "66aa66fa60aa66aa06af"},
      {GgmlType::kQ4_1,
       "923849c4b059e38d27b05af49d27c16af49e38c15c1f1cabf032b87281c35a1524770ed9e84cd4bf553500c1"
       "50aa55aa05af55aa55fa50aa55aa05af"},
      {GgmlType::kQ5_0,
       "49344a69adb570a4e71b4e81b5f82c5f92c6f93d60a31c1b44bc35d8f06471f50297a43a48ee0cb3d188b76f"
       "0031aaaaaaaab055bb550b5fbb55bbf5b055bb550b5f"},
      {GgmlType::kQ5_1,
       "6d3449c44a69adb560a3d71a4d71b4e82b5e82c5f93c60931f1b1cab44bc35d8f06471f50297a43a48ee0cb3"
       "d188b76f293100c1aaaaaaaab044bb440b4fbb44bbf4b044bb440b4f"},
      {GgmlType::kQ8_0,
       "5228811eb855ef8926c05df8922fc966009a37d16e08a340da7711ab48e27f19b4502b0f81a205aa90b924d0"
       "beee61140a42bb7775b435f8fd45cd98a5f384566bc159330a258126da26da7fda26da268126da26da7fda26"
       "da268126da26da7fda26da268126"},
  };
  const std::vector<float> x = gguf_py_input();
  for (const auto& c : cases) {
    EXPECT_EQ(hex(quantize(c.type, x)), c.bytes) << type_name(c.type);
  }
}

TEST(GgmlQuantize, RoundTripWithinBounds) {
  std::mt19937 rng(7);
  for (const GgmlType type : kQuantTypes) {
    for (const std::size_t n : {256, 768, 4096}) {
      SCOPED_TRACE(type_name(type) + " n " + std::to_string(n));
      check_round_trip(type, normal(rng, n, 1.0f));
      check_round_trip(type, normal(rng, n, 0.02f));  // weight-like magnitudes
      check_round_trip(type, uniform(rng, n, -1.0f, 1.0f));
      check_round_trip(type, uniform(rng, n, 0.5f, 2.0f));     // all positive: Q*_1/K mins
      check_round_trip(type, uniform(rng, n, -30.0f, -3.0f));  // all negative
    }
    if (ggml_block_elements(type) == 32) {  // sizes below a super-block
      for (const std::size_t n : {32, 96}) {
        SCOPED_TRACE(type_name(type) + " n " + std::to_string(n));
        check_round_trip(type, normal(rng, n, 1.0f));
      }
    }
  }
}

TEST(GgmlQuantize, OutlierStaysWithinBounds) {
  std::mt19937 rng(11);
  for (const GgmlType type : kQuantTypes) {
    SCOPED_TRACE(type_name(type));
    for (const float outlier : {1000.0f, -1000.0f}) {
      for (const std::size_t at : {0, 5, 77, 255}) {
        std::vector<float> x = normal(rng, 512, 1.0f);
        x[at] = outlier;
        check_round_trip(type, x);
        // The outlier itself: within the bound, which for Q4_0 / Q5_0 / Q6_K means nearly exact
        // (it is level -8, -16 or -32), and never with its sign flipped.
        const std::vector<float> y = round_trip(type, x);
        EXPECT_GT(y[at] * outlier, 0.0f);
      }
    }
  }
}

// RMS error relative to the data's RMS on N(0, 1), against 1.3x the uniform-noise prediction
// sqrt(E[step^2] / 12). For blocks of 32 normals E max|x| ~ 2.35 (RMS 2.39) and E range ~ 4.14
// (RMS 4.18); for 16, RMS max|x| ~ 2.13 (numpy, 1e5 blocks). Predicted / measured (seed 3, 2^16
// elements): Q4_0 2.39 / 8 -> 0.086 / 0.0858; Q5_0 / 16 -> 0.043 / 0.0426; Q8_0 / 127 -> 0.0054 /
// 0.0053; Q4_1 4.18 / 15 -> 0.081 / 0.0781; Q5_1 / 31 -> 0.039 / 0.0376; Q4_K and Q5_K as Q4_1
// and Q5_1 plus the rounded-up 6-bit scale (a step of at most 1/63 of the largest) -> 0.0799,
// 0.0391 measured; Q6_K 2.13 / 32 -> 0.019 / 0.0191.
TEST(GgmlQuantize, RmsErrorOnGaussianData) {
  const struct {
    GgmlType type;
    double max_rms;
  } cases[] = {
      {GgmlType::kQ4_0, 0.112}, {GgmlType::kQ4_1, 0.105},  {GgmlType::kQ5_0, 0.056},
      {GgmlType::kQ5_1, 0.051}, {GgmlType::kQ8_0, 0.0071}, {GgmlType::kQ4_K, 0.11},
      {GgmlType::kQ5_K, 0.055}, {GgmlType::kQ6_K, 0.025},
  };
  for (const auto& c : cases) {
    std::mt19937 rng(3);
    const std::vector<float> x = normal(rng, 1 << 16, 1.0f);
    const double rms = check_round_trip(c.type, x);
    EXPECT_LT(rms, c.max_rms) << type_name(c.type);
    EXPECT_GT(rms, c.max_rms / 4) << type_name(c.type) << ": suspiciously small";
  }
}

TEST(GgmlQuantize, ZerosStayZero) {
  std::mt19937 rng(5);
  for (const GgmlType type : kQuantTypes) {
    SCOPED_TRACE(type_name(type));
    // All-zero input: every format's scales become 0 and every value exactly 0.
    const std::vector<float> zeros(512, 0.0f);
    for (const float v : round_trip(type, zeros)) ASSERT_EQ(v, 0.0f);
    // An all-zero block (Q4_1 / Q5_1) or sub-block (K formats) among random ones.
    // Elements 64..95: a block of 32, a Q4_K / Q5_K sub-block, two Q6_K sub-blocks.
    const std::size_t zero_run = 32;
    std::vector<float> x = normal(rng, 512, 1.0f);
    std::fill_n(x.begin() + 64, zero_run, 0.0f);
    const std::vector<float> y = round_trip(type, x);
    for (std::size_t i = 64; i < 64 + zero_run; ++i) ASSERT_EQ(y[i], 0.0f) << "element " << i;
  }
  // The symmetric formats hold 0 in every block: scattered zeros come back exactly.
  for (const GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ5_0, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    SCOPED_TRACE(type_name(type));
    std::vector<float> x = normal(rng, 1024, 1.0f);
    for (std::size_t i = 0; i < x.size(); i += 3) x[i] = 0.0f;
    const std::vector<float> y = round_trip(type, x);
    for (std::size_t i = 0; i < x.size(); i += 3) ASSERT_EQ(y[i], 0.0f) << "element " << i;
  }
}

// Values already on a symmetric 32-block grid quantize back to the same bytes: the level of
// largest magnitude is -8 (-16, +-127) times the f16 d, so the new d is that f16 d exactly, and
// every value divides back to its integer level.
TEST(GgmlQuantize, SymmetricFormatsAreStable) {
  std::mt19937 rng(13);
  for (const GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ5_0, GgmlType::kQ8_0}) {
    SCOPED_TRACE(type_name(type));
    for (const float sigma : {1.0f, 0.02f, 40.0f}) {
      const std::vector<float> x = normal(rng, 2048, sigma);
      const std::vector<std::byte> q = quantize(type, x);
      const std::vector<float> y = dequantize(type, q, x.size());
      const std::vector<std::byte> q2 = quantize(type, y);
      EXPECT_EQ(q2, q);
      const std::vector<float> y2 = dequantize(type, q2, x.size());
      ASSERT_EQ(std::memcmp(y2.data(), y.data(), y.size() * sizeof(float)), 0);
    }
  }
  // The other formats need not be byte-stable, but re-quantizing their output moves no element
  // by more than its bound again.
  for (const GgmlType type :
       {GgmlType::kQ4_1, GgmlType::kQ5_1, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    SCOPED_TRACE(type_name(type));
    const std::vector<float> y = round_trip(type, normal(rng, 2048, 1.0f));
    check_round_trip(type, y);
  }
}

// Blocks are independent: quantizing a span equals quantizing its pieces at block boundaries.
TEST(GgmlQuantize, BlocksAreIndependent) {
  std::mt19937 rng(17);
  for (const GgmlType type : kQuantTypes) {
    SCOPED_TRACE(type_name(type));
    const std::vector<float> x = normal(rng, 1024, 1.0f);
    const std::vector<std::byte> whole = quantize(type, x);
    std::vector<std::byte> pieces = quantize(type, std::span(x).first(256));
    const std::vector<std::byte> rest = quantize(type, std::span(x).subspan(256));
    pieces.insert(pieces.end(), rest.begin(), rest.end());
    EXPECT_EQ(whole, pieces);
  }
}

TEST(GgmlQuantize, FloatTypesConvert) {
  std::mt19937 rng(19);
  const std::vector<float> x = normal(rng, 100, 3.0f);
  EXPECT_EQ(round_trip(GgmlType::kF32, x), x);
  const std::vector<float> h = round_trip(GgmlType::kF16, x);
  const std::vector<float> b = round_trip(GgmlType::kBF16, x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], f16_to_f32(f32_to_f16(x[i])));
    EXPECT_EQ(b[i], bf16_to_f32(f32_to_bf16(x[i])));
  }
}

TEST(GgmlQuantize, EmptyInputIsNoOp) {
  for (const GgmlType type : kQuantTypes) EXPECT_NO_THROW(quantize_ggml(type, {}, {}));
}

TEST(GgmlQuantize, RejectsBadSizes) {
  for (const GgmlType type : kQuantTypes) {
    SCOPED_TRACE(type_name(type));
    const auto block = static_cast<std::size_t>(ggml_block_elements(type));
    const auto block_bytes = static_cast<std::size_t>(ggml_block_bytes(type));
    // A partial block.
    {
      const std::vector<float> src(block + 1, 1.0f);
      std::vector<std::byte> dst(2 * block_bytes);
      try {
        quantize_ggml(type, src, dst);
        ADD_FAILURE() << "accepted " << src.size() << " elements";
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr(type_name(type)));
        EXPECT_THAT(e.what(), HasSubstr(std::to_string(block + 1)));
        EXPECT_THAT(e.what(), HasSubstr(std::to_string(block)));
      }
    }
    // A destination of the wrong size.
    const std::vector<float> src(2 * block, 1.0f);
    for (const std::size_t wrong : {2 * block_bytes - 1, 2 * block_bytes + 1, std::size_t{0}}) {
      std::vector<std::byte> dst(wrong);
      try {
        quantize_ggml(type, src, dst);
        ADD_FAILURE() << "accepted " << wrong << " bytes";
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr(type_name(type)));
        EXPECT_THAT(e.what(), HasSubstr(std::to_string(2 * block_bytes) + " bytes"));
        EXPECT_THAT(e.what(), HasSubstr(std::to_string(wrong)));
      }
    }
  }
}

TEST(GgmlQuantize, RejectsUnsupportedTypesAndValues) {
  EXPECT_TRUE(ggml_quantize_supported(GgmlType::kF32));
  EXPECT_TRUE(ggml_quantize_supported(GgmlType::kBF16));
  for (const GgmlType type : kQuantTypes) EXPECT_TRUE(ggml_quantize_supported(type));
  for (const GgmlType type : {GgmlType::kQ2_K, GgmlType::kQ3_K}) {
    EXPECT_FALSE(ggml_quantize_supported(type));
    const std::vector<float> src(256, 1.0f);
    std::vector<std::byte> dst(ggml_row_bytes(type, 256));
    try {
      quantize_ggml(type, src, dst);
      ADD_FAILURE() << "quantized " << type_name(type);
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(type_name(type)));
    }
  }
  for (const GgmlType type : kQuantTypes) {
    SCOPED_TRACE(type_name(type));
    for (const float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity()}) {
      std::vector<float> src(256, 1.0f);
      src[100] = bad;
      std::vector<std::byte> dst(ggml_row_bytes(type, 256));
      try {
        quantize_ggml(type, src, dst);
        ADD_FAILURE() << "accepted " << bad;
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("element 100"));
      }
    }
    // Magnitudes whose scale (or Q4_1 / Q5_1's f16 min) overflows f16.
    std::vector<float> huge(256, 1.0f);
    huge[3] = -3e38f;
    std::vector<std::byte> dst(ggml_row_bytes(type, 256));
    EXPECT_THROW(quantize_ggml(type, huge, dst), Error);
  }
  // Q4_1's min is an f16: -1e5 does not fit, though Q4_0's scale 1e5 / 8 would.
  std::vector<float> big(32, 0.0f);
  big[0] = -1e5f;
  std::vector<std::byte> q4_1(ggml_row_bytes(GgmlType::kQ4_1, 32));
  std::vector<std::byte> q4_0(ggml_row_bytes(GgmlType::kQ4_0, 32));
  EXPECT_THROW(quantize_ggml(GgmlType::kQ4_1, big, q4_1), Error);
  EXPECT_NO_THROW(quantize_ggml(GgmlType::kQ4_0, big, q4_0));
}

}  // namespace
}  // namespace selfspec
