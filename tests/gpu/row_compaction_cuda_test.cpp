// The CUDA compact_rows against the CPU kernel, bit for bit, at every shared case
// (tests/unit/kernels/row_compaction_cases.hpp) on a 16-byte-aligned buffer (the float4 path where
// rows allow it) and on a buffer one float off alignment (the float path); and the CUDA side's
// argument check, which runs before any launch and so needs no device.
#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu/row_compaction.hpp"
#include "kernels/row_compaction_contract.hpp"
#include "tests/unit/kernels/row_compaction_cases.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace selfspec::kernels::cuda::test {
namespace {

using cpu::test::compaction_buffer;
using cpu::test::compaction_cases;
using cpu::test::CompactionCase;

TEST(CudaCompactRows, MatchesCpuExactly) {
  SELFSPEC_REQUIRE_GPU();
  std::mt19937 rng(31);
  for (const CompactionCase& c : compaction_cases(rng)) {
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      SCOPED_TRACE(::testing::Message() << c.name << ", buffer offset " << offset << " floats");
      const std::vector<float> original = compaction_buffer(rng, c);
      std::vector<float> expected = original;
      cpu::compact_rows(expected.data(), c.blocks, c.block_stride, c.rows_per_block, c.row_floats,
                        c.from, c.to);
      std::vector<float> padded(offset, 0.0f);
      padded.insert(padded.end(), original.begin(), original.end());
      DeviceBuffer<float> d_buffer(padded);
      compact_rows(d_buffer.get() + offset, c.blocks, c.block_stride, c.rows_per_block,
                   c.row_floats, c.from, c.to, nullptr);
      const std::vector<float> got = d_buffer.download();
      EXPECT_TRUE(same_bits(
          std::vector<float>(got.begin() + static_cast<std::ptrdiff_t>(offset), got.end()),
          expected));
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
