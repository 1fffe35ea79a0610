// Helpers shared by the kernel tests: random data, NaN poisoning, weights stored in each dtype and
// an independent decoder of those weights to double. Nothing here calls kernel code, so the naive
// references in the tests are independent of the implementation under test.
#pragma once

#include "core/dtype.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/cpu_features.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace selfspec::kernels::cpu::test {

inline constexpr DType kAllDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// Uniform values in [-scale, scale], never all zero.
inline std::vector<float> random_floats(std::mt19937& rng, std::size_t n, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  if (n > 0) v[0] = scale * 0.5f;
  return v;
}

inline std::vector<float> nan_filled(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// Decodes one stored element to double, written independently of core/dtype.
inline double decode_bf16(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

inline double decode_f16(std::uint16_t bits) {
  const int sign = (bits & 0x8000) != 0 ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(static_cast<double>(mantissa), -24);
  return sign * std::ldexp(static_cast<double>(mantissa + 1024), exponent - 25);
}

// A weight matrix stored in a given dtype plus its exact values in double.
struct StoredWeights {
  DType dtype = DType::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<float> f32;
  std::vector<std::uint16_t> half;  // bf16 or f16 bits
  std::vector<double> exact;        // the stored values, decoded

  const void* data() const {
    return dtype == DType::kF32 ? static_cast<const void*>(f32.data())
                                : static_cast<const void*>(half.data());
  }
  const void* row(std::int64_t n) const {
    return dtype == DType::kF32 ? static_cast<const void*>(f32.data() + n * cols)
                                : static_cast<const void*>(half.data() + n * cols);
  }
};

// Random weights in [-scale, scale]; a few bf16/f16 elements are subnormal or zero to exercise
// exact conversion of those encodings.
inline StoredWeights random_weights(std::mt19937& rng, DType dtype, std::int64_t rows,
                                    std::int64_t cols, float scale = 1.0f) {
  StoredWeights w;
  w.dtype = dtype;
  w.rows = rows;
  w.cols = cols;
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  const std::vector<float> values = random_floats(rng, n, scale);
  w.exact.resize(n);
  std::uniform_int_distribution<int> pick(0, 63);
  std::uniform_int_distribution<int> small_mantissa(1, 0x3ff);
  if (dtype == DType::kF32) {
    w.f32 = values;
    for (std::size_t i = 0; i < n; ++i) w.exact[i] = w.f32[i];
    return w;
  }
  w.half.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits32;
    std::memcpy(&bits32, &values[i], sizeof bits32);
    std::uint16_t bits = 0;
    if (dtype == DType::kBF16) {
      bits = static_cast<std::uint16_t>(bits32 >> 16);  // truncation is fine for test data
      if (pick(rng) == 0) bits = static_cast<std::uint16_t>((bits & 0x8000u) | 0x0001u);
      w.exact[i] = decode_bf16(bits);
    } else {
      // f16 by hand: sign, exponent in [-14, 0] range of values |v| <= 1 (scale 1), mantissa.
      const double v = values[i];
      const double mag = std::fabs(v);
      int e = 0;
      const double m = std::frexp(mag, &e);  // mag = m * 2^e, m in [0.5, 1)
      int exponent = e - 1 + 15;             // biased
      std::uint16_t encoded = 0;
      if (exponent >= 1 && exponent <= 30) {
        const int mantissa = static_cast<int>((m * 2.0 - 1.0) * 1024.0);  // truncate
        encoded = static_cast<std::uint16_t>((exponent << 10) | mantissa);
      }
      if (pick(rng) == 0) encoded = static_cast<std::uint16_t>(small_mantissa(rng));  // subnormal
      bits = static_cast<std::uint16_t>(encoded | (v < 0 ? 0x8000u : 0u));
      w.exact[i] = decode_f16(bits);
    }
    w.half[i] = bits;
  }
  return w;
}

// The ISAs this CPU can run.
inline std::vector<Isa> available_isas() {
  std::vector<Isa> isas{Isa::kScalar};
  for (const Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

// Restores the detected ISA when a test ends.
class IsaGuard {
 public:
  IsaGuard() = default;
  ~IsaGuard() { force_isa(detected_isa()); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;
};

// Restores the worker thread count when a test ends.
class ThreadGuard {
 public:
  ThreadGuard() : saved_(num_threads()) {}
  ~ThreadGuard() { set_num_threads(saved_); }
  ThreadGuard(const ThreadGuard&) = delete;
  ThreadGuard& operator=(const ThreadGuard&) = delete;

 private:
  int saved_;
};

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline std::string dtype_label(DType dtype) {
  return std::string(dtype_name(dtype));
}

}  // namespace selfspec::kernels::cpu::test
