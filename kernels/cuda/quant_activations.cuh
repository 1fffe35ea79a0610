// One group of 32 activations quantized by a warp (nvcc only), lane i holding column i: the CPU
// quantizer's bits (kernels/cpu/quant_matmul.hpp). Shared by quantize_activations
// (quant_matmul.cu) and the RMSNorm that quantizes its output as it makes it (elementwise.cu's
// rmsnorm_quantize), so both write the same workspace bytes for the same values.
//
// amax by an xor-butterfly max (exact in any order; a NaN never wins, as on the CPU),
// dx = amax / 127 and the inverse 127 / amax (IEEE divisions), xq = round-to-nearest-even of the
// clamped x · inverse (a NaN product clamps to −127, as the CPU's comparisons do), and the integer
// sums S, S_a, S_b.
#pragma once

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/quant_rows.hpp"

#include <cstdint>

namespace selfspec::kernels::cuda::detail {

// Every lane of the warp calls this with its value v of group g of token t (all 32 lanes: the
// butterflies shuffle over the full warp); `l` is the workspace's layout for `cols` columns.
__device__ __forceinline__ void quantize_group(float v, int lane, std::int64_t t, std::int64_t g,
                                               std::int64_t cols, const QuantActivationsLayout& l,
                                               std::uint8_t* __restrict__ workspace) {
  const std::int64_t tg = t * (cols / kQuantGroupCols) + g;
  float a = fabsf(v);
  a = a > 0.0f ? a : 0.0f;  // a NaN never wins the max (the CPU's `v > amax ? v : amax`)
  float amax = a;
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, amax, offset);
    amax = other > amax ? other : amax;
  }
  const float dx = __fdiv_rn(amax, 127.0f);
  const float inv = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  float w = __fmul_rn(v, inv);
  w = w > -127.0f ? w : -127.0f;
  w = w < 127.0f ? w : 127.0f;
  const int q = __float2int_rn(w);
  reinterpret_cast<std::int8_t*>(workspace + l.q)[t * cols + g * kQuantGroupCols + lane] =
      static_cast<std::int8_t>(q);
  int half_sum = q;  // sums over lanes 0-15 and 16-31 (offsets below 16 stay in the half)
#pragma unroll
  for (int offset = 8; offset > 0; offset /= 2) {
    half_sum += __shfl_xor_sync(kFullMask, half_sum, offset);
  }
  const int other_half = __shfl_xor_sync(kFullMask, half_sum, 16);
  if (lane == 0) {
    const std::int32_t s32 = half_sum + other_half;
    const float s = static_cast<float>(s32);
    reinterpret_cast<float*>(workspace + l.dx)[tg] = dx;
    reinterpret_cast<float*>(workspace + l.s)[tg] = s;
    reinterpret_cast<float*>(workspace + l.dxs)[tg] = __fmul_rn(dx, s);
    reinterpret_cast<std::int32_t*>(workspace + l.s32)[tg] = s32;
    reinterpret_cast<std::int32_t*>(workspace + l.s16)[2 * tg] = half_sum;
    reinterpret_cast<std::int32_t*>(workspace + l.s16)[2 * tg + 1] = other_half;
  }
}

}  // namespace selfspec::kernels::cuda::detail
