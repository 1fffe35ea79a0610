// The bandwidth-probe kernels: stream_read sums like a plain double reference (f32 rounding
// allowed) whatever the length and ISA; stream_copy copies exactly.
#include "kernels/cpu/memory_stream.hpp"
#include "kernels/cpu/cpu_features.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace selfspec::kernels::cpu {
namespace {

class MemoryStream : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
    force_isa(GetParam());
  }
  void TearDown() override { force_isa(detected_isa()); }
};

TEST_P(MemoryStream, ReadSumsEveryElementOnce) {
  for (std::int64_t n : {0, 1, 63, 64, 65, 1000, 70001, 1 << 20}) {
    std::vector<float> data(static_cast<std::size_t>(n));
    double expected = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      data[static_cast<std::size_t>(i)] = static_cast<float>((i * 37) % 101) * 0.25f;
      expected += data[static_cast<std::size_t>(i)];
    }
    const double got = stream_read(data.data(), n);
    EXPECT_NEAR(got, expected, 1e-5 * std::max(1.0, expected)) << "n = " << n;
  }
}

TEST_P(MemoryStream, CopyIsExact) {
  for (std::int64_t n : {1, 17, 70001, 1 << 20}) {
    std::vector<float> src(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      src[static_cast<std::size_t>(i)] = std::sin(static_cast<float>(i));
    std::vector<float> dst(src.size(), NAN);
    stream_copy(src.data(), dst.data(), n);
    EXPECT_EQ(src, dst) << "n = " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, MemoryStream, ::testing::Values(Isa::kScalar, Isa::kAvx2),
                         [](const auto& test_info) {
                           return std::string(isa_name(test_info.param));
                         });

}  // namespace
}  // namespace selfspec::kernels::cpu
