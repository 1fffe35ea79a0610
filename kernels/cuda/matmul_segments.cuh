// The matrices of one GEMV launch (nvcc only), shared by the CUDA-core GEMV (matmul_small_batch.cu,
// whose units are warps) and the tensor-core GEMV (matmul_tensor_core.cu, whose units are blocks):
// up to kMaxMatmulOutputs matrices of one dtype and cols (Wq|Wk|Wv), units numbered over the
// matrices in turn, each unit holding rows_per_unit consecutive rows of one matrix. The SwiGLU
// form ({gate, up}) numbers its units over the gate rows; a unit holds the gate rows and the up
// rows of the same indices, and writes the gate's y.
#pragma once

#include "kernels/cuda/cuda_kernels.hpp"

#include <cstdint>
#include <span>

namespace selfspec::kernels::cuda::detail {

// Units [first_unit, next first_unit) belong to this matrix. The RoPE form's matrices say what
// they do with their head pairs (output; y unused).
struct MatmulSegment {
  const void* w = nullptr;
  std::int64_t rows = 0;
  float* y = nullptr;
  std::int64_t first_unit = 0;
  HeadOutput output = HeadOutput::kRotated;
};
struct MatmulSegments {
  MatmulSegment s[kMaxMatmulOutputs];
  int count = 0;
  std::int64_t total_units = 0;
};

// The segments of `outputs` (empty matrices skipped), each y offset by token_offset token rows.
inline MatmulSegments make_segments(std::span<const MatmulOutput> outputs,
                                    std::int64_t rows_per_unit, std::int64_t token_offset) {
  MatmulSegments segments;
  for (const MatmulOutput& out : outputs) {
    if (out.w.rows == 0) continue;
    MatmulSegment& s = segments.s[segments.count++];
    s.w = out.w.data;
    s.rows = out.w.rows;
    s.y = out.y != nullptr ? out.y + token_offset * out.w.rows : nullptr;
    s.first_unit = segments.total_units;
    segments.total_units += (out.w.rows + rows_per_unit - 1) / rows_per_unit;
  }
  return segments;
}

// The RoPE form: a unit holds rows_per_unit / 2 head pairs (position_step.hpp) of one matrix, so
// rows_per_unit rows as in make_segments (rows a multiple of head_dim, itself a multiple of
// rows_per_unit: no unit straddles a head).
inline MatmulSegments make_head_pair_segments(std::span<const HeadMatmul> outputs,
                                              std::int64_t rows_per_unit) {
  MatmulSegments segments;
  for (const HeadMatmul& out : outputs) {
    MatmulSegment& s = segments.s[segments.count++];
    s.w = out.w.data;
    s.rows = out.w.rows;
    s.first_unit = segments.total_units;
    s.output = out.output;
    segments.total_units += out.w.rows / rows_per_unit;
  }
  return segments;
}

// The SwiGLU form: outputs = {gate (its y the SwiGLU output), up}; units over the gate rows.
inline MatmulSegments make_swiglu_segments(std::span<const MatmulOutput> outputs,
                                           std::int64_t rows_per_unit, std::int64_t token_offset) {
  const MatmulOutput& gate = outputs[0];
  MatmulSegments segments;
  segments.count = 2;
  segments.s[0] = {gate.w.data, gate.w.rows, gate.y + token_offset * gate.w.rows, 0};
  segments.s[1] = {outputs[1].w.data, outputs[1].w.rows, nullptr, 0};
  segments.total_units = (gate.w.rows + rows_per_unit - 1) / rows_per_unit;
  return segments;
}

// The segment of unit `unit` (< total_units), selected without dynamic indexing of the parameter
// array (which would move it to local memory). The SwiGLU form's unit is always in s[0]. Any
// table of segments with s[], count and each segment's first_unit (the quantized GEMV's too).
template <bool kSwiglu, class Segments>
__device__ __forceinline__ auto segment_of(const Segments& segments, std::int64_t unit) {
  auto found = segments.s[0];
  found.first_unit = 0;  // s[0]'s always is: a constant the compiler can fold
  if constexpr (!kSwiglu) {
#pragma unroll
    for (int i = 1; i < kMaxMatmulOutputs; ++i) {
      if (i < segments.count && unit >= segments.s[i].first_unit) found = segments.s[i];
    }
  }
  return found;
}

}  // namespace selfspec::kernels::cuda::detail
