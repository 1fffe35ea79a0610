// Internal entry points of the matmul kernels, shared by matmul.cpp, matmul_avx2.cpp and
// attention.cpp; not part of the public interface.
//
// The *_avx2 functions are plain (baseline x86-64) declarations: their definitions in
// matmul_avx2.cpp forward to static functions compiled with
// __attribute__((target("avx2,fma,f16c"))) and may only be called when detected_isa() is
// Isa::kAvx2. No AVX2 code lives in this header.
#pragma once

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/matmul.hpp"

#include <cstdint>

namespace selfspec::kernels::cpu::detail {

// Single-threaded block of a matmul: y[t * w.rows + n] = dot(x + t * w.cols, row n of w) for
// t < n_tokens and row_begin <= n < row_end, in the canonical order of matmul.hpp.
void matmul_rows(Isa isa, const float* x, std::int64_t n_tokens, const WeightView& w,
                 std::int64_t row_begin, std::int64_t row_end, float* y);

void matmul_rows_scalar(const float* x, std::int64_t n_tokens, const WeightView& w,
                        std::int64_t row_begin, std::int64_t row_end, float* y);
void matmul_rows_avx2(const float* x, std::int64_t n_tokens, const WeightView& w,
                      std::int64_t row_begin, std::int64_t row_end, float* y);

// The AVX2 path with x prepared once per matmul and shared by all row chunks: prepare_x_avx2
// writes prepared_x_floats(n_tokens, w.cols) floats (x zero-padded and laid out for the weight
// dtype and token count); matmul_rows_prepared_avx2 then computes the same outputs as
// matmul_rows_avx2 for any row range.
std::int64_t prepared_x_floats(std::int64_t n_tokens, std::int64_t cols);
void prepare_x_avx2(const float* x, std::int64_t n_tokens, const WeightView& w, float* out);
void matmul_rows_prepared_avx2(const float* x_prepared, std::int64_t n_tokens, const WeightView& w,
                               std::int64_t row_begin, std::int64_t row_end, float* y);

float dot_scalar(const float* x, const void* w, DType w_dtype, std::int64_t n);
float dot_avx2(const float* x, const void* w, DType w_dtype, std::int64_t n);

}  // namespace selfspec::kernels::cpu::detail
