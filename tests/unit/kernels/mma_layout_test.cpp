// The tensor-core GEMV's register layout (kernels/cuda/mma_layout.hpp), checked on the CPU: the
// operands every lane builds from its loads, placed where the PTX ISA says mma.m16n8k16 reads
// them ("Matrix Fragments for mma.m16n8k16 with floating point type", written out below without
// the header), multiply to exactly y = x · Wᵀ over a chunk, and the accumulators land on the token
// and row the header names. A wrong slot here would be a wrong product on the GPU.
#include "kernels/cuda/mma_layout.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>

namespace selfspec::kernels::cuda::mma {
namespace {

struct Coordinate {
  int row;
  int col;
};
// The PTX ISA's formulas (groupID = lane >> 2, threadID_in_group = lane % 4); element i of a
// fragment is half i % 2 of 32-bit register i / 2.
Coordinate ptx_a(int lane, int i) {
  const int group = lane >> 2;
  const int thread = lane % 4;
  const bool low_row = i < 2 || (i >= 4 && i < 6);
  return {low_row ? group : group + 8, thread * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
}
Coordinate ptx_b(int lane, int i) {  // row: k, col: n
  return {(lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0), lane >> 2};
}
Coordinate ptx_c(int lane, int i) {
  return {i < 2 ? lane >> 2 : (lane >> 2) + 8, (lane % 4) * 2 + (i & 1)};
}

TEST(MmaLayout, OneChunkOfLaneLoadsMultipliesToTheProduct) {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> small(-8, 8);
  std::array<std::array<double, kChunk>, kTileTokens> x{};
  std::array<std::array<double, kChunk>, kTileRows> w{};
  for (auto& row : x)
    for (double& v : row) v = small(rng);
  for (auto& row : w)
    for (double& v : row) v = small(rng);

  std::array<std::array<double, kTileRows>, kTileTokens> d{};
  for (int step = 0; step < kChunk / kStepK; ++step) {
    std::array<std::array<double, kStepK>, kTileTokens> a{};
    std::array<std::array<double, kTileRows>, kStepK> b{};
    std::array<std::array<int, kStepK>, kTileTokens> a_set{};
    std::array<std::array<int, kTileRows>, kStepK> b_set{};
    for (int lane = 0; lane < kLanes; ++lane) {
      const int group = lane_group(lane);
      const int first = lane_first_element(lane);
      for (int e = 0; e < kGroupElements; ++e) {
        for (int upper = 0; upper < 2; ++upper) {
          const Slot slot = a_slot(e, upper);
          if (slot.step != step) continue;
          const Coordinate at = ptx_a(lane, 2 * slot.reg + slot.half);
          ASSERT_EQ(at.row, group + 8 * upper) << "lane " << lane << " e " << e;
          a[at.row][at.col] = x[group + 8 * upper][first + e];
          ++a_set[at.row][at.col];
        }
        const Slot slot = b_slot(e);
        if (slot.step != step) continue;
        const Coordinate at = ptx_b(lane, 2 * slot.reg + slot.half);
        ASSERT_EQ(at.col, group) << "lane " << lane << " e " << e;
        b[at.row][at.col] = w[group][first + e];
        ++b_set[at.row][at.col];
      }
    }
    // Every operand element written exactly once, by the same k numbering on both sides.
    for (const auto& row : a_set)
      for (const int n : row) ASSERT_EQ(n, 1);
    for (const auto& row : b_set)
      for (const int n : row) ASSERT_EQ(n, 1);
    for (int t = 0; t < kTileTokens; ++t)
      for (int n = 0; n < kTileRows; ++n)
        for (int k = 0; k < kStepK; ++k) d[t][n] += a[t][k] * b[k][n];
  }
  for (int t = 0; t < kTileTokens; ++t) {
    for (int n = 0; n < kTileRows; ++n) {
      double expected = 0.0;
      for (int k = 0; k < kChunk; ++k) expected += x[t][k] * w[n][k];
      EXPECT_EQ(d[t][n], expected) << "token " << t << " row " << n;
    }
  }
}

TEST(MmaLayout, AccumulatorsLandWhereThePtxLayoutPutsThem) {
  std::array<std::array<int, kTileRows>, kTileTokens> seen{};
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const Cell cell = c_cell(lane, i);
      const Coordinate at = ptx_c(lane, i);
      EXPECT_EQ(cell.token, at.row) << "lane " << lane << " i " << i;
      EXPECT_EQ(cell.row, at.col) << "lane " << lane << " i " << i;
      ++seen[cell.token][cell.row];
    }
  }
  for (const auto& row : seen)
    for (const int n : row) EXPECT_EQ(n, 1);
}

TEST(MmaLayout, WeightRegistersAreTheLoadedWordsInOrder) {
  // A lane's 16-byte load holds elements 2j (low half) and 2j + 1 (high half) in word j.
  for (int e = 0; e < kGroupElements; ++e) {
    const Slot slot = b_slot(e);
    EXPECT_EQ(b_word(slot.step, slot.reg), e / 2) << "e " << e;
    EXPECT_EQ(slot.half, e % 2) << "e " << e;
  }
  // Elements 2i and 2i + 1 of an activation group share a register, 2i in the low half (the
  // kernel converts them together, cvt.rn.bf16x2.f32).
  for (int upper = 0; upper < 2; ++upper) {
    for (int e = 0; e < kGroupElements; e += 2) {
      const Slot even = a_slot(e, upper);
      const Slot odd = a_slot(e + 1, upper);
      EXPECT_EQ(even.step, odd.step);
      EXPECT_EQ(even.reg, odd.reg);
      EXPECT_EQ(even.half, 0);
      EXPECT_EQ(odd.half, 1);
    }
  }
  // The four lanes of a group cover a chunk, 8 elements each, in lane order.
  for (int lane = 0; lane < kLanes; ++lane) {
    EXPECT_EQ(lane_first_element(lane), 8 * (lane % 4));
    EXPECT_EQ(lane_group(lane), lane / 4);
  }
}

}  // namespace
}  // namespace selfspec::kernels::cuda::mma
