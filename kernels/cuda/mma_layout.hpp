// The register layout of the tensor-core GEMV (kernels/cuda/matmul_tensor_core.cu): how a lane's
// loads of activations and weights become the operands of mma.sync.m16n8k16 (bf16 inputs, f32
// accumulators), and where the accumulators land. Host-device and free of CUDA headers, so that
// kernels_test (mma_layout_test.cpp) checks it on the CPU against the PTX ISA's fragment layout
// ("Matrix Fragments for mma.m16n8k16 with floating point type").
//
// The product is y = x · Wᵀ with the tokens as the mma's M (16 per tile, operand A, row-major)
// and the weight rows as its N (8 per tile, operand B, "col": B[k][n] = W[n][k]). The PTX layout
// gives lane (group g = lane / 4, thread q = lane % 4) the k values 2q, 2q + 1, 2q + 8, 2q + 9 of
// each step. A dot product does not care how k is numbered as long as A and B agree, so the
// kernel renumbers: a chunk is 32 consecutive k (two mma steps), and lane q reads the 8
// consecutive elements [8q, 8q + 8) of the chunk (16 bytes of a bf16 weight row, two float4 of
// an activation row), elements 0-3 feeding step 0 and elements 4-7 step 1. Each lane loads whole
// 16-byte groups, and the four lanes of a group read a row's 64 contiguous bytes.
#pragma once

#include "kernels/host_device.hpp"

namespace selfspec::kernels::cuda::mma {

inline constexpr int kTileTokens = 16;    // M of one mma: tokens
inline constexpr int kTileRows = 8;       // N of one mma: weight rows (outputs)
inline constexpr int kStepK = 16;         // K of one mma
inline constexpr int kChunk = 32;         // k elements per chunk: two mma steps
inline constexpr int kGroupElements = 8;  // a lane's consecutive elements of a row in a chunk
inline constexpr int kLanes = 32;

// The lane's group (its token row, and its weight row within an 8-row tile).
SELFSPEC_HOST_DEVICE constexpr int lane_group(int lane) {
  return lane / 4;
}
// The first element, within a chunk, of the lane's 8 consecutive elements.
SELFSPEC_HOST_DEVICE constexpr int lane_first_element(int lane) {
  return kGroupElements * (lane % 4);
}

// A place in a lane's operand registers: mma step (0 or 1 within the chunk), 32-bit register of
// that step's fragment, and half of the register (0: the low 16 bits).
struct Slot {
  int step;
  int reg;
  int half;
};

// Activations (A): element e (0-7) of the lane's group, for token lane_group(lane) + 8 * upper
// (upper 0 or 1) of the 16-token tile.
SELFSPEC_HOST_DEVICE constexpr Slot a_slot(int e, int upper) {
  return {e / 4, ((e % 4) / 2) * 2 + upper, e % 2};
}
// Weights (B): element e (0-7) of the lane's group of weight row lane_group(lane) of the tile.
// Element e sits in 32-bit word e / 2 of the lane's 16-byte load (low half for even e), so
// register `reg` of step `step` is word b_word(step, reg) of that load, as loaded.
SELFSPEC_HOST_DEVICE constexpr Slot b_slot(int e) {
  return {e / 4, (e % 4) / 2, e % 2};
}
SELFSPEC_HOST_DEVICE constexpr int b_word(int step, int reg) {
  return 2 * step + reg;
}

// Accumulator i (0-3) of a lane: its token (0-15) and weight row (0-7) within the 16 × 8 tile.
struct Cell {
  int token;
  int row;
};
SELFSPEC_HOST_DEVICE constexpr Cell c_cell(int lane, int i) {
  return {lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2};
}

}  // namespace selfspec::kernels::cuda::mma
