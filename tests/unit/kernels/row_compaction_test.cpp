// compact_rows against the in-order element-by-element reference (row_compaction_cases.hpp) at
// every shared case, bit for bit, with the gaps between blocks untouched (the cases count floats;
// the kernel takes bytes); 2-byte rows (a bf16 KV cache's, odd widths too); a case where each
// destination is the source of an earlier row; and every violated precondition rejected with the
// buffer unchanged.
#include "kernels/cpu/row_compaction.hpp"

#include "core/error.hpp"
#include "kernels/row_compaction_contract.hpp"
#include "row_compaction_cases.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace selfspec::kernels::cpu::test {
namespace {

using ::testing::HasSubstr;

bool moves_a_row(const CompactionCase& c) {
  for (std::size_t i = 0; i < c.from.size(); ++i) {
    if (c.from[i] != c.to + static_cast<std::int64_t>(i)) return true;
  }
  return false;
}

TEST(CompactRows, MatchesInOrderReference) {
  std::mt19937 rng(11);
  for (const CompactionCase& c : compaction_cases(rng)) {
    SCOPED_TRACE(c.name);
    const std::vector<float> original = compaction_buffer(rng, c);
    const std::vector<float> expected = reference_compaction(original, c);
    if (moves_a_row(c)) {
      ASSERT_NE(expected, original);  // the case does test a move
    }
    std::vector<float> buffer = original;
    constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));
    compact_rows(buffer.data(), c.blocks, c.block_stride * kFloat, c.rows_per_block,
                 c.row_floats * kFloat, c.from, c.to);
    EXPECT_EQ(buffer, expected);
  }
}

// Rows of bf16 elements (2 bytes), as a bf16 KV cache keeps them: widths 1, 3 (6-byte rows) and
// 64, against the same in-order reference over 16-bit elements.
TEST(CompactRows, MovesTwoByteRows) {
  std::mt19937 rng(12);
  for (const std::int64_t width : {1, 3, 64}) {
    SCOPED_TRACE(width);
    const std::int64_t rows = 12;
    const std::int64_t stride = rows * width + 5;  // a gap that must stay untouched
    const std::int64_t blocks = 3;
    std::vector<std::uint16_t> original(static_cast<std::size_t>(blocks * stride));
    for (std::uint16_t& e : original) e = static_cast<std::uint16_t>(rng());
    const std::vector<std::int32_t> from = {4, 5, 9, 11};
    const std::int64_t to = 2;
    std::vector<std::uint16_t> expected = original;
    for (std::int64_t b = 0; b < blocks; ++b) {
      for (std::size_t i = 0; i < from.size(); ++i) {
        for (std::int64_t d = 0; d < width; ++d) {
          expected[static_cast<std::size_t>(b * stride +
                                            (to + static_cast<std::int64_t>(i)) * width + d)] =
              expected[static_cast<std::size_t>(b * stride + from[i] * width + d)];
        }
      }
    }
    ASSERT_NE(expected, original);
    std::vector<std::uint16_t> buffer = original;
    compact_rows(buffer.data(), blocks, stride * 2, rows, width * 2, from, to);
    EXPECT_EQ(buffer, expected);
  }
}

// Rows 1, 2, 3 of a 4-row block to rows 0, 1, 2: each destination is the row read just before
// (the order the copies must follow). Row 3 keeps its old value.
TEST(CompactRows, EachDestinationIsAnEarlierSource) {
  std::vector<float> buffer = {10, 11, 20, 21, 30, 31, 40, 41, 50, 51, 60, 61, 70, 71, 80, 81};
  const std::vector<std::int32_t> from = {1, 2, 3};
  compact_rows(buffer.data(), 2, 8 * 4, 4, 2 * 4, from, 0);
  EXPECT_EQ(buffer, (std::vector<float>{20, 21, 30, 31, 40, 41, 40, 41,  //
                                        60, 61, 70, 71, 80, 81, 80, 81}));
}

// The tree-verification use: nodes 0, 2, 5 of a 7-node tree after 3 cached slots (tree slots
// 3..9) are kept at slots 3, 4, 5.
TEST(CompactRows, KeepsAnAcceptedTreePath) {
  std::vector<float> buffer(10);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<float>(i);
  const std::vector<std::int32_t> from = {3, 5, 8};
  compact_rows(buffer.data(), 1, 10 * 4, 10, 4, from, 3);
  EXPECT_EQ(buffer, (std::vector<float>{0, 1, 2, 3, 5, 8, 6, 7, 8, 9}));
}

void expect_rejected(const std::vector<std::int32_t>& from, std::int64_t to,
                     const std::string& message, std::int64_t blocks = 2,
                     std::int64_t block_stride = 8 * 4, std::int64_t rows_per_block = 8) {
  SCOPED_TRACE(message);
  std::vector<float> buffer(2 * 8 * 4);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<float>(i);
  const std::vector<float> original = buffer;
  try {
    compact_rows(buffer.data(), blocks, block_stride, rows_per_block, 4, from, to);  // 4 bytes
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("compact_rows"));
    EXPECT_THAT(e.what(), HasSubstr(message));
  }
  EXPECT_EQ(buffer, original);
}

TEST(CompactRows, RejectsBadArguments) {
  expect_rejected({2, 1}, 0, "from[1] = 1 does not follow from[0] = 2");
  expect_rejected({2, 2}, 0, "from[1] = 2 does not follow");
  expect_rejected({1, 2}, 2, "from[0] = 1 lies before its destination row 2");
  expect_rejected({3, 4}, 3, "from[1] = 4 is outside the 4 rows", 2, 32, 4);
  expect_rejected({3, 4, 8}, 1, "from[2] = 8 is outside the 8 rows");
  expect_rejected({-1}, 0, "from[0] = -1 lies before");
  expect_rejected({1}, -1, "destination row -1 is negative");
  expect_rejected({1}, 0, "bad geometry", 2, 31);  // blocks would overlap
  expect_rejected({1}, 0, "bad geometry", -1);
  expect_rejected({1}, 0, "bad geometry", 2, 32, 0);
  std::vector<std::int32_t> too_many(static_cast<std::size_t>(kMaxCompactedRows + 1));
  for (std::size_t i = 0; i < too_many.size(); ++i) too_many[i] = static_cast<std::int32_t>(i);
  expect_rejected(too_many, 0, "65 rows exceed the limit of 64");
  const std::vector<std::int32_t> from = {1};
  EXPECT_THROW(compact_rows(nullptr, 1, 4, 2, 2, from, 0), Error);
}

TEST(CompactRows, NothingToMoveTouchesNothing) {
  const std::vector<std::int32_t> none;
  compact_rows(nullptr, 5, 8, 2, 4, none, 1);  // no rows: base is never dereferenced
  const std::vector<std::int32_t> from = {0};
  compact_rows(nullptr, 0, 8, 2, 4, from, 0);  // no blocks
}

}  // namespace
}  // namespace selfspec::kernels::cpu::test
