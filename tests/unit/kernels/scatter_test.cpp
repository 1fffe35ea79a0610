// scatter_columns against a plain reference (a map from column to compact index) at several
// shapes: no ids, one id, every column, ids in random order, at the first and last column.
#include "kernels/cpu/scatter.hpp"

#include "kernel_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <vector>

namespace selfspec::kernels::cpu::test {
namespace {

// n_ids distinct random columns of [0, width), in random order.
std::vector<std::int32_t> random_ids(std::mt19937& rng, std::int64_t width, std::int64_t n_ids) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(width));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<std::size_t>(n_ids));
  return all;
}

TEST(ScatterColumns, MatchesReference) {
  std::mt19937 rng(5);
  const float fill = -std::numeric_limits<float>::infinity();
  struct Shape {
    std::int64_t rows, width, n_ids;
  };
  for (const Shape s : {Shape{1, 1, 0}, Shape{1, 1, 1}, Shape{2, 7, 3}, Shape{3, 64, 64},
                        Shape{5, 1000, 17}, Shape{17, 4099, 1024}}) {
    SCOPED_TRACE(::testing::Message()
                 << s.rows << " rows, width " << s.width << ", " << s.n_ids << " ids");
    const std::vector<std::int32_t> ids = random_ids(rng, s.width, s.n_ids);
    const std::vector<float> values =
        random_floats(rng, static_cast<std::size_t>(s.rows * s.n_ids), 4.0f);
    std::vector<float> out = nan_filled(static_cast<std::size_t>(s.rows * s.width));
    scatter_columns(values.data(), s.rows, ids.data(), s.n_ids, s.width, fill, out.data());

    std::map<std::int32_t, std::int64_t> slot;  // column -> index into the compact row
    for (std::size_t j = 0; j < ids.size(); ++j) slot[ids[j]] = static_cast<std::int64_t>(j);
    for (std::int64_t r = 0; r < s.rows; ++r) {
      for (std::int64_t i = 0; i < s.width; ++i) {
        const float got = out[static_cast<std::size_t>(r * s.width + i)];
        const auto it = slot.find(static_cast<std::int32_t>(i));
        const float expected =
            it == slot.end() ? fill : values[static_cast<std::size_t>(r * s.n_ids + it->second)];
        ASSERT_EQ(got, expected) << "row " << r << " column " << i;
      }
    }
  }
}

TEST(ScatterColumns, FirstAndLastColumnsAndFillValue) {
  const std::vector<std::int32_t> ids = {9, 0};
  const std::vector<float> values = {1.5f, -2.5f, 3.5f, 4.5f};
  std::vector<float> out = nan_filled(20);
  scatter_columns(values.data(), 2, ids.data(), 2, 10, 7.0f, out.data());
  std::vector<float> expected(20, 7.0f);
  expected[9] = 1.5f;
  expected[0] = -2.5f;
  expected[19] = 3.5f;
  expected[10] = 4.5f;
  EXPECT_EQ(out, expected);
}

}  // namespace
}  // namespace selfspec::kernels::cpu::test
