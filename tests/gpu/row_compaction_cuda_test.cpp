// The CUDA compact_rows against the CPU kernel, bit for bit, at every shared case
// (tests/unit/kernels/row_compaction_cases.hpp, rows of floats; the kernels take bytes) on a
// 16-byte-aligned buffer (16-byte lanes where rows allow it) and on a buffer one float off
// alignment (4-byte lanes); rows of bf16 elements (a bf16 KV cache's: 2-byte elements, rows of 2,
// 6, 16, 128, 256 and 512 bytes, blocks 16-byte aligned or not, buffers offset by 0, 1, 2 and 4
// bytes: every lane width); and the CUDA side's argument check, which runs before any launch and
// so needs no device.
#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu/row_compaction.hpp"
#include "kernels/row_compaction_contract.hpp"
#include "tests/unit/kernels/row_compaction_cases.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

using cpu::test::compaction_buffer;
using cpu::test::compaction_cases;
using cpu::test::CompactionCase;
using cpu::test::pattern_rows;
using cpu::test::row_pattern_name;
using cpu::test::RowPattern;

TEST(CudaCompactRows, MatchesCpuExactly) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(31);
  for (const CompactionCase& c : compaction_cases(rng)) {
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      SCOPED_TRACE(::testing::Message() << c.name << ", buffer offset " << offset << " floats");
      const std::vector<float> original = compaction_buffer(rng, c);
      std::vector<float> expected = original;
      constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));
      cpu::compact_rows(expected.data(), c.blocks, c.block_stride * kFloat, c.rows_per_block,
                        c.row_floats * kFloat, c.from, c.to);
      std::vector<float> padded(offset, 0.0f);
      padded.insert(padded.end(), original.begin(), original.end());
      DeviceBuffer<float> d_buffer(padded);
      compact_rows(d_buffer.get() + offset, c.blocks, c.block_stride * kFloat, c.rows_per_block,
                   c.row_floats * kFloat, c.from, c.to, nullptr);
      const std::vector<float> got = d_buffer.download();
      EXPECT_TRUE(same_bits(
          std::vector<float>(got.begin() + static_cast<std::ptrdiff_t>(offset), got.end()),
          expected));
    }
  }
}

// Rows of bf16 elements against the CPU kernel, bit for bit over the whole buffer (the gaps
// between blocks untouched): row widths of 1, 3 (6-byte rows, no 4-byte lane fits), 8, 64, 128 and
// 256 elements; a gap of 0, 5 (blocks off 4- and 16-byte alignment) or 8 elements (16 bytes: a
// 64-element row on a 16-byte-aligned buffer takes 16-byte lanes); random and every-other rows;
// the buffer at byte offsets 0, 1, 2 and 4 from a 256-byte-aligned allocation.
TEST(CudaCompactRows, MovesBf16RowsLikeTheCpu) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(32);
  constexpr std::int64_t kElement = 2;  // bytes of a bf16
  for (const std::int64_t width : {1, 3, 8, 64, 128, 256}) {
    for (const std::int64_t gap : {0, 5, 8}) {
      for (const std::int64_t n : {1, 5, 64}) {
        for (const RowPattern pattern : {RowPattern::kRandom, RowPattern::kEveryOther}) {
          const std::int64_t blocks = 3;
          const std::int64_t to = std::uniform_int_distribution<std::int64_t>(0, 6)(rng);
          const std::int64_t rows_per_block = to + 2 * n + 1;
          const std::int64_t block_stride = (rows_per_block * width + gap) * kElement;
          const std::vector<std::int32_t> from = pattern_rows(rng, pattern, rows_per_block, to, n);
          const auto bytes = static_cast<std::size_t>(blocks * block_stride);
          std::vector<std::uint8_t> original(bytes);
          for (std::uint8_t& byte : original) byte = static_cast<std::uint8_t>(rng());
          std::vector<std::uint8_t> expected = original;
          cpu::compact_rows(expected.data(), blocks, block_stride, rows_per_block, width * kElement,
                            from, to);
          if (pattern == RowPattern::kEveryOther) {
            ASSERT_FALSE(expected == original) << "the case moves no row";
          }
          for (const std::size_t offset :
               {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
            SCOPED_TRACE(::testing::Message()
                         << blocks << " blocks x " << rows_per_block << " rows of " << width
                         << " bf16, gap " << gap << ", " << n << " " << row_pattern_name(pattern)
                         << " rows to " << to << ", buffer offset " << offset << " bytes");
            std::vector<std::uint8_t> padded(offset, 0);
            padded.insert(padded.end(), original.begin(), original.end());
            DeviceBuffer<std::uint8_t> d_buffer(padded);
            compact_rows(d_buffer.get() + offset, blocks, block_stride, rows_per_block,
                         width * kElement, from, to, nullptr);
            const std::vector<std::uint8_t> got = d_buffer.download();
            EXPECT_TRUE(std::equal(got.begin() + static_cast<std::ptrdiff_t>(offset), got.end(),
                                   expected.begin(), expected.end()));
          }
        }
      }
    }
  }
}

TEST(CudaCompactRows, RejectsBadArgumentsBeforeLaunching) {
  const std::vector<std::int32_t> descending = {2, 1};
  const std::vector<std::int32_t> before_destination = {1, 2};
  const std::vector<std::int32_t> outside = {3, 8};
  const std::vector<std::int32_t> too_many(static_cast<std::size_t>(kMaxCompactedRows + 1), 0);
  const std::vector<std::int32_t> one = {1};
  float* const no_buffer = nullptr;  // never dereferenced: every call fails its check first
  EXPECT_THROW(compact_rows(no_buffer, 2, 32, 8, 4, descending, 0, nullptr), Error);
  EXPECT_THROW(compact_rows(no_buffer, 2, 32, 8, 4, before_destination, 2, nullptr), Error);
  EXPECT_THROW(compact_rows(no_buffer, 2, 32, 8, 4, outside, 0, nullptr), Error);
  EXPECT_THROW(compact_rows(no_buffer, 2, 32, 8, 4, too_many, 0, nullptr), Error);
  EXPECT_THROW(compact_rows(no_buffer, 2, 31, 8, 4, one, 0, nullptr), Error);  // blocks overlap
  EXPECT_THROW(compact_rows(no_buffer, 2, 32, 8, 4, one, 0, nullptr), Error);  // null buffer
}

}  // namespace
}  // namespace selfspec::kernels::cuda::test
